"""Seal a Python process onto 127.0.0.1: put this folder on PYTHONPATH and Python imports it at startup.

    PYTHONPATH=tests/hubsim/sealed HUBSIM_VIOLATIONS=/tmp/v.jsonl python -m fwe_cli smoke --source hub ...

- An audit hook (sys.addaudithook) watches `socket.connect` and `socket.getaddrinfo`: an internet
  address or any host name other than localhost is refused with PermissionError and, when
  HUBSIM_VIOLATIONS names a file, appended to it as a JSON line, so a test can assert the file stays
  empty even when a client swallows the error.
- `datasets.config.USE_PARQUET_EXPORT` is set to False as soon as datasets loads its config (an import
  hook, so `datasets` is not imported early): otherwise datasets asks the dataset viewer at
  `datasets-server.<HF_ENDPOINT host>` for exported parquet infos, a host this server cannot be.
  HUBSIM_PARQUET_EXPORT=1 leaves the lookup on.
"""

import importlib.machinery
import json
import os
import socket
import sys

_LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost", None, b"127.0.0.1", b"localhost"}
_VIOLATIONS = os.environ.get("HUBSIM_VIOLATIONS")


def _violation(event: str, target) -> None:
    if _VIOLATIONS:
        with open(_VIOLATIONS, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"event": event, "target": repr(target), "pid": os.getpid()}) + "\n")
    raise PermissionError(f"hubsim sealed: {event} to {target!r} refused (only 127.0.0.1 may be reached)")


def _audit(event: str, args) -> None:
    if event == "socket.connect":
        sock, address = args
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in _LOCAL_HOSTS:
            _violation(event, address)
    elif event == "socket.getaddrinfo":
        if args[0] not in _LOCAL_HOSTS:
            _violation(event, args[0])


class _ParquetExportOff:
    """Meta-path finder that patches datasets.config right after it executes, then removes itself."""

    def find_spec(self, name, path, target=None):
        if name != "datasets.config":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.USE_PARQUET_EXPORT = False

        spec.loader.exec_module = exec_module
        return spec


sys.addaudithook(_audit)
if os.environ.get("HUBSIM_PARQUET_EXPORT") != "1":
    sys.meta_path.insert(0, _ParquetExportOff())
