"""The regression gate (`--baseline ARTIFACT.json --max-regression PCT`): exit 5 on a regression, exit 2 before the run
for a baseline that cannot serve, and the noise rules of `compare` (medians, non-overlap, absolute floors).

No test compares wall-clock times: baselines are real artifacts whose figures are edited by huge factors, so the
outcome is certain on any machine."""

from __future__ import annotations

import copy
from pathlib import Path

import orjson
import pytest

from fwe_cli.cli.exit_codes import EXIT_KPI, EXIT_USAGE
from fwe_cli.errors import ConfigError
from fwe_cli.measure.regression import (FETCH_P95_FLOOR_MS, FIRST_BATCH_FLOOR_S, P95_MIN_FETCHES, check_metric,
                                        compare, load_baseline)
from tests.helpers import invoke

SMOKE = ("smoke", "--source", "synthetic", "--tokenizer", "byte")


@pytest.fixture(scope="module")
def smoke_artifact(tmp_path_factory) -> dict:
    """A real smoke artifact (synthetic data, byte tokenizer) to edit into baselines."""
    out = tmp_path_factory.mktemp("base")
    result = invoke(*SMOKE, "--json", "--artifacts-dir", str(out))
    assert result.exit_code == 0, result.stderr
    return orjson.loads(Path(orjson.loads(result.stdout)["artifact"]).read_bytes())


@pytest.fixture(scope="module")
def measure_summary(tmp_path_factory) -> dict:
    """A real measure summary: two warm runs (after their priming runs), the loader alone for a few steps."""
    out = tmp_path_factory.mktemp("measure")
    result = invoke("measure", "--warm", "--source", "synthetic", "--tokenizer", "byte", "--steps", "5",
                    "--step-ms", "0", "--repeats", "2", "--json", "--artifacts-dir", str(out))
    assert result.exit_code == 0, result.stderr
    return orjson.loads(Path(orjson.loads(result.stdout)["artifact"]).read_bytes())


def _baseline(tmp_path: Path, record: dict, **changes) -> str:
    path = tmp_path / "baseline.json"
    path.write_bytes(orjson.dumps(dict(record, **changes)))
    return str(path)


def _smoke_artifacts(folder: Path) -> list[Path]:
    return sorted((folder / "smoke").glob("*.json")) if (folder / "smoke").exists() else []


def test_smoke_regression_exits_5_with_one_json_object(tmp_path, smoke_artifact):
    """A run far slower than its baseline (baseline tokens/s x 1000) exits 5; stderr's table names the metric;
    stdout is exactly one JSON object with exit_code 5, ok false, error Regression and regression.pass false, and
    the artifact holds the same object. The baseline's first batch took 1000 s: a first batch left as measured on a
    quiet moment regresses on a loaded machine, and tokens/s must be the one metric that regresses."""
    baseline = _baseline(tmp_path, smoke_artifact, tokens_per_s=smoke_artifact["tokens_per_s"] * 1000,
                         first_batch_s=1000.0)
    out = tmp_path / "out"
    result = invoke(*SMOKE, "--baseline", baseline, "--max-regression", "20", "--json", "--artifacts-dir", str(out))
    assert result.exit_code == EXIT_KPI, result.stderr
    assert "tokens_per_s" in result.stderr and "REGRESSED" in result.stderr
    data = orjson.loads(result.stdout)  # orjson refuses trailing data: a second object would fail here
    assert data["exit_code"] == EXIT_KPI and data["ok"] is False
    assert data["error"]["type"] == "Regression" and "tokens_per_s" in data["error"]["message"]
    assert "bound 20 %" in data["error"]["message"]
    gate = data["regression"]
    assert gate["pass"] is False and gate["baseline"] == baseline and gate["max_regression_pct"] == 20
    failed = [check for check in gate["checks"] if not check["pass"]]
    assert [check["metric"] for check in failed] == ["tokens_per_s"] and failed[0]["worse_is"] == "lower"
    assert orjson.loads(Path(data["artifact"]).read_bytes()) == data


