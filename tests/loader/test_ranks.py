"""Rank awareness: under torchrun (RANK/WORLD_SIZE) the shard comes from the launcher, so each rank reads its own
documents, the ranks together read every document once, and artifacts, heartbeat and --save-batches say which rank;
reading the Hub, a torch.distributed job asks for the listing once in all (rank 0 resolves it and broadcasts it).
Counts and recorded values only: nothing here compares times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from tests.helpers import REPO_ROOT, fwe_env, invoke, write_jsonl
from tests.hubsim.ranks import metadata, shard_problems, share_texts
from tests.hubsim.server import HubServer
from tests.rank_train import decode_documents

TORCHRUN_TIMEOUT_S = 300  # a bound on a hung rendezvous or collective, not an expected duration
DOCS = [f"rank test document {i:04d}" for i in range(64)]  # unique, 23 bytes + separator = 24 tokens each
SEQ_LEN, BATCH = 32, 3  # 96 tokens a batch: each rank's 32 documents are exactly 8 batches, none left unemitted
SHUFFLE_SEED = 7  # the shuffled pass: each rank reads its share of this seed's permuted units, in shuffled windows
RANKS = 2  # rank 1 alone shows rank 0's listing broadcast: without it, the job would send twice the Hub requests


@pytest.fixture(scope="module")
def job(hubsim_root, tmp_path_factory) -> Path:
    """One `torchrun --standalone --nproc-per-node 2 tests/rank_train.py --hub` (a local rendezvous on 127.0.0.1, no
    network needed) for the module, against a test Hub server of its own: each rank trains in file order, then
    shuffled, then reads the Hub cold and warm with an HF_HOME of its own, then runs `fwe smoke` the way
    `torchrun -m fwe_cli smoke` would (a child with the rank's environment). Returns its working folder: the data
    (docs.jsonl), the training reports (out/plain, out/shuffled), the Hub reports (out/hub) and the server's request
    log (hub_requests.json), and the smoke's outputs (out_{rank}.npz, art/)."""
    work = tmp_path_factory.mktemp("ranks")
    docs = write_jsonl(work / "docs.jsonl", [{"text": text} for text in DOCS])
    (work / "out").mkdir()
    smoke = ["smoke", "--local-path", str(docs), "--tokenizer", "byte", "--seq-len", str(SEQ_LEN), "--batch",
             str(BATCH), "--batches", "8", "--timeout", "120", "--artifacts-dir", str(work / "art"),
             "--save-batches", str(work / "out_{rank}.npz")]
    torchrun = Path(sys.executable).with_name("torchrun")
    with HubServer(hubsim_root) as server:
        env = fwe_env(HF_ENDPOINT=server.url, HF_HUB_OFFLINE="0", HF_HUB_DISABLE_TELEMETRY="1", OMP_NUM_THREADS="1")
        proc = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", str(RANKS),
                               str(REPO_ROOT / "tests" / "rank_train.py"), str(docs), str(work / "out"), str(SEQ_LEN),
                               str(BATCH), str(SHUFFLE_SEED), "--hub", "--", *smoke],
                              capture_output=True, text=True, env=env, cwd=work, timeout=TORCHRUN_TIMEOUT_S)
        (work / "hub_requests.json").write_bytes(orjson.dumps(server.flush()))
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-6000:])
    return work


def test_decode_documents_reassembles_documents_split_across_batches():
    """The test's decoder joins batches before splitting at id 256, so a document cut by a batch boundary is whole."""
    stream = np.array(list(b"ab") + [256] + list(b"cde") + [256] + list(b"f"), dtype=np.int32)
    batches = [stream[:4], stream[4:]]  # 'cde' spans the two
    assert decode_documents(batches) == ["ab", "cde", "f"]
    assert decode_documents(batches, complete_only=True) == ["ab", "cde"]


def test_smoke_takes_its_shard_from_torchrun_variables(tmp_path):
    """With RANK=1 WORLD_SIZE=2 and no shard flags, `fwe smoke` reads shard 1 of 2, records shard_from torchrun in
    the artifact, writes heartbeat_rank1.jsonl, and saves to --save-batches with {rank} replaced by 1."""
    result = invoke("smoke", "--source", "synthetic", "--tokenizer", "byte", "--batches", "1", "--json",
                    "--save-batches", str(tmp_path / "out_{rank}.npz"), "--heartbeat-dir", str(tmp_path / "hb"),
                    "--artifacts-dir", str(tmp_path / "art"), env={"RANK": "1", "WORLD_SIZE": "2"})
    assert result.exit_code == 0, result.stderr
    out = orjson.loads(result.stdout)
    assert out["config"]["shard"] == {"mod": 2, "rem": 1}
    assert out["config"]["shard_from"] == "torchrun" and out["config"]["rank"] == 1
    assert out["saved_batches"] == str(tmp_path / "out_1.npz") and (tmp_path / "out_1.npz").is_file()
    assert not list(tmp_path.glob("out_{*"))
    assert sorted(p.name for p in (tmp_path / "hb").iterdir()) == ["heartbeat_rank1.jsonl"]
    lines = [orjson.loads(line) for line in (tmp_path / "hb" / "heartbeat_rank1.jsonl").read_bytes().splitlines()]
    assert lines and {line["rank"] for line in lines} == {1}


