"""`fwe report` shows how full the rows came by packing: a smoke artifact, a measure summary and a job's heartbeat
directory of a best-fit or greedy run each get a fill picture at its planned size and a table whose figures are the
loader's own counters; a stream run (nothing to crop) gets neither."""

from __future__ import annotations

import orjson
import pytest

from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.report.inputs import read_input, read_inputs
from fwe_cli.report.plan import plan_sections
from fwe_cli.report.row_fill import artifact_fill, heartbeat_fill
from tests.helpers import invoke
from tests.report.support import png_size

SHAPE = ("--source", "synthetic", "--tokenizer", "byte", "--seq-len", "2048", "--batch", "2")


def _artifact(result) -> str:
    assert result.exit_code == 0, result.stderr
    return orjson.loads(result.stdout)["artifact"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """A best-fit smoke and measure, a stream smoke, and a one-rank best-fit job with a progress line every 20
    documents (no prefetch: the counters stop at the last batch), with its final stats."""
    root = tmp_path_factory.mktemp("row_fill")
    art = str(root / "artifacts")
    paths = {"smoke": _artifact(invoke("smoke", *SHAPE, "--pack", "best-fit", "--json", "--artifacts-dir", art)),
             "measure": _artifact(invoke("measure", "--steps", "5", "--step-ms", "0", *SHAPE, "--pack", "greedy",
                                         "--json", "--artifacts-dir", art)),
             "stream": _artifact(invoke("smoke", *SHAPE, "--json", "--artifacts-dir", art))}
    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=2048, batch_size=2, pack="best-fit",
                            prefetch=False, report_docs=20, heartbeat_dir=str(root / "job"))
    with FineWebLoader(config) as loader:
        for _ in range(40):
            loader.next_batch()
        stats = loader.stats()["cropped"]
    return {"paths": dict(paths, heartbeats=str(root / "job")), "job": stats}


def test_each_packed_input_gets_its_fill_picture_and_table(tmp_path, runs):
    """smoke (best-fit), measure (greedy) and heartbeats (best-fit): a `N-kind-fill.png` each at its planned size, a
    table row per run with its packing; the stream smoke has no fill picture and no table."""
    paths = [runs["paths"][kind] for kind in ("smoke", "measure", "heartbeats", "stream")]
    out = tmp_path / "report"
    result = invoke("report", *paths, "--out", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    planned = {p.file: p for s in plan_sections(read_inputs(paths)) for p in s.pictures if p.kind == "fill"}
    assert list(planned) == ["1-smoke-fill.png", "2-measure-fill.png", "3-heartbeats-fill.png"]
    for name, picture in planned.items():
        assert png_size(out / name) == picture.size_px, name
    markdown = (out / "report.md").read_text()
    assert markdown.count("**Rows' fill**") == 3
    assert "| smoke | best-fit |" in markdown and "| rank 0 | best-fit |" in markdown
    assert markdown.count("| greedy |") == 2  # the measure's cold and warm runs


def test_the_figures_are_the_loaders_counters(runs):
    """The smoke's row is its artifact's loader.cropped; the job's row is the last progress line's, which with no
    prefetch and 20-document lines is within 20 documents of the loader's final counters."""
    record = orjson.loads(open(runs["paths"]["smoke"], "rb").read())
    (row,) = artifact_fill("smoke", record).rows
    cropped = record["loader"]["cropped"]
    assert (row.pack, row.tokens_read, row.cropped_tokens, row.cropped_documents) == (
        "best-fit", cropped["tokens_read"], cropped["tokens"], cropped["documents"])
    assert 0 < row.cropped_share < 1
    (job,) = heartbeat_fill([line for beat in read_input(runs["paths"]["heartbeats"]).heartbeats
                             for line in beat.lines]).rows
    assert job.pack == "best-fit" and 0 < job.tokens_read <= runs["job"]["tokens_read"]
    assert job.cropped_documents <= runs["job"]["documents"]
