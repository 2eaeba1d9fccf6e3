#!/usr/bin/env python3
"""Drop-in for the old Phase 3 bootstrap script: same flags (--out, --bytes), now resumable and verified.

    python scripts/automation/fwe_bootstrap.py --out /data/fwe_bootstrap.jsonl --bytes 5000000000
    python scripts/automation/fwe_bootstrap.py --out /data/fwe_bootstrap --bytes 5G --shard-mod 4 --shard-rem 1

--bytes takes a byte count or a size with a suffix (K, M, G, T: powers of 1000; KiB, MiB, GiB: powers of 1024).
An --out ending in .jsonl gives one file (manifest beside it), as the old script did; anything else a
directory of parts. All the work is done by fwe_cli.bootstrap.run (the code behind `fwe bootstrap`), so an
interrupted run resumes when re-run with the same flags. Exit codes are those of `fwe bootstrap --help`. Runs
with the Python that has fwe installed (the project's .venv).
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading

from fwe_cli.bootstrap.config import bootstrap_config
from fwe_cli.bootstrap.run import run_bootstrap
from fwe_cli.cli.exit_codes import EXIT_INTERRUPTED, EXIT_USAGE, exit_code_for, one_line
from fwe_cli.errors import FweError

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str) -> int:
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 5000000000, 5G or 4.5GiB)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output .jsonl file, or a directory for parts")
    parser.add_argument("--bytes", required=True, type=parse_bytes, help="how much JSONL to stage (5000000000, 5G)")
    parser.add_argument("--source", choices=("hub", "local", "synthetic"), help="default hub (local with --local-path)")
    parser.add_argument("--local-path", help="local JSONL/TXT/parquet source")
    parser.add_argument("--dataset", help="Hub dataset (default HuggingFaceFW/fineweb-edu)")
    parser.add_argument("--name", "--config", dest="name", help="Hub dataset config (default sample-10BT)")
    parser.add_argument("--split", help="Hub split (default train)")
    parser.add_argument("--shard-mod", type=int)
    parser.add_argument("--shard-rem", type=int)
    parser.add_argument("--fields", choices=("text", "all"))
    parser.add_argument("--force", action="store_true", help="start over, replacing an existing output")
    args = parser.parse_args(argv)
    stop = threading.Event()

    def on_signal(signum, frame) -> None:  # first Ctrl-C/SIGTERM: save a resume point and stop; second: abort
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    def report(info: dict) -> None:
        print(f"bootstrap: {info['bytes'] / 1e9:.3f}/{info['target_bytes'] / 1e9:.3f} GB, {info['documents']:,} docs, "
              f"{info['mb_per_s']:.1f} MB/s", file=sys.stderr, flush=True)

    try:
        config = bootstrap_config(out=args.out, target_bytes=args.bytes, source=args.source,
                                  local_path=args.local_path, dataset=args.dataset, name=args.name, split=args.split,
                                  shard_mod=args.shard_mod, shard_rem=args.shard_rem, fields=args.fields,
                                  force=args.force)
        result = run_bootstrap(config, on_progress=report, should_stop=stop.is_set)
    except FweError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return exit_code_for(exc) or EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted: re-run the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result["outcome"] == "interrupted":
        print("interrupted: resume point saved; re-run the same command to continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    print(f"done: {result['bytes']:,} bytes, {result['documents']:,} docs in {result['files']} file(s) at "
          f"{result['output']}; manifest {result['manifest_path']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
