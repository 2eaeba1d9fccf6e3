"""`fwe report` end to end on artifacts of real runs (fwe measure, fwe tune with a tiny grid, fwe smoke gated with
--baseline, made in this module) and a made-up training job's heartbeat directory: every planned PNG is written and
decodes at its planned size, report.md links exactly those, --json lists them; without matplotlib (blocked in a
fresh interpreter) report.md alone is written, exit 0, with exactly one warning line naming the install command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from fwe_cli.report.inputs import read_inputs
from fwe_cli.report.plan import plan_sections
from tests.helpers import REPO_ROOT, fwe_env, invoke
from tests.report.support import png_size, write_job

SYNTHETIC = ("--source", "synthetic", "--tokenizer", "byte")
NO_MATPLOTLIB = ("import sys; sys.modules['matplotlib'] = None; "  # `import matplotlib` raises ImportError
                 "from fwe_cli.cli.app import main; sys.argv[0] = 'fwe'; main()")


def _artifact(result) -> str:
    assert result.exit_code in (0, 5), result.stderr
    return orjson.loads(result.stdout)["artifact"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    """Real artifacts: a cold/warm measure with warmup at a 1 ms step, a 2x2 tune, a smoke gated against a baseline
    claiming 1000x its tokens/s (regressed: exit 5, artifact written); and a 3-rank job's heartbeat directory."""
    root = tmp_path_factory.mktemp("report_inputs")
    art = str(root / "artifacts")
    measure = invoke("measure", "--cold", "--warm", *SYNTHETIC, "--steps", "5", "--step-ms", "1",
                     "--warmup-batches", "2", "--json", "--artifacts-dir", art)
    tune = invoke("tune", *SYNTHETIC, "--doc-batch-grid", "16,64", "--q-grid", "1,4", "--trial-s", "0", "--repeats",
                  "1", "--steps", "5", "--step-ms", "1", "--json", "--artifacts-dir", art)
    first = orjson.loads(Path(_artifact(invoke("smoke", *SYNTHETIC, "--json", "--artifacts-dir", art))).read_bytes())
    baseline = root / "baseline.json"
    baseline.write_bytes(orjson.dumps(dict(first, tokens_per_s=first["tokens_per_s"] * 1000)))
    gated = invoke("smoke", *SYNTHETIC, "--baseline", str(baseline), "--json", "--artifacts-dir", art)
    assert gated.exit_code == 5, gated.stderr
    return {"measure": _artifact(measure), "tune": _artifact(tune), "smoke": _artifact(gated),
            "heartbeats": str(write_job(root / "job", ranks=3, steps=150))}


def test_report_draws_every_picture_at_its_size(tmp_path, inputs):
    """All four kinds in one run: exit 0; --json lists each input's kind and pictures, every PNG decodes (header
    read here) at the size planned for it (fixed widths: 1000-1100 px), report.md last and linking every picture;
    no warning."""
    paths = [inputs[kind] for kind in ("measure", "tune", "smoke", "heartbeats")]
    out = tmp_path / "report"
    result = invoke("report", *paths, "--out", str(out), "--json")
    assert result.exit_code == 0, result.stderr
    reply = orjson.loads(result.stdout)
    assert reply["ok"] is True and reply["warnings"] == [] and result.stderr == ""
    assert [i["kind"] for i in reply["inputs"]] == ["measure", "tune", "smoke", "heartbeats"]
    planned = {p.file: p for section in plan_sections(read_inputs(paths)) for p in section.pictures}
    assert reply["files"] == [str(out / name) for name in planned] + [str(out / "report.md")]
    kinds = sorted({p.kind for p in planned.values()})
    assert kinds == ["deltas", "heatmap", "stages", "timeline", "waterfall"]
    for name, picture in planned.items():
        assert png_size(out / name) == picture.size_px, name
    assert png_size(out / "1-measure-run00-cold-timeline.png") == (1100, 860)  # with queue fill and stage panels
    assert png_size(out / "2-tune-heatmap.png") == (700, 420)
    assert png_size(out / "4-heartbeats-timeline.png") == (1100, 600)  # queue fill panel; 3 ranks: no stage panel
    markdown = (out / "report.md").read_text()
    assert [line for line in markdown.splitlines() if line.startswith("![")] == [
        f"![{p.title}]({name})" for name, p in planned.items()]
    for heading in ("## 1. fwe measure", "## 2. fwe tune", "## 3. fwe smoke", "## 4. training job heartbeats"):
        assert heading in markdown
    assert "**Regression gate: REGRESSED**" in markdown and "★" in markdown


