"""`fwe report` on runs of a real mix (fwe measure, fwe tune and fwe smoke with --mix, and a two-rank job's heartbeat
directory written by the loader): each input gets its mix picture, a PNG at its planned size, and report.md a table
whose figures are the runs' own sums; a job's figures are the ranks' loader stats added up."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.report.inputs import read_input, read_inputs
from fwe_cli.report.mix_shares import heartbeat_mix
from fwe_cli.report.plan import plan_sections
from tests.helpers import invoke
from tests.report.support import png_size

SHAPE = ("--tokenizer", "byte", "--seq-len", "256", "--batch", "2")
JOB_STEPS = 100  # the mixture writes a fineweb_mix line every 100 batches


def _artifact(result) -> str:
    assert result.exit_code == 0, result.stderr
    return orjson.loads(result.stdout)["artifact"]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> dict:
    """A 3:1 mix of two synthetic sources measured (prime + warm), tuned (one trial), smoked, and read by a job of two
    ranks for JOB_STEPS batches each (no prefetch: nothing is read after the last batch), with their final stats."""
    root = tmp_path_factory.mktemp("mix_report")
    mix = root / "mix.json"
    mix.write_bytes(orjson.dumps({"sources": [{"weight": 3, "source": "synthetic", "seed": 1},
                                              {"weight": 1, "source": "synthetic", "seed": 2, "stop": "cycle"}]}))
    art = str(root / "artifacts")
    common = ("--mix", str(mix), *SHAPE, "--json", "--artifacts-dir", art)
    paths = {
        "measure": _artifact(invoke("measure", "--warm", "--steps", "5", "--step-ms", "0", *common)),
        "tune": _artifact(invoke("tune", "--doc-batch-grid", "64", "--q-grid", "2", "--repeats", "1", "--trial-s",
                                 "0", "--steps", "3", "--objective", "tokens_per_s", *common)),
        "smoke": _artifact(invoke("smoke", *common)),
    }
    stats = []
    for rank in range(2):
        config = resolve_config(env={}, mix=str(mix), tokenizer="byte", seq_len=256, batch_size=2, prefetch=False,
                                shard_mod=2, shard_rem=rank, rank=rank, heartbeat_dir=str(root / "job"))
        with FineWebLoader(config) as loader:
            for _ in range(JOB_STEPS):
                loader.next_batch()
            stats.append(loader.stats()["sources"])
    return {"paths": dict(paths, heartbeats=str(root / "job")), "job_stats": stats}


def test_every_input_of_a_mix_gets_its_picture_and_table(tmp_path, mixed):
    """measure, tune, smoke and heartbeats of one mix: exit 0, no warning; a `N-kind-mix.png` each, at its planned
    size; report.md has a mix table per input, the measure's figures the sums of its runs' `sources`."""
    paths = [mixed["paths"][kind] for kind in ("measure", "tune", "smoke", "heartbeats")]
    out = tmp_path / "report"
    result = invoke("report", *paths, "--out", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["warnings"] == []
    planned = {p.file: p for s in plan_sections(read_inputs(paths)) for p in s.pictures if p.kind == "mix"}
    assert list(planned) == ["1-measure-mix.png", "2-tune-mix.png", "3-smoke-mix.png", "4-heartbeats-mix.png"]
    for name, picture in planned.items():
        assert png_size(out / name) == picture.size_px == (1000, 380), name
    markdown = (out / "report.md").read_text()
    assert markdown.count("**Mix of 2 sources**") == 4
    assert "**Mix of 2 sources** over 2 runs: the weights are shares of tokens" in markdown
    runs = orjson.loads(Path(mixed["paths"]["measure"]).read_bytes())["runs"]
    for place, name in enumerate(("the synthetic source (seed 1)", "the synthetic source (seed 2)")):
        documents = sum(run["sources"][place]["documents"] for run in runs)
        tokens = sum(run["sources"][place]["tokens"] for run in runs)
        weight = "75.00 %" if place == 0 else "25.00 %"
        row = next(line for line in markdown.splitlines() if line.startswith(f"| {name} | {weight} |"))
        assert row.endswith(f"| {documents:,} | {tokens:,} |"), row


def test_a_jobs_mix_is_the_sum_of_its_ranks_stats(mixed):
    """The heartbeat directory's mix: per source, the documents and tokens of rank 0 and rank 1 added up, as their
    loaders' stats said after the last batch (the step of their last fineweb_mix line)."""
    beats = read_input(mixed["paths"]["heartbeats"]).heartbeats
    mix = heartbeat_mix([line for beat in beats for line in beat.lines])
    rank0, rank1 = mixed["job_stats"]
    assert [(s.source, s.weight) for s in mix.sources] == [(e["source"], e["weight"]) for e in rank0]
    assert [(s.documents, s.tokens) for s in mix.sources] == [
        (a["documents"] + b["documents"], a["tokens"] + b["tokens"]) for a, b in zip(rank0, rank1)]
    assert mix.over == f"2 processes as of each one's last fineweb_mix line, step {JOB_STEPS}"
