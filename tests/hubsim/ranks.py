"""Many ranks of `fwe smoke --source hub` started together against the test Hub, grouped into nodes: a node is one
HF_HOME its ranks share and a HubServer of its own (on the same repos), so each server's request log is one node's
requests. For tests/loader/test_hub_ranks.py and scripts/bench/hub_ranks.py.

    with Job(root, workdir, nodes=2, ranks_per_node=3) as job:
        cold = job.run("cold")                               # every rank spawned at once; waits for all of them
        warm = job.run("warm")                               # the same HF_HOMEs
        job.new_homes()
        burst = job.run("burst", faults=[Faults(fail_count=5, fail_status=429, fail_distinct=True)] * 2)

    with Job(root, workdir, nodes=4, ranks_per_node=8, cdn_ttl_s=3600) as job:   # the Hub's redirects to a CDN
        cold = job.run("cold")
        cold.resolves_per_node(), cold.cdn                 # resolver requests per node; the CDN's request log

Ranks get RANK and WORLD_SIZE (global, as torchrun/srun set them), so each reads its shard; each saves its batches
(byte tokenizer) and writes its heartbeat. `metadata(records)` counts what the Hub is asked about the dataset (its
revision, paths-info, the HEAD that checks a branch), not the parquet range reads, and not huggingface_hub's own
once-a-day agent registry lookup (/api/agent-harnesses, cached per HF_HOME by the client itself).
`resolves(records)` counts the requests to the Hub's resolver (`/resolve/`, which the Hub limits per 5 minutes):
`file_resolves` those for data files, `branch_checks` the HEADs of ranks started after their node's listing. With
`cdn_ttl_s`, every node's server redirects parquet resolves to one CDN server (another host:port) with signed URLs
valid that long, as the Hub does (tests/hubsim/cdn.py).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson

from tests.hubsim.bench import PARQUET_RESOLVES
from tests.hubsim.clientenv import REPO_ROOT, client_env
from tests.hubsim.faults import Faults
from tests.hubsim.repos import DATA_DIR, DATASET_REPO
from tests.hubsim.server import HubServer

METADATA = ("GET /api/datasets/{repo}/revision/", "POST /api/datasets/{repo}/paths-info/",
            "HEAD /datasets/{repo}/resolve/")
# A rank's process waits for its stdin to close (once every rank's process exists), then becomes `fwe smoke` (exec keeps
# the process, so its start time): every rank starts before any of them asks the Hub, as torchrun or srun start them
# (a loaded machine spawning them one by one would otherwise start some after their node's listing was checked, and
# such a rank checks the branch itself: hub/listing.py's FRESH_S).
START_GATE = "import os, sys; sys.stdin.buffer.read(); os.execv(sys.argv[1], sys.argv[1:])"
SMOKE_ARGS = ("--tokenizer", "byte", "--batches", "2", "--batch", "4", "--seq-len", "1024", "--timeout", "60")


def metadata(records: list[dict]) -> int:
    """How many of a request log's records ask about the dataset rather than read its data."""
    return sum(1 for r in records if r["endpoint"].startswith(METADATA))


def resolves(records: list[dict]) -> int:
    """How many of a request log's records are requests to the Hub's resolver."""
    return sum(1 for r in records if r["kind"] == "resolve")


def file_resolves(records: list[dict]) -> int:
    """How many of a request log's resolver requests ask where a data file is (not a branch check's HEAD)."""
    return sum(1 for r in records if r["kind"] == "resolve" and r["endpoint"].endswith(".parquet"))


def branch_checks(records: list[dict]) -> int:
    """How many of a request log's resolver requests are a branch check (the HEAD a rank sends when the node's
    listing was checked before the rank started)."""
    return sum(1 for r in records if r["kind"] == "resolve" and r["endpoint"].startswith("HEAD "))


def burst_faults(requests: int) -> Faults:
    """429 to the first half of a burst of `requests`, each distinct request failed once (its retry succeeds)."""
    return Faults(fail_count=math.ceil(requests / 2), fail_status=429, fail_distinct=True)


