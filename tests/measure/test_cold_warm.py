"""`fwe measure`: fresh-process runs whose phases add up, the stall figure's arithmetic, KPI exit codes, artifacts."""

import time
from types import SimpleNamespace

import numpy as np
import orjson
import pytest

from fwe_cli.loader import ConfigError, resolve_config
from fwe_cli.measure import child
from fwe_cli.measure.child import PHASES
from fwe_cli.measure.cold_warm import MeasurePlan, spawn_run, verdict
from fwe_cli.measure.plan import DEFAULT_TARGETS, RunPlan, parse_targets
from fwe_cli.measure.tune import TunePlan
from tests.helpers import invoke

RUN_KEYS = {"kind", "first_batch_s", "phases", "fetch_p50_ms", "fetch_p95_ms", "fetch_p99_ms", "tokens_per_s",
            "stall_fraction", "peak_rss_mb"}


def measure_json(tmp_path, *args):
    """`fwe measure ARGS --json` in this process (the runs are still fresh interpreters, spawned by the command)."""
    result = invoke("measure", *args, "--json", "--artifacts-dir", str(tmp_path))
    return result, (orjson.loads(result.stdout) if result.stdout.strip() else None)


def test_help_teaches_flags_phases_and_exit_codes():
    """`fwe measure --help` exits 0 and names its flags, the phases and every exit code."""
    result = invoke("measure", "--help")
    text = " ".join(result.stdout.split())
    assert result.exit_code == 0
    for needle in ("--cold", "--warm", "--steps", "--step-ms", "--repeats", "--targets", "--fail-on-kpi",
                   "--timeout", "--run-timeout", "--json", "--artifacts-dir", "source_opened",
                   "0 measured", "2 bad usage", "4 a run failed", "5 a target was missed"):
        assert needle in text, needle


def test_cold_and_warm_local_runs_write_summary_with_phases(tmp_path, synthetic_jsonl, gpt2_tokenizer_json):
    """Both runs are recorded with every required key; phases add up to first_batch_s (within 5 %); page cache
    eviction of the local files is attempted and reported; --json equals summary.json."""
    result, summary = measure_json(tmp_path, "--cold", "--warm", "--local-path", str(synthetic_jsonl),
                                   "--tokenizer", gpt2_tokenizer_json, "--steps", "5")
    assert result.exit_code == 0, result.stderr
    assert [r["kind"] for r in summary["runs"]] == ["cold", "warm"]
    for run in summary["runs"]:
        assert RUN_KEYS <= set(run) and run["error"] is None
        assert list(run["phases"]) == list(PHASES)
        assert abs(sum(run["phases"].values()) - run["first_batch_s"]) <= 0.05 * run["first_batch_s"]
        assert all(v >= 0 for v in run["phases"].values())
        assert run["tokenizer"]["vocab_size"] == 50257
    cold = summary["runs"][0]
    assert cold["page_cache_dropped"]["done"] is True and cold["page_cache_dropped"]["files"] == 2
    assert orjson.loads(open(summary["artifact"], "rb").read()) == summary
    assert {c["target"] for c in summary["verdict"]["checks"]} == {"cold_first_batch_s", "warm_first_batch_s",
                                                                    "fetch_p95_ms"}
    assert summary["plan"] == {"steps": 5, "step_ms": 100.0, "repeats": 1, "run_timeout": 300.0, "trial_s": 0.0,
                               "cold": True, "warm": True}
    assert {"host", "versions", "fwe_version"} <= set(summary)
    heartbeat = open(cold["heartbeat"], "rb").read().splitlines()
    assert any(orjson.loads(line)["msg"] == "fineweb_loader_ready" for line in heartbeat)


class _FakeLoader:
    """Hands out 2 x 8 batches; each fetch blocks `fetch_ms` on the fake clock."""

    def __init__(self, clock: dict, fetch_ms: float):
        self.clock, self.fetch_ms = clock, fetch_ms
        self.pipeline = SimpleNamespace(docs=0)
        self._prefetcher = None

    def next_batch(self):
        self.clock["t"] += self.fetch_ms / 1000.0
        self.pipeline.docs += 2
        return np.zeros((2, 8), dtype=np.int32)