def test_save_batches_rejects_other_placeholders(tmp_path):
    """--save-batches knows only {rank}: any other brace is a usage error (exit 2) naming the flag, before any run."""
    result = invoke("smoke", "--source", "synthetic", "--tokenizer", "byte", "--artifacts-dir", str(tmp_path / "art"),
                    "--save-batches", str(tmp_path / "out_{node}.npz"))
    assert result.exit_code == 2
    assert "--save-batches" in result.stderr and "{node}" in result.stderr
    assert not (tmp_path / "art").exists()


def test_torchrun_training_loop_ranks_read_disjoint_documents_covering_all(job):
    """Two torchrun ranks (gloo, CPU) building the loader with no shard flags read disjoint documents whose union is
    every document of the file, step equally often with all-reduced gradients, and each writes its own heartbeat."""
    out = job / "out" / "plain"
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    for r, report in enumerate(reports):
        assert report["shard"] == [2, r] and report["shard_from"] == "torchrun" and report["heartbeat_rank"] == r
        assert report["in_sync"] and report["steps"] == reports[0]["steps"] > 0
        assert report["docs"] == DOCS[32 * r:32 * (r + 1)]  # the file's first half to rank 0, in order: equal lines
        assert (out / f"heartbeat_rank{r}.jsonl").is_file()
    seen = [set(report["docs"]) for report in reports]
    assert seen[0].isdisjoint(seen[1])
    assert seen[0] | seen[1] == set(DOCS)


def test_torchrun_training_loop_with_shuffle_splits_one_permutation(job):
    """With a shuffle seed, the two torchrun ranks read disjoint documents covering all of them, each its share of
    the epoch's permuted units in shuffled windows (what one process as that reader reads)."""
    from fwe_cli.loader import resolve_config
    from fwe_cli.loader.shard import Shard
    from fwe_cli.loader.stream import DocumentStream

    out = job / "out" / "shuffled"
    config = resolve_config(env={}, local_path=str(job / "docs.jsonl"), shuffle_seed=SHUFFLE_SEED, shuffle_window=16)
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    for r, report in enumerate(reports):
        mine = [d.text for d in DocumentStream(config.replace(shard=Shard(2, r)))]
        assert report["docs"] == mine and mine != sorted(mine)
    assert set(reports[0]["docs"]).isdisjoint(reports[1]["docs"])
    assert set(reports[0]["docs"]) | set(reports[1]["docs"]) == set(DOCS)


def test_lockstep_ends_every_rank_at_the_step_the_first_rank_runs_out(job):
    """Two torchrun ranks with uneven shares (the file's first half holds twice the bytes per token: rank 1's share
    has more batches) trained through fwe_cli.train.lockstep: both take as many steps as the rank with the fewest
    batches, each all-reduce answered by both (their weights agree), none left waiting."""
    reports = [json.loads((job / "out" / "lockstep" / f"rank{r}.json").read_text()) for r in range(2)]
    available = [report["available"] for report in reports]
    assert available[0] < available[1]
    assert [report["steps"] for report in reports] == [min(available)] * 2
    assert reports[0]["weight"] == reports[1]["weight"] == -2.0 * min(available)


def test_torchrun_smoke_ranks_save_disjoint_documents(job):
    """`python -m fwe_cli smoke --save-batches out_{rank}.npz` with no shard flags in each torchrun rank's
    environment (as `torchrun -m fwe_cli smoke` runs it): each rank exits 0 and saves its own file, and the two
    ranks' batches hold disjoint documents that together are every document."""
    seen = []
    for r in range(2):
        ran = json.loads((job / "out" / f"fwe_rank{r}.json").read_text())
        assert ran["returncode"] == 0, ran["stderr"]
        with np.load(job / f"out_{r}.npz") as saved:
            docs = decode_documents(saved["batches"])
        assert docs == DOCS[32 * r:32 * (r + 1)]
        seen.append(set(docs))
    assert seen[0].isdisjoint(seen[1]) and seen[0] | seen[1] == set(DOCS)
    artifacts = [orjson.loads(p.read_bytes()) for p in (job / "art" / "smoke").glob("*.json")]
    assert sorted((a["config"]["shard"]["rem"], a["config"]["shard_from"]) for a in artifacts) == [
        (0, "torchrun"), (1, "torchrun")]


def test_a_torch_distributed_job_asks_for_the_listing_once_in_all(job, hubsim_root):
    """2 gloo ranks under torchrun reading the Hub, each with its own HF_HOME: rank 0 resolves the listing and
    broadcasts it, so the job sends at most 2 metadata requests cold (not 4) and, opening a second loader, one HEAD
    warm; every rank reads the same commit and files, and its own shard of the stream."""
    records = orjson.loads((job / "hub_requests.json").read_bytes())
    cold = [r for r in records if r["endpoint"].startswith(("GET /api/datasets/", "POST /api/datasets/"))]
    warm = [r for r in records if r["endpoint"].startswith("HEAD /datasets/")]
    assert len(cold) <= 2 and len(warm) <= 1 and metadata(records) == len(cold) + len(warm), records
    reports = [json.loads((job / "out" / "hub" / f"rank{r}.json").read_text()) for r in range(RANKS)]
    for report in reports:
        assert report["shard"] == [RANKS, report["rank"]]
        mine = share_texts(hubsim_root, RANKS, report["rank"], 200)
        for opened in report["opens"]:
            assert (opened["revision"], opened["files"]) == (reports[0]["opens"][0]["revision"], 2)
            assert shard_problems(opened["docs"], opened["complete"], mine, report["rank"]) == []