@dataclass
class Rank:
    """One rank's process, once it ended."""

    rank: int
    node: int
    returncode: int | None
    """None: killed after the run's timeout."""
    result: dict | None
    """Its `fwe smoke --json` output."""
    stderr: str
    batches: Path
    heartbeat: list[dict]

    def events(self, msg: str) -> list[dict]:
        return [e for e in self.heartbeat if e["msg"] == msg]


@dataclass
class Run:
    """One start of every rank: the ranks in rank order, and each node's request log."""

    ranks: list[Rank]
    requests: list[list[dict]]
    cdn: list[dict] = field(default_factory=list)
    """The CDN server's request log (a Job with cdn_ttl_s), every node's reads."""

    def metadata_per_node(self) -> list[int]:
        return [metadata(records) for records in self.requests]

    def resolves_per_node(self) -> list[int]:
        return [resolves(records) for records in self.requests]

    def file_resolves_per_node(self) -> list[int]:
        return [file_resolves(records) for records in self.requests]

    def branch_checks_per_node(self) -> list[int]:
        return [branch_checks(records) for records in self.requests]


class Job:
    """`nodes` x `ranks_per_node` ranks, each node with its HF_HOME and its server; runs them all at once."""

    def __init__(self, root: str | os.PathLike, workdir: str | os.PathLike, nodes: int, ranks_per_node: int,
                 smoke_args: tuple[str, ...] = SMOKE_ARGS, cdn_ttl_s: float | None = None):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.nodes, self.ranks_per_node, self.smoke_args = nodes, ranks_per_node, smoke_args
        self.servers = [HubServer(root).start() for _ in range(nodes)]
        self.cdn = HubServer(root).start() if cdn_ttl_s is not None else None
        self.cdn_ttl_s = cdn_ttl_s
        self._homes = 0
        self.homes: list[Path] = []
        self.new_homes()

    @property
    def world(self) -> int:
        return self.nodes * self.ranks_per_node

    def new_homes(self) -> None:
        """Fresh, empty HF_HOMEs (one per node): the next run is cold."""
        self._homes += 1
        self.homes = [self.workdir / f"homes{self._homes}" / f"node{n}" for n in range(self.nodes)]
        for home in self.homes:
            home.mkdir(parents=True)

    def _command(self, out: Path, rank: int) -> list[str]:
        return [sys.executable, "-m", "fwe_cli", "smoke", "--source", "hub", "--json", *self.smoke_args,
                "--artifacts-dir", str(out / "artifacts"), "--save-batches", str(out / f"batches_{rank}.npz"),
                "--heartbeat-dir", str(out / "heartbeat")]

    def _env(self, node: int, rank: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NSA_FWE_", "SLURM_"))}
        env.update(client_env(self.servers[node].url, self.homes[node], self.workdir / "violations.jsonl"),
                   RANK=str(rank), WORLD_SIZE=str(self.world))
        return env

    def run(self, name: str, faults: list[Faults] | None = None, timeout: float = 180.0) -> Run:
        """Spawn every rank at once (nodes' servers with `faults`, else none), wait for all; their results and each
        node's request log."""
        out = self.workdir / name
        out.mkdir()
        for node, server in enumerate(self.servers):
            server.set_faults(self._redirecting(faults[node] if faults else Faults()))
            server.new_log(out / f"requests_node{node}.jsonl")
        if self.cdn is not None:
            self.cdn.new_log(out / "requests_cdn.jsonl")
        procs = []
        for rank in range(self.world):
            node = rank // self.ranks_per_node
            with open(out / f"rank{rank}.out", "wb") as stdout, open(out / f"rank{rank}.err", "wb") as stderr:
                procs.append(subprocess.Popen([sys.executable, "-c", START_GATE, *self._command(out, rank)],
                                              env=self._env(node, rank), cwd=REPO_ROOT, stdin=subprocess.PIPE,
                                              stdout=stdout, stderr=stderr))
        for proc in procs:  # every rank's process exists: let them all go
            proc.stdin.close()
        for proc in procs:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        requests = [server.flush() for server in self.servers]
        for server in self.servers:
            server.set_faults()
        return Run([self._rank(out, rank, proc) for rank, proc in enumerate(procs)], requests,
                   self.cdn.flush() if self.cdn is not None else [])

    def _redirecting(self, faults: Faults) -> Faults:
        """`faults`, plus (with cdn_ttl_s) the Hub's redirect of parquet resolves to the CDN's signed URLs."""
        if self.cdn is None:
            return faults
        return replace(faults, redirect_match=PARQUET_RESOLVES, redirect_to=self.cdn.url, sign_ttl_s=self.cdn_ttl_s)

    def _rank(self, out: Path, rank: int, proc: subprocess.Popen) -> Rank:
        stdout = (out / f"rank{rank}.out").read_bytes()
        beat = out / "heartbeat" / f"heartbeat_rank{rank}.jsonl"
        lines = beat.read_bytes().splitlines() if beat.exists() else []
        return Rank(rank, rank // self.ranks_per_node, proc.returncode if proc.returncode >= 0 else None,
                    orjson.loads(stdout) if stdout.strip() else None,
                    (out / f"rank{rank}.err").read_text(errors="replace"), out / f"batches_{rank}.npz",
                    [orjson.loads(line) for line in lines if line.strip()])

    def violations(self) -> list[str]:
        path = self.workdir / "violations.jsonl"
        return path.read_text().splitlines() if path.exists() else []

    def close(self) -> None:
        for server in self.servers + ([self.cdn] if self.cdn is not None else []):
            server.stop()

    def __enter__(self) -> "Job":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def share_texts(root: str | os.PathLike, world: int, rank: int, count: int | None = None) -> list[str]:
    """The documents rank `rank` of `world` reads first, `count` of them (None: all): its stretch of the config's
    parquet files laid end to end by their sizes (sources.units, sources.deal), each row where its place in its row
    group's bytes falls, read from the server's files (the reader path is not used)."""
    import pyarrow.parquet as pq

    from fwe_cli.loader.shard import Shard
    from fwe_cli.loader.sources.deal import fresh
    from fwe_cli.loader.sources.units import Layout, RowGroups, Unit

    paths = sorted((Path(root) / "datasets" / DATASET_REPO / DATA_DIR).glob("*.parquet"))
    layout = Layout.of([Unit(n, 0, path.stat().st_size) for n, path in enumerate(paths)])
    (span,) = fresh(layout.total, Shard(world, rank))
    texts: list[str] = []
    for piece in layout.pieces(span.lo, span.hi):
        path = paths[piece.file]
        groups = RowGroups.of(pq.read_metadata(path), path.stat().st_size)
        column = pq.read_table(path, columns=["text"]).column("text").to_pylist()
        for group in range(len(groups.counts)):
            first, end = groups.owned(group, piece.lo, piece.hi)
            texts += column[groups.bases[group] + first:groups.bases[group] + end]
        if count is not None and len(texts) >= count:
            break
    return texts if count is None else texts[:count]


def shard_problems(docs: list[str], complete: list[str], mine: list[str], rank: int) -> list[str]:
    """What is wrong with one rank's first batches, decoded (`docs`: the last may be cut; `complete`: without it):
    they must be its share's first documents `mine` (share_texts), in order (a share may begin with a document longer
    than the batches: then they are its start)."""
    if not docs:
        return [f"rank {rank}: no document in its batches"]
    if complete != mine[:len(complete)]:
        return [f"rank {rank}: documents {complete[:2]}... are not its share's first"]
    if len(docs) > len(complete) and not mine[len(complete)].startswith(docs[-1]):
        return [f"rank {rank}: its last, cut document is not the start of its next one"]
    return []