@pytest.mark.parametrize("fetch_ms, step_ms, stall", [(10.0, 0.0, None), (1.0, 25.0, round(1 / 26, 6))])
def test_stall_fraction_is_time_blocked_over_wall(monkeypatch, fetch_ms, step_ms, stall):
    """Steady state on a fake clock: stall = time blocked in next() / wall, so a step that outlasts the fetch
    stalls only for the fetch's share; with no step time (the loader alone) there is no stall figure, since every
    wait would count as one; tokens/s and docs/s divide by the same wall."""
    clock = {"t": 0.0}
    monkeypatch.setattr(time, "perf_counter", lambda: clock["t"])
    monkeypatch.setattr(time, "sleep", lambda seconds: clock.__setitem__("t", clock["t"] + seconds))
    steady = child._steady(_FakeLoader(clock, fetch_ms), steps=10, step_ms=step_ms)
    wall = 10 * (fetch_ms + step_ms) / 1000.0
    assert steady["steps"] == 10 and steady["wall_s"] == pytest.approx(wall)
    assert steady["stall_fraction"] == (None if stall is None else pytest.approx(stall))
    assert steady["fetch_p50_ms"] == pytest.approx(fetch_ms) and steady["fetch_max_ms"] == pytest.approx(fetch_ms)
    assert steady["tokens_per_s"] == pytest.approx(10 * 16 / wall, rel=1e-3)
    assert steady["docs_per_s"] == pytest.approx(10 * 2 / wall, rel=1e-3)


def test_kpi_miss_exit_codes(tmp_path):
    """A missed target exits 5 with --fail-on-kpi, and 0 (saying so) without it; --warm alone primes first."""
    args = ("--warm", "--source", "synthetic", "--steps", "2", "--targets", "warm_first_batch_s=0.000001")
    strict, summary = measure_json(tmp_path, *args, "--fail-on-kpi")
    assert strict.exit_code == 5 and summary["verdict"]["pass"] is False
    assert [r["kind"] for r in summary["runs"]] == ["prime", "warm"]
    lenient, summary = measure_json(tmp_path, *args)
    assert lenient.exit_code == 0 and summary["verdict"]["pass"] is False
    assert "exit 0 because --fail-on-kpi was not given" in " ".join(lenient.stderr.split())


def test_failed_run_is_reported_with_loader_exit_code(tmp_path):
    """A run whose loader fails is recorded with its error ({type, message, stage}), fails the verdict and exits 4."""
    result, summary = measure_json(tmp_path, "--cold", "--local-path", str(tmp_path / "missing.jsonl"),
                                   "--steps", "2")
    assert result.exit_code == 4
    error = summary["runs"][0]["error"]
    assert set(error) == {"type", "message", "stage"} and "no such file" in error["message"]
    assert summary["verdict"]["pass"] is False


@pytest.mark.parametrize("command, extra", [
    ("measure", ("--warm",)), ("tune", ("--doc-batch-grid", "16", "--q-grid", "1", "--repeats", "1")),
])
def test_a_truncated_gz_is_bad_input_exit_2_in_measure_and_tune(tmp_path, command, extra):
    """An InputError is a usage error (exit 2) wherever it surfaces: a .jsonl.gz cut short fails every run of measure
    and tune alike, so they exit 2 as smoke does, not the generic 4 of a failed run; the line names the file."""
    import gzip

    path = tmp_path / "docs.jsonl.gz"
    path.write_bytes(gzip.compress(b"".join(orjson.dumps({"text": f"document {i}"}) + b"\n" for i in range(500)))[:40])
    args = (*extra, "--steps", "2", "--local-path", str(path), "--tokenizer", "byte", "--artifacts-dir",
            str(tmp_path / "art"))
    result = invoke(command, *args, "--json")
    summary = orjson.loads(result.stdout)
    assert result.exit_code == 2 and summary["exit_code"] == 2, result.stderr
    runs = summary["runs" if command == "measure" else "trials"]
    assert runs and all(run["error"]["type"] == "InputError" for run in runs)
    assert str(path) in result.stderr
    assert invoke("smoke", "--local-path", str(path), "--artifacts-dir", str(tmp_path / "art")).exit_code == 2