def test_smoke_better_than_baseline_exits_0(tmp_path, smoke_artifact):
    """A run far faster than its baseline (first batch 1000 s, 1 token/s) exits 0 with regression.pass true and
    no error; a note says the fetch p95 of a 3-batch smoke is not compared; the gate's pass line is on stderr
    without --json (with it, stderr keeps only warnings and errors)."""
    baseline = _baseline(tmp_path, smoke_artifact, first_batch_s=1000.0, tokens_per_s=1.0)
    result = invoke(*SMOKE, "--baseline", baseline, "--json", "--artifacts-dir", str(tmp_path / "out"))
    assert result.exit_code == 0, result.stderr
    data = orjson.loads(result.stdout)
    assert data["ok"] is True and data["error"] is None and data["exit_code"] == 0
    gate = data["regression"]
    assert gate["pass"] is True and gate["max_regression_pct"] == 10  # the default bound
    assert {check["metric"] for check in gate["checks"]} == {"first_batch_s", "tokens_per_s"}
    assert any(note.startswith("fetch_p95_ms: skipped") for note in gate["notes"])
    assert "regression gate" not in result.stderr  # --json: stderr only for warnings and errors, as measure's
    table = invoke(*SMOKE, "--baseline", baseline, "--artifacts-dir", str(tmp_path / "out"))
    assert table.exit_code == 0 and "regression gate: pass" in " ".join(table.stderr.split())


def test_smoke_without_baseline_records_no_regression(tmp_path):
    """Without --baseline the artifact and the --json object carry "regression": null and nothing changes."""
    result = invoke(*SMOKE, "--batches", "1", "--json", "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert orjson.loads(result.stdout)["regression"] is None
    assert "regression gate" not in result.stderr


def test_failed_smoke_keeps_its_own_code(tmp_path, smoke_artifact):
    """A smoke that fails by itself (a source too small for one batch: exit 1) keeps its code and error even
    against a baseline it would regress from; the comparison is recorded with nothing to compare."""
    tiny = tmp_path / "tiny.jsonl"
    tiny.write_text('{"text": "too short"}\n')
    config = dict(smoke_artifact["config"], source="local", local_path=str(tiny))
    baseline = _baseline(tmp_path, smoke_artifact, config=config, tokens_per_s=smoke_artifact["tokens_per_s"] * 1000)
    result = invoke("smoke", "--local-path", str(tiny), "--tokenizer", "byte", "--baseline", baseline, "--json",
                    "--artifacts-dir", str(tmp_path / "out"))
    assert result.exit_code == 1, result.stderr
    data = orjson.loads(result.stdout)
    assert data["exit_code"] == 1 and data["error"]["type"] == "CheckFailed"
    assert "nothing to compare: no metric is present on both sides" in data["regression"]["notes"]


@pytest.mark.parametrize("case", ["missing", "not-json", "measure-summary", "other-seq-len", "failed-run",
                                  "error-object"])
def test_a_bad_baseline_is_refused_before_the_run(case, tmp_path, smoke_artifact, measure_summary):
    """A baseline that cannot serve (missing, not JSON, another command's artifact, other work, a failed run, an
    error object) exits 2 with one line naming the path (and, for other work, the field and both values), and the
    smoke never starts: no artifact is written."""
    if case == "missing":
        baseline, needles = str(tmp_path / "nope.json"), ["no such file"]
    elif case == "not-json":
        (tmp_path / "b.txt").write_text("not json at all\n")
        baseline, needles = str(tmp_path / "b.txt"), ["is not JSON"]
    elif case == "measure-summary":
        baseline, needles = _baseline(tmp_path, measure_summary), ["fwe measure summary", "fwe smoke artifact"]
    elif case == "other-seq-len":
        baseline = _baseline(tmp_path, smoke_artifact, config=dict(smoke_artifact["config"], seq_len=512))
        needles = ["seq_len", "--seq-len", "512", "1024"]
    elif case == "failed-run":
        error = {"type": "LoaderTimeout", "message": "no batch within 60 s", "stage": "reading first document"}
        baseline = _baseline(tmp_path, smoke_artifact, ok=False, exit_code=3, error=error, first_batch_s=None)
        needles = ["failed run", "LoaderTimeout"]
    else:
        error = {"type": "ConfigError", "message": "bad", "stage": None}
        baseline = _baseline(tmp_path, {"ok": False, "exit_code": 2, "error": error, "command": "smoke"})
        needles = ["error object"]
    out = tmp_path / "out"
    result = invoke(*SMOKE, "--baseline", baseline, "--json", "--artifacts-dir", str(out))
    assert result.exit_code == EXIT_USAGE, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and baseline in lines[0], result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    data = orjson.loads(result.stdout)
    assert data["exit_code"] == EXIT_USAGE and data["error"]["type"] == "ConfigError"
    assert _smoke_artifacts(out) == []


@pytest.mark.parametrize("args,needles", [
    (("--max-regression", "5"), ["--max-regression", "--baseline"]),
    (("--max-regression", "0"), ["--max-regression", "> 0"]),
    (("--max-regression", "abc"), ["--max-regression"]),
    (("--max-regression", "5000"), ["--max-regression", "1,000"]),
])
def test_max_regression_usage_errors(args, needles, tmp_path, smoke_artifact):
    """--max-regression without --baseline, out of its range (LIMITS) or not a number: exit 2, one line naming
    --max-regression, and no run."""
    with_baseline = () if args[1] == "5" else ("--baseline", _baseline(tmp_path, smoke_artifact))
    out = tmp_path / "out"
    result = invoke(*SMOKE, *with_baseline, *args, "--artifacts-dir", str(out))
    assert result.exit_code == EXIT_USAGE, result.stderr
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)
    assert _smoke_artifacts(out) == []


