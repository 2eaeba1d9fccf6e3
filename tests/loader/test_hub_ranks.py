"""Many ranks ask the Hub as little as one: ranks sharing an HF_HOME (a node) ask for the listing once and check a
branch once, a torch.distributed job asks once in all, and a burst of 429s is ridden out with jittered retries.

The simulation (tests/hubsim/ranks.py): 2 nodes x 3 ranks of `fwe smoke --source hub` spawned at once (RANK and
WORLD_SIZE set), each node with its own HF_HOME and its own test server, so a server's request log is a node's. The
module's runs are made once and shared: cold, warm (same HF_HOMEs), then a cold start into a burst of 429s. The
torch.distributed job is a torchrun of 2 gloo ranks, each with an HF_HOME of its own (tests/loader/hub_ranks_job.py).
Counts and recorded values only: nothing here compares times.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import REPO_ROOT, fwe_env
from tests.hubsim.ranks import Job, burst_faults, metadata, shard_problems, stream_texts
from tests.hubsim.server import HubServer
from tests.rank_train import decode_documents

NODES, RANKS_PER_NODE = 2, 3
GLOO_RANKS = 2  # rank 1 alone shows the broadcast: without it, the job would send twice the requests
TORCHRUN_TIMEOUT_S = 300  # a bound on a hung rendezvous or collective, not an expected duration


class Runs:
    def __init__(self, root: Path, workdir: Path):
        self.root = root
        with Job(root, workdir, NODES, RANKS_PER_NODE) as job:
            self.cold = job.run("cold")
            self.warm = job.run("warm")
            job.new_homes()
            self.burst = job.run("burst", faults=[burst_faults(len(records)) for records in self.cold.requests])
            self.violations = job.violations()


@pytest.fixture(scope="module")
def runs(hubsim_root, tmp_path_factory) -> Runs:
    return Runs(hubsim_root, tmp_path_factory.mktemp("hub_ranks"))


def _ok(run) -> None:
    for rank in run.ranks:
        assert rank.returncode == 0 and rank.result["ok"], (rank.rank, rank.stderr[-3000:])


def test_a_cold_start_asks_for_the_listing_once_per_node(runs):
    """Cold, 3 ranks sharing an HF_HOME send at most 2 metadata requests (revision, paths-info) per node, not 2 per
    rank: one rank resolves under the cache's lock, the others read what it wrote. Every rank starts."""
    _ok(runs.cold)
    assert all(count <= 2 for count in runs.cold.metadata_per_node()), runs.cold.metadata_per_node()
    assert runs.violations == []


def test_a_warm_start_checks_the_branch_once_per_node(runs):
    """Warm (same HF_HOMEs), at most one HEAD per node checks which commit main is: the first rank records its check
    beside the ref, and ranks started before it reuse the answer."""
    _ok(runs.warm)
    assert all(count <= 1 for count in runs.warm.metadata_per_node()), runs.warm.metadata_per_node()
    assert sum(runs.warm.metadata_per_node()) >= 1, "a warm start still checks the branch once"


def test_every_rank_reads_its_own_shard_of_the_stream(runs):
    """Each rank's first batches hold documents rank, rank + 6, ... of the unsharded stream (what one process reads),
    in order: shards are disjoint and together are the stream's first documents; the commit read is the same."""
    _ok(runs.cold)
    world = NODES * RANKS_PER_NODE
    texts = stream_texts(runs.root, 2000)
    problems, seen = [], []
    for rank in runs.cold.ranks:
        with np.load(rank.batches) as saved:
            batches = saved["batches"]
        complete = decode_documents(batches, complete_only=True)
        problems += shard_problems(decode_documents(batches), complete, texts, rank.rank, world)
        seen.append(set(complete))
    assert problems == []
    assert sum(len(s) for s in seen) == len(set().union(*seen))
    assert len({rank.result["source"]["revision"] for rank in runs.cold.ranks}) == 1


def test_a_burst_of_429s_is_ridden_out_with_jittered_retries(runs):
    """A server answering 429 to the first half of a cold start's requests (each failed request once): every rank
    starts and passes its checks; the retries are in the heartbeats (fineweb_hub_retry: what, attempt, reason,
    wait_s) and their waits differ from rank to rank (full jitter, seeded per process)."""
    _ok(runs.burst)
    retries = {rank.rank: rank.events("fineweb_hub_retry") for rank in runs.burst.ranks}
    failed = sum(1 for records in runs.burst.requests for r in records if r["status"] == 429)
    assert failed >= NODES, "the burst hit each node"
    events = [e for per_rank in retries.values() for e in per_rank]
    assert events and {e["reason"] for e in events} == {"HTTP 429"}
    assert all(set(e) >= {"what", "attempt", "reason", "wait_s"} and 0 <= e["wait_s"] <= 60 for e in events)
    first_waits = [per_rank[0]["wait_s"] for per_rank in retries.values() if per_rank]
    assert len(first_waits) >= 2 and len(set(first_waits)) == len(first_waits), retries


def test_a_torch_distributed_job_asks_for_the_listing_once_in_all(hubsim_root, tmp_path):
    """2 gloo ranks under torchrun, each with its own HF_HOME: rank 0 resolves the listing and broadcasts it, so the
    job sends at most 2 metadata requests cold (not 4) and, opening a second loader, one HEAD warm; every rank reads
    the same commit and files, and its own shard of the stream."""
    out = tmp_path / "out"
    out.mkdir()
    with HubServer(hubsim_root) as server:
        env = fwe_env(HF_ENDPOINT=server.url, HF_HUB_OFFLINE="0", HF_HUB_DISABLE_TELEMETRY="1", OMP_NUM_THREADS="1")
        proc = subprocess.run([str(Path(sys.executable).with_name("torchrun")), "--standalone", "--nproc-per-node",
                               str(GLOO_RANKS), str(REPO_ROOT / "tests" / "loader" / "hub_ranks_job.py"), str(out)],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=TORCHRUN_TIMEOUT_S)
        records = server.flush()
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-6000:])
    cold = [r for r in records if r["endpoint"].startswith(("GET /api/datasets/", "POST /api/datasets/"))]
    warm = [r for r in records if r["endpoint"].startswith("HEAD /datasets/")]
    assert len(cold) <= 2 and len(warm) <= 1 and metadata(records) == len(cold) + len(warm), records
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(GLOO_RANKS)]
    texts = stream_texts(hubsim_root, 2000)
    for report in reports:
        assert report["shard"] == [GLOO_RANKS, report["rank"]]
        for opened in report["opens"]:
            assert (opened["revision"], opened["files"]) == (reports[0]["opens"][0]["revision"], 2)
            assert shard_problems(opened["docs"], opened["complete"], texts, report["rank"], GLOO_RANKS) == []