def test_measure_pictures_carry_the_runs(tmp_path, inputs):
    """The measure summary's pictures: the waterfall has the cold and the warm run, each run's timeline has its 5
    steady steps after the first batch, the 1 ms step, a warmup boundary after the 2 batches queued, the queue fill
    each step found and its wait split by producer stage (adding up to the wait); the stages picture has one bar
    per run, from the run's stall_by_stage_s."""
    (section,) = plan_sections(read_inputs([inputs["measure"]]))
    kinds = [p.kind for p in section.pictures]
    assert kinds == ["waterfall", "timeline", "timeline", "stages"]
    assert [row.label for row in section.pictures[0].data.rows] == ["run00-cold", "run01-warm"]
    for picture in section.pictures[1:3]:
        (series,) = picture.data.timelines
        assert series.steps == tuple(range(1, 7)) and series.step_ms == 1.0
        assert series.warmup.requested == 2 and series.warmup.boundary == series.warmup.filled + 0.5
        assert len(series.queue_fill) == 6 and all(isinstance(fill, float) for fill in series.queue_fill)
        split = picture.data.stages
        for index, wait_ms in enumerate(series.wait_ms):
            assert abs(sum(row[index] for row in split.seconds) * 1000 - wait_ms) < 0.01
    summary = orjson.loads(Path(inputs["measure"]).read_bytes())
    totals = section.pictures[3].data
    assert totals.labels == ("run00-cold", "run01-warm")
    for run, row in zip(summary["runs"], totals.seconds):
        assert dict(zip(totals.stages, row)) == {s: run["stall_by_stage_s"].get(s, 0.0) for s in totals.stages}


def test_default_out_is_under_artifacts_report(tmp_path, inputs):
    """Without --out: artifacts-dir/report/<UTC>/report.md; the human line on stderr names it."""
    result = invoke("report", inputs["tune"], "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    (written,) = list((tmp_path / "report").glob("*/report.md"))
    assert str(written) in result.stderr and (written.parent / "1-tune-heatmap.png").is_file()


def test_without_matplotlib_markdown_only_exit_0_one_warning(tmp_path, inputs):
    """matplotlib blocked in a fresh `fwe` process: exit 0, report.md written with the tables and no picture link,
    no PNG, and stderr has exactly one warning line, naming `pip install 'fwe[report]'`."""
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-c", NO_MATPLOTLIB, "report", inputs["measure"], inputs["heartbeats"],
                           "--out", str(out)], capture_output=True, text=True, env=fwe_env(), cwd=REPO_ROOT,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "pip install 'fwe[report]'" in warnings[0], proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]
    markdown = (out / "report.md").read_text()
    assert "## 1. fwe measure" in markdown and "| run00-cold |" in markdown and "![" not in markdown


def test_smoke_stage_picture_is_its_loaders_split(inputs):
    """A smoke artifact carries the loader's stall_by_stage_s (its waits after the first batch, by producer stage):
    its stages picture draws exactly that, one bar."""
    (section,) = plan_sections(read_inputs([inputs["smoke"]]))
    split = orjson.loads(Path(inputs["smoke"]).read_bytes())["loader"]["stall_by_stage_s"]
    (stages,) = [p for p in section.pictures if p.kind == "stages"]
    assert split and stages.data.labels == ("smoke",)
    assert dict(zip(stages.data.stages, stages.data.seconds[0])) == split