def test_smoke_help_names_the_gate_and_exit_5():
    """smoke --help shows --baseline, --max-regression and exit code 5 in its epilog."""
    text = " ".join(invoke("smoke", "--help").stdout.split())
    for needle in ("--baseline", "--max-regression", "5 a metric regressed beyond --max-regression"):
        assert needle in text, needle


def test_measure_regression_and_pass_through_the_command(tmp_path, measure_summary):
    """`fwe measure --baseline`: against a baseline with tokens/s x 1000 it exits 5 with one JSON object whose
    regression names tokens_per_s; against one with 1 token/s and 1000 s first batches it exits 0; a baseline made
    with other --steps is refused (exit 2) before any run folder exists. Both baselines claim a 1 s fetch p95 and the
    first holds 1000 s first batches: figures left as measured on a quiet moment regress on a loaded machine, which
    is not what this test is about."""
    args = ("measure", "--warm", "--source", "synthetic", "--tokenizer", "byte", "--steps", "5", "--step-ms", "0",
            "--repeats", "2")
    warm = [dict(run, tokens_per_s=run["tokens_per_s"] * 1000, fetch_p95_ms=1000.0, first_batch_s=1000.0)
            for run in measure_summary["runs"]]
    faster = _baseline(tmp_path, measure_summary, runs=warm)
    result = invoke(*args, "--baseline", faster, "--json", "--artifacts-dir", str(tmp_path / "a"))
    data = orjson.loads(result.stdout)
    assert result.exit_code == EXIT_KPI and data["exit_code"] == EXIT_KPI and data["error"]["type"] == "Regression"
    assert [c["metric"] for c in data["regression"]["checks"] if not c["pass"]] == ["tokens_per_s"]
    slow = [dict(run, tokens_per_s=1.0, first_batch_s=1000.0, fetch_p95_ms=1000.0) for run in measure_summary["runs"]]
    (tmp_path / "slow").mkdir()
    slower = _baseline(tmp_path / "slow", measure_summary, runs=slow)
    result = invoke(*args, "--baseline", slower, "--artifacts-dir", str(tmp_path / "b"))
    assert result.exit_code == 0, result.stderr
    assert "regression gate" in result.stderr
    other = ["6" if (i and args[i - 1] == "--steps") else a for i, a in enumerate(args)]
    result = invoke(*other, "--baseline", slower, "--artifacts-dir", str(tmp_path / "c"))
    assert result.exit_code == 2 and "--steps" in result.stderr and not (tmp_path / "c").exists()


# -- the measure side: the functions `fwe measure` calls, on a real summary -----------------------------------------

