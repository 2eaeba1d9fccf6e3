"""pytest fixtures for the test Hub (loaded by tests/conftest.py through `pytest_plugins`).

- `hubsim_root` (session): small repos built once per run (2 shards of one 1,000-row row group, ~4 MB; ~1.5 s),
  shared by the run's pytest-xdist workers.
- `hubsim_server` (session): the server on an ephemeral 127.0.0.1 port, stopped at the end.
- `hub` (function): a `HubRun` on that server with no faults and an empty request log; faults, RTT
  proxy and request log are reset afterwards.
- `moving_hub` (function): a `HubRun` on a server of its own over the same repos, whose `main` may move
  (`HubRun.move_main`) without the other tests seeing it.
- `cdn` (function): a second server on the same repos, for the Hub's redirects to lead to (another host:port).

Clients run in subprocesses whose environment comes from `HubRun.env(home)`: HF_ENDPOINT set before any
client is imported, a cold (or reused) HF_HOME, download counts, telemetry and datasets' parquet-export
lookup off, and the sealed sitecustomize that refuses (and records) any connection beyond 127.0.0.1.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import orjson
import pytest

from tests.hubsim.clientenv import client_env
from tests.hubsim.faults import Faults
from tests.hubsim.proxy import RttProxy
from tests.hubsim.repos import DATASET_REPO, BuildSpec, build_repos
from tests.hubsim.server import HubServer

TEST_SPEC = BuildSpec(mb=3.0, shards=2)


class HubRun:
    """One run against the shared server: its faults, its request log, its client environments."""

    def __init__(self, server: HubServer, workdir: Path, own_server: bool = False):
        self.server = server
        self.own_server = own_server
        """The server is this run's alone (stopped by `close`): its `main` may move."""
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.violations_file = self.workdir / "violations.jsonl"
        self.proxy: RttProxy | None = None
        self._homes = 0
        server.set_faults(Faults())
        server.new_log(self.workdir / "requests.jsonl")

    @property
    def url(self) -> str:
        """The HF_ENDPOINT clients use: the RTT proxy when one is on, else the server."""
        return self.proxy.url if self.proxy else self.server.url

    def set_faults(self, **fields) -> Faults:
        faults = Faults(**fields)
        self.server.set_faults(faults)
        return faults

    def add_rtt(self, rtt_s: float, handshake_rtts: int = 2) -> RttProxy:
        """Put a TCP proxy adding `rtt_s` per exchange (and handshake_rtts per connection) in front."""
        if self.proxy is not None:
            self.proxy.stop()
        self.proxy = RttProxy(("127.0.0.1", self.server.port), rtt_s, handshake_rtts).start()
        return self.proxy

    def new_log(self, name: str) -> None:
        """Start a fresh request log (workdir/<name>.jsonl), e.g. between a cold and a warm run."""
        self.server.new_log(self.workdir / f"{name}.jsonl")

    def requests(self) -> list[dict]:
        """The request log so far, in arrival order, after every answer given is logged (server.flush)."""
        return self.server.flush()

    def new_home(self) -> Path:
        """A fresh, empty HF_HOME: a cold cache."""
        self._homes += 1
        home = self.workdir / f"hf_home_{self._homes}"
        home.mkdir()
        return home

    def env(self, home: Path) -> dict[str, str]:
        """Environment for a client subprocess (for conftest's run_fwe(env=...) or subprocess.run)."""
        return client_env(self.url, home, self.violations_file)

    def violations(self) -> list[dict]:
        """Connections the sealed clients tried beyond 127.0.0.1 (each was refused)."""
        if not self.violations_file.exists():
            return []
        return [orjson.loads(line) for line in self.violations_file.read_bytes().splitlines() if line.strip()]

    def move_main(self) -> tuple[str, str]:
        """Move the dataset's `main` to a new commit: its files less the first parquet shard, so that its stream
        starts at what was row 1,000 (the commit before stays readable by its sha). Returns (sha before, sha now).
        Only on a server of the run's own (`moving_hub`)."""
        if not self.own_server:
            raise RuntimeError("move_main needs a server of the run's own (the moving_hub fixture)")
        before = self.server.store.repo("datasets", DATASET_REPO)
        first = min(path for path in before.files if path.endswith(".parquet"))
        folder = self.workdir / f"commit-{before.sha[:12]}-next"
        for path, file in before.files.items():
            if path != first:
                (folder / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file.disk, folder / path)
        return before.sha, self.server.store.move_main("datasets", DATASET_REPO, folder).sha

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
            self.proxy = None
        self.server.set_faults(Faults())
        if self.own_server:
            self.server.stop()


@pytest.fixture(scope="session")
def hubsim_root(tmp_path_factory) -> Path:
    """Hub-like repos (fineweb-edu sample-10BT, ~4 MB, + gpt2 tokenizer.json), read-only for the tests. Built once per
    run: under pytest-xdist the first worker to need them builds them (under a lock, renamed into place whole) in
    the run's temporary folder, which every worker of the run shares; without xdist, in this session's own."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        root = tmp_path_factory.mktemp("hubsim_root")
        build_repos(root, TEST_SPEC)
        return root
    run_dir = tmp_path_factory.getbasetemp().parent  # pytest-N/, the workers' popen-gwK/ folders' parent
    root = run_dir / "hubsim_root"
    with open(run_dir / "hubsim_root.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not root.is_dir():
            building = run_dir / f"hubsim_root.building-{os.getpid()}"
            shutil.rmtree(building, ignore_errors=True)
            build_repos(building, TEST_SPEC)
            building.rename(root)
    return root


@pytest.fixture(scope="session")
def hubsim_server(hubsim_root):
    """The test Hub server on an ephemeral 127.0.0.1 port for the whole session."""
    server = HubServer(hubsim_root).start()
    yield server
    server.stop()


@pytest.fixture
def hub(hubsim_server, tmp_path):
    """A fault-free run on the session server with its own request log; reset afterwards."""
    run = HubRun(hubsim_server, tmp_path / "hub")
    yield run
    run.close()


@pytest.fixture
def moving_hub(hubsim_root, tmp_path):
    """A fault-free run on a server of its own over the session's repos (its `main` may move); stopped afterwards."""
    run = HubRun(HubServer(hubsim_root).start(), tmp_path / "hub", own_server=True)
    yield run
    run.close()


@pytest.fixture
def cdn(hubsim_root):
    """A second test server on the same repos, on a port of its own: the CDN a redirect fault (redirect_to=cdn.url)
    sends the Hub's file reads to, another host:port as far as a client can tell."""
    server = HubServer(hubsim_root).start()
    yield server
    server.stop()


@pytest.fixture
def hub_env(hub, monkeypatch, tmp_path):
    """This process's Hub clients (fwe's native reader reads the environment when called) pointed at the test
    server, with an empty cache of their own (a cold start)."""
    home = tmp_path / "hf_home"
    for name, value in {"HF_ENDPOINT": hub.url, "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
                        "HF_HUB_OFFLINE": "0"}.items():
        monkeypatch.setenv(name, value)
    return hub


@pytest.fixture
def stalled_listing(hub) -> dict[str, str]:
    """A client environment for the test Hub with its file listing (paths-info) never answered, and a client that
    would wait a minute for it: a cold Hub start that hangs far past a loader's deadline and the watchdog's grace
    (a Hub that answers nothing at all is given up on after 3 s: hub.api.OPEN_TIMEOUT_S)."""
    hub.set_faults(stall_match="paths-info")
    return {**hub.env(hub.new_home()), "HF_HUB_DOWNLOAD_TIMEOUT": "60"}
