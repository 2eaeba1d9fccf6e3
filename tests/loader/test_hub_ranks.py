"""Many ranks ask the Hub as little as one: ranks sharing an HF_HOME (a node) ask for the listing once and check a
branch once, and a burst of 429s is ridden out with jittered retries (a torch.distributed job asking once in all:
tests/loader/test_ranks.py, whose one torchrun job reads the Hub too).

The simulation (tests/hubsim/ranks.py): 2 nodes x 3 ranks of `fwe smoke --source hub` spawned at once (RANK and
WORLD_SIZE set), each node with its own HF_HOME and its own test server, so a server's request log is a node's. The
module's runs are made once and shared: cold, warm (same HF_HOMEs), then a cold start into a burst of 429s.
Counts and recorded values only: nothing here compares times.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.hubsim.ranks import Job, burst_faults, shard_problems, share_texts
from tests.rank_train import decode_documents

NODES, RANKS_PER_NODE = 2, 3


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
    """Each rank's first batches hold the first documents of its own stretch of the Hub files (dealt by their bytes
    before anything is read), in order: shards are disjoint; the commit read is the same."""
    _ok(runs.cold)
    world = NODES * RANKS_PER_NODE
    problems, seen = [], []
    for rank in runs.cold.ranks:
        with np.load(rank.batches) as saved:
            batches = saved["batches"]
        complete = decode_documents(batches, complete_only=True)
        mine = share_texts(runs.root, world, rank.rank, len(complete) + 1)
        problems += shard_problems(decode_documents(batches), complete, mine, rank.rank)
        seen.append(set(complete))
    assert problems == []
    assert sum(len(s) for s in seen) == len(set().union(*seen))
    assert len({rank.result["source"]["revision"] for rank in runs.cold.ranks}) == 1


def test_a_burst_of_429s_is_ridden_out_with_jittered_retries(runs):
    """A server answering 429 to the first half of a cold start's requests (each failed request once): every rank
    starts and passes its checks; the retries are in the heartbeats (fineweb_hub_retry: what, attempt, reason,
    wait_s), on each node (its first request, the listing's, was answered 429: a listing started before the loader
    existed reports its retries to the loader that takes it over), and their waits differ from rank to rank (full
    jitter, seeded per process)."""
    _ok(runs.burst)
    retries = {rank.rank: rank.events("fineweb_hub_retry") for rank in runs.burst.ranks}
    failed = [sum(1 for r in records if r["status"] == 429) for records in runs.burst.requests]
    assert all(failed), f"the burst hit each node: {failed}"
    assert {rank.node for rank in runs.burst.ranks if retries[rank.rank]} == set(range(NODES)), retries
    events = [e for per_rank in retries.values() for e in per_rank]
    assert events and {e["reason"] for e in events} == {"HTTP 429"}
    assert all(set(e) >= {"what", "attempt", "reason", "wait_s"} and 0 <= e["wait_s"] <= 60 for e in events)
    first_waits = [per_rank[0]["wait_s"] for per_rank in retries.values() if per_rank]
    assert len(first_waits) >= 2 and len(set(first_waits)) == len(first_waits), retries