def test_measure_gate_functions(tmp_path, measure_summary):
    """open_gate vets a measure baseline up front (other --steps: exit 2 naming plan steps and both values); judge on
    a certain regression (baseline tokens/s x 1000 on every run) records the comparison and gives the Regression that
    records the summary at exit 5, and on a certain improvement gives none; a summary that failed by itself keeps its
    own code, the comparison kept for information; without a baseline the summary records no comparison."""
    from fwe_cli.cli.exit_codes import EXIT_LOADER, record_outcome
    from fwe_cli.errors import Regression, RunFailed
    from fwe_cli.measure.gate import open_gate

    config, plan = measure_summary["config"], measure_summary["plan"]
    with pytest.raises(ConfigError, match=r"plan steps \(--steps\) 5, this run has 50"):
        open_gate("measure", _baseline(tmp_path, measure_summary), None, config, dict(plan, steps=50))
    faster = copy.deepcopy(measure_summary)
    for run in faster["runs"]:
        run["tokens_per_s"] = (run["tokens_per_s"] or 1) * 1000
    gate = open_gate("measure", _baseline(tmp_path, faster), 15, config, plan)
    current = copy.deepcopy(measure_summary)
    regression = gate.judge(current)
    assert isinstance(regression, Regression) and "tokens_per_s" in str(regression)
    assert record_outcome(current, regression) == EXIT_KPI
    assert current["exit_code"] == EXIT_KPI and current["ok"] is False and current["error"]["type"] == "Regression"
    tokens = next(check for check in current["regression"]["checks"] if check["metric"] == "tokens_per_s")
    assert tokens["pass"] is False and tokens["n_baseline"] == tokens["n_current"] == 2
    assert "cold_first_batch_s: skipped, measured by neither run" in current["regression"]["notes"]
    failed = copy.deepcopy(measure_summary)
    own = RunFailed("1 of 4 runs failed; first: SourceError: gone", [{"type": "SourceError"}])
    regression = gate.judge(failed)
    assert record_outcome(failed, own or regression) == EXIT_LOADER and failed["exit_code"] == EXIT_LOADER
    assert failed["error"]["type"] == "RunFailed" and failed["regression"]["pass"] is False
    slower = copy.deepcopy(measure_summary)
    for run in slower["runs"]:
        run.update(first_batch_s=1000.0, fetch_p95_ms=10_000.0, tokens_per_s=1.0)
    current = copy.deepcopy(measure_summary)
    assert open_gate("measure", _baseline(tmp_path, slower), None, config, plan).judge(current) is None
    assert current["regression"]["pass"] is True
    assert open_gate("measure", None, None, config, plan).judge(current) is None and current["regression"] is None


def test_load_baseline_refuses_a_smoke_artifact_for_measure(tmp_path, smoke_artifact):
    """A smoke artifact given to measure: ConfigError naming the path and both kinds of artifact."""
    path = _baseline(tmp_path, smoke_artifact)
    with pytest.raises(ConfigError, match="is a fwe smoke artifact.*fwe measure compares against"):
        load_baseline(path, "measure")


# -- compare's rules, on hand-made records --------------------------------------------------------------------------

def _measure(*, cold=(), warm=(), tokens=(), p95=(), prime=(), **extra) -> dict:
    """A measure summary with these figures: one run per value (tokens/p95 on the warm runs)."""
    runs = [{"kind": "prime", "first_batch_s": value, "tokens_per_s": 1e9, "fetch_p95_ms": 0.001} for value in prime]
    runs += [{"kind": "cold", "first_batch_s": value} for value in cold]
    for index, value in enumerate(warm):
        runs.append({"kind": "warm", "first_batch_s": value, "tokens_per_s": tokens[index] if tokens else None,
                     "fetch_p95_ms": p95[index] if p95 else None})
    config = {"source": "synthetic", "tokenizer": "byte", "seq_len": 1024, "batch_size": 1, "doc_batch": 64}
    base = {"runs": runs, "verdict": {"pass": True, "checks": []}, "config": config,
            "plan": {"steps": 200, "step_ms": 0.0, "repeats": 1}}
    return {**base, **extra}


def test_compare_uses_medians():
    """Each side is the median of its runs: one slow outlier among three single values does not move it."""
    baseline = _measure(warm=[1.0, 1.0, 1.0])
    current = _measure(warm=[1.0, 1.02, 9.0])
    check = compare("measure", baseline, current, 10)["checks"][0]
    assert check["metric"] == "warm_first_batch_s" and check["current"] == 1.02 and check["pass"] is True