def test_run_over_its_time_limit_is_recorded_as_run_timeout(tmp_path):
    """A run that outlasts run_timeout is killed and recorded as {type RunTimeout, message, stage None}."""
    config = resolve_config(env={}, source="synthetic")
    record = spawn_run(config, "cold", str(tmp_path / "run"), RunPlan(steps=1, run_timeout=0.001))
    assert record["error"] == {"type": "RunTimeout", "message": "run did not finish within 0.001 s", "stage": None}


def test_verdict_takes_the_worst_run_and_fails_on_failed_runs():
    """Each target is checked against the worst run of its kind; priming runs do not count; a failed run fails the
    verdict through a runs_completed check."""
    runs = [{"kind": "prime", "first_batch_s": 99.0, "fetch_p95_ms": 1.0},
            {"kind": "warm", "first_batch_s": 1.0, "fetch_p95_ms": 5.0},
            {"kind": "warm", "first_batch_s": 4.0, "fetch_p95_ms": 20.0}]
    passed = verdict(runs, DEFAULT_TARGETS)
    assert passed["pass"] is True
    assert [(c["target"], c["value"]) for c in passed["checks"]] == [("warm_first_batch_s", 4.0), ("fetch_p95_ms", 20.0)]
    failed = verdict(runs + [{"kind": "warm", "error": {"type": "RunTimeout"}}], DEFAULT_TARGETS)
    assert failed["pass"] is False and failed["checks"][-1] == {"target": "runs_completed", "limit": 4, "value": 3,
                                                                "pass": False}


@pytest.mark.parametrize("plan", [MeasurePlan, TunePlan])
@pytest.mark.parametrize("kwargs, message", [
    ({"steps": 0}, "--steps must be an integer from 1 to 10,000,000, got 0"),
    ({"repeats": True}, "--repeats must be an integer from 1 to 10,000, got True"),
    ({"step_ms": -1.0}, "--step-ms must be a number >= 0 and <= 86,400,000, got -1.0"),
    ({"run_timeout": 0}, "--run-timeout must be a number > 0 and <= 86,400, got 0"),
    ({"targets": {"fetch_p95_ms": 1.0}}, "targets must include cold_first_batch_s, warm_first_batch_s"),
])
def test_run_knobs_are_checked_alike_by_every_plan(plan, kwargs, message):
    """MeasurePlan and TunePlan share RunPlan's checks: the same bad knob fails both with the same message."""
    with pytest.raises(ConfigError, match=message):
        plan(**kwargs)


def test_measure_plan_needs_cold_or_warm():
    """A plan with neither a cold nor a warm run is refused, naming the flags."""
    with pytest.raises(ConfigError, match="give --cold, --warm or both"):
        MeasurePlan(cold=False, warm=False)


@pytest.mark.parametrize("text", ["fetch_p95_ms", "bogus=1", "fetch_p95_ms=fast"])
def test_bad_targets_are_usage_errors(text, tmp_path):
    """A malformed --targets entry is a ConfigError naming it, and `fwe measure` exits 2 before any run."""
    with pytest.raises(ConfigError, match="--targets entry"):
        parse_targets(text)
    result = invoke("measure", "--source", "synthetic", "--targets", text, "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 2 and "--targets entry" in result.stderr
    assert not (tmp_path / "measure").exists()


def test_targets_override_only_named_entries():
    """--targets changes the named limits and keeps the defaults for the others."""
    assert parse_targets("fetch_p95_ms=80") == {"cold_first_batch_s": 10.0, "warm_first_batch_s": 5.0,
                                                "fetch_p95_ms": 80.0}


def test_steady_state_lasts_at_least_trial_s(monkeypatch):
    """With min_s, steady state keeps pulling batches past `steps` until that much time has passed (on a fake
    clock: 10 ms fetches, 2 steps asked, 1 s minimum -> 100 steps)."""
    clock = {"t": 0.0}
    monkeypatch.setattr(time, "perf_counter", lambda: clock["t"])
    steady = child._steady(_FakeLoader(clock, 10.0), steps=2, step_ms=0.0, min_s=1.0)
    assert steady["steps"] == 100 and steady["wall_s"] == pytest.approx(1.0)