def test_compare_with_repeats_needs_ranges_apart():
    """With ≥ 2 values on both sides, a median worse beyond the bound regresses only when every current value is
    worse than every baseline value; overlapping ranges pass with a note saying so."""
    overlapping = check_metric("tokens_per_s", [1000.0, 900.0, 600.0], [700.0, 650.0, 1100.0], 10)
    assert overlapping["pass"] is True and "overlap" in overlapping["note"]
    apart = check_metric("tokens_per_s", [1000.0, 900.0, 950.0], [700.0, 650.0, 800.0], 10)
    assert apart["pass"] is False and apart["worse_is"] == "lower" and apart["delta_pct"] == pytest.approx(-26.32)
    single = check_metric("tokens_per_s", [1000.0], [700.0, 650.0, 1100.0], 10)  # one side single: median rule only
    assert single["pass"] is False and single["n_baseline"] == 1 and single["n_current"] == 3


def test_compare_absolute_floors():
    """A change under a metric's absolute floor never regresses, whatever its percentage, and the note says the
    floor applied; past the floor the same percentage regresses."""
    tiny = check_metric("first_batch_s", [0.010], [0.010 + FIRST_BATCH_FLOOR_S * 0.9], 10)
    assert tiny["pass"] is True and tiny["delta_pct"] > 100 and "floor" in tiny["note"]
    big = check_metric("first_batch_s", [0.010], [0.010 + FIRST_BATCH_FLOOR_S * 1.1], 10)
    assert big["pass"] is False and "floor" not in big["note"]
    p95 = check_metric("fetch_p95_ms", [0.1], [0.1 + FETCH_P95_FLOOR_MS * 0.5], 10)
    assert p95["pass"] is True and "1 ms floor" in p95["note"]
    better = check_metric("first_batch_s", [5.0], [1.0], 10)
    assert better["pass"] is True and better["note"] == ""


def test_compare_skips_missing_metrics_and_lists_differences():
    """Only metrics on both sides are compared (prime runs never count); the others are named in notes, and so
    are allowed config and plan differences."""
    baseline = _measure(warm=[1.0], tokens=[1000.0], prime=[0.5])
    current = _measure(cold=[2.0], warm=[1.0], tokens=[990.0], prime=[50.0],
                       config=dict(baseline["config"], doc_batch=128), plan=dict(baseline["plan"], repeats=3))
    record = compare("measure", baseline, current, 10, "b.json")
    assert [check["metric"] for check in record["checks"]] == ["warm_first_batch_s", "tokens_per_s"]
    assert record["pass"] is True and record["baseline"] == "b.json"
    assert "cold_first_batch_s: skipped, not in the baseline" in record["notes"]
    assert "fetch_p95_ms: skipped, measured by neither run" in record["notes"]
    assert "config doc_batch: 64 in the baseline, 128 now" in record["notes"]
    assert "plan repeats: 1 in the baseline, 3 now" in record["notes"]


def test_compare_refuses_other_work():
    """A baseline with another step_ms (measure) or tokenizer: ConfigError naming the field and both values."""
    baseline = _measure(warm=[1.0])
    with pytest.raises(ConfigError, match=r"plan step_ms \(--step-ms\) 0.0, this run has 150.0"):
        compare("measure", baseline, _measure(warm=[1.0], plan={"steps": 200, "step_ms": 150.0}), 10)
    other = _measure(warm=[1.0], config=dict(baseline["config"], tokenizer="gpt2"))
    with pytest.raises(ConfigError, match="config tokenizer 'byte', this run has 'gpt2'"):
        compare("measure", baseline, other, 10)


def test_smoke_fetch_p95_needs_enough_fetches(smoke_artifact):
    """A smoke's fetch p95 is compared only over enough batches (P95_MIN_FETCHES); over fewer it is skipped with a
    note saying how many it had."""
    many = copy.deepcopy(smoke_artifact)
    many["loader"].update(steps=P95_MIN_FETCHES, fetch_p95_ms=2.0)
    worse = copy.deepcopy(many)
    worse["loader"]["fetch_p95_ms"] = 200.0
    record = compare("smoke", many, worse, 10)
    assert any(check["metric"] == "fetch_p95_ms" and not check["pass"] for check in record["checks"])
    few = copy.deepcopy(many)
    few["loader"]["steps"] = 3
    notes = compare("smoke", few, worse, 10)["notes"]
    assert any("pulled 3 batches" in note for note in notes)
