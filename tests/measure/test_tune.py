"""`fwe tune`: a budgeted, interleaved sweep whose test hook slows exactly the planted setting, which writes a fwe.env
that `fwe smoke` picks up, marks a cut-short sweep partial (exit 6), and ranks by a stated noise rule (on made-up
trials and a fake clock, so no assertion depends on how fast this machine is), colouring its terminal heat map by that
rule."""

import os
import subprocess
import sys

import orjson
import pytest

from fwe_cli.cli.tune_cmd import _heatmaps
from fwe_cli.loader import ConfigError, resolve_config
from fwe_cli.measure import tune
from fwe_cli.measure.tune import TunePlan, parse_grid, run_tune
from fwe_cli.measure.tune_rank import OBJECTIVES, rank_settings, recommend
from tests.helpers import fwe_env, invoke
from tests.report.support import ranked_summary

SLOW_DOC_BATCH, SLOW_MS = 16, 100  # the smaller doc batch: the memory tie-break would pick it if the hook did nothing
GRID = ("--doc-batch-grid", "16,32", "--q-grid", "1,4")
SWEEP_GRID = ("--doc-batch-grid", "16,32", "--q-grid", "4")
SMALL = ("--source", "synthetic", "--tokenizer", "byte", "--seq-len", "1024", "--batch", "8", "--steps", "10",
         "--objective", "tokens_per_s", "--trial-s", "0")


def tune_json(tmp_path, *args, env=None):
    """`fwe tune SMALL ARGS --json` in this process (each trial is still a fresh interpreter)."""
    result = invoke("tune", *SMALL, *args, "--json", "--artifacts-dir", str(tmp_path), env=env)
    return result, (orjson.loads(result.stdout) if result.stdout.strip() else None)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One 2 x 1 sweep, 2 repeats, with doc batch 16 slowed by 100 ms per tokenize call (the test hook)."""
    tmp_path = tmp_path_factory.mktemp("tune")
    return tune_json(tmp_path, *SWEEP_GRID, "--repeats", "2", "--budget-s", "240",
                     env={"FWE_TEST_SLOW_DOC_BATCH": f"{SLOW_DOC_BATCH}:{SLOW_MS}"})


def test_help_teaches_grids_budget_hook_and_exit_codes():
    """`fwe tune --help` exits 0 and names its flags, the variables it sets, the test hook and every exit code."""
    result = invoke("tune", "--help")
    text = " ".join(result.stdout.split())
    assert result.exit_code == 0
    for needle in ("--doc-batch-grid", "--q-grid", "--threads-grid", "--budget-s", "--repeats", "--objective",
                   "--steps", "--step-ms", "--targets", "--timeout", "--run-timeout", "--json", "--artifacts-dir",
                   "NSA_FWE_DOC_BATCH", "NSA_FWE_Q", "FWE_TEST_SLOW_DOC_BATCH", "set -a",
                   "0 every trial ran", "2 bad usage", "4 a trial failed", "6 partial"):
        assert needle in text, needle
    assert "tune" in invoke("--help").stdout


def test_small_grid_runs_every_trial_in_rounds_and_writes_all_outputs(sweep):
    """Every planned trial ran, in rounds (A B A B); each setting has a median and a spread over its 2 repeats;
    summary.json equals --json; fwe.env holds the recommended NAME=value lines."""
    result, summary = sweep
    assert result.exit_code == 0, result.stderr
    budget = summary["budget"]
    assert summary["partial"] is False and budget["stopped"] is None
    assert budget["trials_run"] == budget["trials_planned"] == 4
    settings = [e["setting"] for e in summary["settings"]]
    assert [t["setting"] for t in summary["trials"]] == settings * 2
    assert [t["repeat"] for t in summary["trials"]] == [0] * 2 + [1] * 2
    for entry in summary["settings"]:
        assert entry["ok"] == 2 and entry["median"] > 0 and entry["spread"] >= 0 and len(entry["values"]) == 2
    for trial in summary["trials"]:
        assert trial["error"] is None and os.path.isfile(trial["heartbeat"])
    assert orjson.loads(open(summary["artifact"], "rb").read()) == summary
    assert summary["hub_requests"] is None  # (local trials: none talked to the Hub)
    assert summary["plan"]["doc_batches"] == [16, 32] and summary["plan"]["repeats"] == 2
    rec = summary["recommendation"]
    env_lines = [line for line in open(summary["env_file"]).read().splitlines() if not line.startswith("#")]
    assert env_lines == [f"NSA_FWE_DOC_BATCH={rec['setting']['doc_batch']}", f"NSA_FWE_Q={rec['setting']['queue_depth']}"]
    assert "doc batch \\ Q" not in result.stderr  # --json: the object carries the report, stderr only warnings
    assert rec["confidence"] in ("clear", "indistinguishable")


def test_planted_slow_doc_batch_slows_exactly_its_trials(sweep):
    """The hook reached exactly the trials of the slow doc batch and slept in each of their tokenize calls: their
    first batch cannot arrive before one slowed call has ended, so first_batch_s >= the planted delay. The sweep
    records the hook, says so on stderr and marks fwe.env. (That tune then ranks the slowed setting below the others
    is a timing claim: scripts/bench_measure_claims.py; the ranking itself is checked on a fake clock below.)"""
    result, summary = sweep
    for trial in summary["trials"]:
        hook = trial["test_hook"]
        if trial["setting"]["doc_batch"] == SLOW_DOC_BATCH:
            assert hook["doc_batch"] == SLOW_DOC_BATCH and hook["ms_per_doc_batch"] == SLOW_MS
            assert hook["slowed_calls"] >= 1 and trial["first_batch_s"] >= SLOW_MS / 1000
        else:
            assert hook is None
    assert summary["test_hooks"] == {"FWE_TEST_SLOW_DOC_BATCH": f"{SLOW_DOC_BATCH}:{SLOW_MS}"}
    assert "TEST HOOK ACTIVE" in result.stderr and "WARNING: measured with test hooks" in open(summary["env_file"]).read()


def test_sourcing_fwe_env_sets_the_smoke_config(sweep, tmp_path):
    """`set -a; . fwe.env` then `fwe smoke --json` in a shell: the resolved config holds the recommended values,
    taken from the variables (not defaults: doc batch 16 or 32 and Q 4 differ from 64 and 8)."""
    _, summary = sweep
    rec = summary["recommendation"]["setting"]
    assert (rec["doc_batch"], rec["queue_depth"]) != (64, 8)
    env = fwe_env()
    script = 'set -a; . "$1"; set +a; exec "$2" -m fwe_cli smoke --source synthetic --json --artifacts-dir "$3"'
    proc = subprocess.run(["bash", "-c", script, "bash", summary["env_file"], sys.executable, str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = orjson.loads(proc.stdout)
    assert result["config"]["doc_batch"] == rec["doc_batch"] and result["config"]["queue_depth"] == rec["queue_depth"]
    assert result["env"] == {"NSA_FWE_DOC_BATCH": str(rec["doc_batch"]), "NSA_FWE_Q": str(rec["queue_depth"])}


def test_budget_too_small_marks_partial_and_exits_6(tmp_path):
    """A budget shorter than one trial: the first trial runs and is reported, no further trial starts, the result
    and fwe.env say partial, and the exit code is 6."""
    result, summary = tune_json(tmp_path, *GRID, "--repeats", "2", "--budget-s", "0.01")
    assert result.exit_code == 6, result.stderr
    budget = summary["budget"]
    assert summary["partial"] is True and budget["trials_run"] == 1 < budget["trials_planned"] == 8
    assert "budget" in budget["stopped"] and "7 of 8 trials not run" in budget["stopped"]
    assert summary["trials"][0]["error"] is None and summary["trials"][0]["tokens_per_s"] > 0
    assert summary["recommendation"]["confidence"] == "low"
    assert "3 of 4 settings were not measured at all" in summary["recommendation"]["reason"]
    assert "PARTIAL" in open(summary["env_file"]).read()
    assert orjson.loads(open(summary["artifact"], "rb").read())["partial"] is True
    assert "PARTIAL" in result.stderr


@pytest.mark.parametrize("args, message", [
    (("--doc-batch-grid", "16,x"), "--doc-batch-grid entry 'x' is not an integer"),
    (("--q-grid", "0,4"), "--q-grid entry must be an integer from 1 to 4,096, got '0'"),
    (("--q-grid", "4,4"), "--q-grid lists 4 twice"),
    (("--doc-batch-grid", "16", "--doc-batch", "32"), "give either --doc-batch-grid"),
    (("--threads-grid", "1", "--tokenizer-threads", "2"), "give either --threads-grid"),
    (("--objective", "stall", "--step-ms", "0"), "needs --step-ms > 0"),
    (("--objective", "tokens_per_s", "--step-ms", "150"), "drop --step-ms, or use --objective stall"),
    (("--trial-s", "-1"), "--trial-s"),
    (("--objective", "fastest"), "objective must be one of tokens_per_s, stall"),
    (("--budget-s", "0"), "--budget-s must be a number > 0 and <= 604,800, got 0"),
    (("--warmup-batches", "4", "--q-grid", "1,8"), "--warmup-batches=4 cannot exceed --q-grid entry=1"),
])
def test_bad_usage_exits_2_naming_the_value(args, message, tmp_path):
    """Bad grids and conflicting flags fail before any trial, in one line naming the value."""
    result = invoke("tune", "--source", "synthetic", *args, "--artifacts-dir", str(tmp_path))
    assert result.exit_code == 2 and message in " ".join(result.stderr.split())
    assert not (tmp_path / "tune").exists()


def test_parse_grid_sorts_and_tune_plan_orders_rounds():
    """Grids are sorted; trials run round by round over every setting (threads outermost); repeats are checked."""
    assert parse_grid("64, 16,32", "--x", "doc_batch") == (16, 32, 64)
    plan = TunePlan(doc_batches=(16, 32), queue_depths=(1,), threads=(1, 2), repeats=2)
    order = plan.trial_order()
    assert [r for r, _ in order] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [s for _, s in order[:4]] == [s for _, s in order[4:]] == plan.settings()
    assert plan.settings()[0] == {"doc_batch": 16, "queue_depth": 1, "tokenizer_threads": 1}
    with pytest.raises(ConfigError, match="--repeats must be an integer from 1 to 10,000, got 0"):
        TunePlan(repeats=0)


# -- run_tune on a fake clock: trials stubbed, so budget and ranking are exact ---------------------------------

def _fake_sweep(monkeypatch, tokens_per_s: dict, trial_s: float, budget_s: float, repeats: int = 2):
    """run_tune over doc batch 16/32 x Q 1 with spawn_run stubbed: each trial takes `trial_s` on the fake clock and
    measures tokens_per_s[doc_batch]; returns the summary."""
    clock = {"t": 0.0}

    def fake_spawn_run(config, kind, run_dir, plan, env=None):
        clock["t"] += trial_s
        return {"kind": kind, "error": None, "tokens_per_s": tokens_per_s[config.doc_batch], "fetch_p95_ms": 1.0,
                "stall_fraction": 0.5, "peak_rss_mb": 100.0, "mean_queue_fill": 1.0, "test_hook": None}

    monkeypatch.setattr(tune, "spawn_run", fake_spawn_run)
    plan = TunePlan(doc_batches=(16, 32), queue_depths=(1,), repeats=repeats, budget_s=budget_s, steps=1,
                    objective="tokens_per_s", step_ms=0.0)
    config = resolve_config(env={}, source="synthetic")
    return run_tune(config, plan, "unused-out-dir", clock=lambda: clock["t"])


def test_run_tune_never_picks_a_slower_setting_over_the_tie_break(monkeypatch):
    """A setting measured far slower in every repeat is not recommended nor tied with the best, although the
    memory tie-break favours it (smaller doc batch)."""
    summary = _fake_sweep(monkeypatch, {16: 1e5, 32: 1e7}, trial_s=1.0, budget_s=100.0)
    rec = summary["recommendation"]
    assert rec["setting"] == {"doc_batch": 32, "queue_depth": 1} and rec["confidence"] == "clear"
    assert all(s["doc_batch"] != 16 for s in rec["indistinguishable"])
    assert summary["budget"]["trials_run"] == 4 and summary["budget"]["elapsed_s"] == 4.0


def test_run_tune_starts_a_trial_only_if_it_fits_the_budget(monkeypatch):
    """With trials of 10 s and a 25 s budget: trials at 0 and 10 s start (20 + 10 > 25 stops the third), the
    result is partial and says how many did not run."""
    summary = _fake_sweep(monkeypatch, {16: 1e6, 32: 1e6}, trial_s=10.0, budget_s=25.0)
    budget = summary["budget"]
    assert summary["partial"] is True and budget["trials_run"] == 2 and budget["elapsed_s"] == 20.0
    assert budget["stopped"] == ("budget: 20.0 s of 25 s used; the next trial takes ~10.0 s; "
                                 "2 of 4 trials not run")
    assert [t["started_s"] for t in summary["trials"]] == [0.0, 10.0]


# -- the ranking rule, on made-up trials -------------------------------------------------------------------------

def _trials(table: dict, metric="tokens_per_s", p95=10.0):
    """{(doc_batch, q): [values...]} -> (settings, trial records)."""
    settings = [{"doc_batch": d, "queue_depth": q} for d, q in table]
    trials = [{"setting": {"doc_batch": d, "queue_depth": q}, "error": None, metric: v, "fetch_p95_ms": p95}
              for (d, q), values in table.items() for v in values]
    return settings, trials


def _pick(table, objective="tokens_per_s", target=100.0, **kw):
    settings, trials = _trials(table, OBJECTIVES[objective].metric, **kw)
    ranked = rank_settings(settings, trials, OBJECTIVES[objective], target)
    return recommend(ranked, OBJECTIVES[objective], target, swept_threads=False), ranked


def test_overlapping_ranges_tie_and_the_cheaper_setting_wins():
    """Q=8 has the best median but its range overlaps Q=1's: indistinguishable; with no stall nor p99 measured the
    two have the same headroom, so memory breaks the tie: the smaller Q is picked."""
    rec, _ = _pick({(64, 1): [100, 90, 110], (64, 8): [105, 100, 112], (16, 1): [50, 52, 51]})
    assert rec["best"] == {"doc_batch": 64, "queue_depth": 8}
    assert rec["setting"] == {"doc_batch": 64, "queue_depth": 1} and rec["confidence"] == "indistinguishable"
    assert rec["runner_up"]["setting"] == {"doc_batch": 16, "queue_depth": 1}
    assert rec["env"] == {"NSA_FWE_DOC_BATCH": "64", "NSA_FWE_Q": "1"}


def test_ties_go_to_the_most_headroom_not_the_least_memory():
    """Settings that all keep up (stall within noise): the pick is the one whose worst trial stalled least, then
    whose worst fetch p99 is lowest — here Q=8, whose worst p99 is 3 ms against Q=1's 90 ms at the same worst stall
    — although Q=1 holds less memory; the reason says why."""
    settings, trials = _trials({(64, 1): [0.002, 0.001, 0.003], (64, 8): [0.003, 0.001, 0.002]},
                               metric="stall_fraction")
    for trial in trials:
        trial["fetch_p99_ms"] = 3.0 if trial["setting"]["queue_depth"] == 8 else 90.0
    ranked = rank_settings(settings, trials, OBJECTIVES["stall"], 100.0)
    rec = recommend(ranked, OBJECTIVES["stall"], 100.0, swept_threads=False, step_ms=100.0)
    assert [(e["worst_stall"], e["worst_p99_ms"]) for e in ranked] == [(0.003, 90.0), (0.003, 3.0)]
    assert rec["setting"] == {"doc_batch": 64, "queue_depth": 8} and rec["confidence"] == "indistinguishable"
    assert "most headroom against spikes (worst stall 0.3 %, worst fetch p99 3.0 ms" in rec["reason"]
    assert rec["rule"].index("most headroom") < rec["rule"].index("least memory")  # memory only breaks exact ties


def test_separated_ranges_give_a_clear_winner_even_if_it_costs_memory():
    """Ranges that do not overlap: the better setting wins clearly even with the larger Q."""
    rec, ranked = _pick({(64, 1): [100, 101, 99], (64, 8): [150, 151, 149]})
    assert rec["setting"] == {"doc_batch": 64, "queue_depth": 8} and rec["confidence"] == "clear"
    assert [e["tied_with_best"] for e in ranked] == [False, True]


def test_floor_decides_with_one_repeat():
    """With one repeat there is no range; medians within 2 % tie, 10 % apart do not."""
    close, _ = _pick({(16, 1): [100.0], (16, 2): [101.5]})
    far, _ = _pick({(16, 1): [100.0], (16, 2): [110.0]})
    assert close["setting"]["queue_depth"] == 1 and far["setting"]["queue_depth"] == 2
    assert close["confidence"] == far["confidence"] == "low"


def test_p95_target_and_failed_trials_exclude_a_setting():
    """A setting over the p95 target is infeasible and one with a failed trial is failed: neither is picked."""
    settings, trials = _trials({(16, 1): [100, 100], (64, 1): [500, 500], (32, 1): [900, 900]})
    for trial in trials:
        if trial["setting"]["doc_batch"] == 64:
            trial["fetch_p95_ms"] = 250.0
    trials.append({"setting": {"doc_batch": 32, "queue_depth": 1}, "error": {"message": "boom"}})
    objective = OBJECTIVES["tokens_per_s"]
    ranked = rank_settings(settings, trials, objective, 100.0)
    rec = recommend(ranked, objective, 100.0, swept_threads=False)
    assert [e["status"] for e in ranked] == ["ok", "ok", "failed"] and ranked[1]["feasible"] is False
    assert rec["setting"] == {"doc_batch": 16, "queue_depth": 1} and rec["meets_p95_target"] is True


def test_stall_objective_prefers_less_stall():
    """With the stall objective, less stall wins."""
    rec, _ = _pick({(16, 1): [0.30, 0.31, 0.29], (64, 4): [0.02, 0.03, 0.02]}, objective="stall")
    assert rec["setting"] == {"doc_batch": 64, "queue_depth": 4} and rec["confidence"] == "clear"


def test_failed_trials_are_reported_with_the_code_of_their_failure(tmp_path):
    """A trial that fails (here: a malformed test hook value, a ConfigError in the measured process) is recorded
    with its message; no recommendation is made from nothing, and, every trial having failed alike, the exit code
    is that failure's (2, bad usage), not the generic 4."""
    result = invoke("tune", *SMALL, "--doc-batch-grid", "16", "--q-grid", "1", "--repeats", "1", "--json",
                    "--artifacts-dir", str(tmp_path), env={"FWE_TEST_SLOW_DOC_BATCH": "sixteen"})
    summary = orjson.loads(result.stdout)
    assert result.exit_code == 2 and summary["exit_code"] == 2 and summary["error"]["type"] == "TrialFailed"
    assert "FWE_TEST_SLOW_DOC_BATCH='sixteen'" in summary["trials"][0]["error"]["message"]
    assert summary["recommendation"] is None and summary["env_file"] is None
    assert summary["settings"][0]["status"] == "failed"


def test_a_sweep_that_separates_nothing_says_so():
    """Every setting within noise of the best: the reason says none could be told apart and gives the spread."""
    rec, ranked = _pick({(16, 1): [100, 60, 101], (64, 4): [110, 70, 112], (256, 16): [105, 65, 108]})
    assert all(e["tied_with_best"] for e in ranked) and rec["setting"] == {"doc_batch": 16, "queue_depth": 1}
    assert rec["reason"].startswith("no setting could be told apart") and rec["typical_spread"] == 21.0  # half-ranges 20.5, 21, 21.5


def test_every_setting_keeping_up_with_the_step_is_said_plainly():
    """Stall objective, every trial under the 1-point floor: the reason says every setting keeps up with the step
    (naming it), so they cannot be told apart by stall, and points to --step-ms and --objective tokens_per_s; the
    pick is the one whose worst trial stalled least (0.1 % against 0.2 %), not the one using least memory."""
    settings, trials = _trials({(16, 1): [0.001, 0.0, 0.002], (64, 4): [0.0, 0.001, 0.0]}, metric="stall_fraction")
    objective = OBJECTIVES["stall"]
    ranked = rank_settings(settings, trials, objective, 100.0)
    rec = recommend(ranked, objective, 100.0, swept_threads=False, step_ms=100.0)
    assert rec["confidence"] == "indistinguishable" and rec["setting"] == {"doc_batch": 64, "queue_depth": 4}
    assert rec["reason"].startswith("every setting keeps up with a 100 ms step")
    assert "--objective tokens_per_s" in rec["reason"] and "--step-ms" in rec["reason"]


def test_default_plan_stands_for_a_training_step_and_lasts_long_enough():
    """The default sweep ranks stall against the 100 ms step and each trial lasts at least 3 s of steady state (not
    the ~0.1 s that 200 steps of a fast loader took); tokens_per_s is measured with no step time."""
    from fwe_cli.measure.plan import DEFAULT_STEP_MS

    plan = TunePlan()
    assert (plan.objective, plan.step_ms, plan.trial_s) == ("stall", DEFAULT_STEP_MS, 3.0) and DEFAULT_STEP_MS == 100
    assert TunePlan(objective="tokens_per_s", step_ms=0.0).trial_s == 3.0
    with pytest.raises(ConfigError, match="drop --step-ms"):
        TunePlan(objective="tokens_per_s")


def test_a_token_directory_sweeps_q_only(tmp_path):
    """On a token directory no tokenizer runs: tune sweeps Q only (one doc batch, the config's), says why in its
    note, and refuses --doc-batch-grid, which would measure noise under that name (exit 2, naming the flag)."""
    from fwe_cli.loader.files.synthetic import synthetic_record
    from tests.loader.token_dirs import write_token_dir

    tokens = write_token_dir(tmp_path / "tokens", [synthetic_record(4, i)["text"] for i in range(40)], "byte", 20)
    args = ("--local-path", str(tokens), "--seq-len", "64", "--batch", "2", "--steps", "3", "--objective",
            "tokens_per_s", "--trial-s", "0", "--repeats", "1", "--artifacts-dir", str(tmp_path / "a"))
    refused = invoke("tune", *args, "--doc-batch-grid", "16,64")
    assert refused.exit_code == 2 and "--doc-batch-grid" in refused.stderr and "token ids" in refused.stderr
    result = invoke("tune", *args, "--q-grid", "1,2")
    assert result.exit_code == 0, result.stderr
    assert "only Q is swept" in result.stderr
    summary = orjson.loads((next((tmp_path / "a" / "tune").iterdir()) / "summary.json").read_bytes())
    assert len(summary["plan"]["doc_batches"]) == 1 and [s["setting"]["queue_depth"] for s in summary["settings"]] == [1, 2]


def test_terminal_heat_map_colours_a_spread_within_noise_alike():
    """`fwe tune`'s heat map on the terminal colours by the scale `fwe report` draws (report.figures.cell_shade): a
    0.216-0.228 % stall spread, every setting within noise of the best, has one background (not red to green), and
    the legend states the scale's reach and noise floor in stall points."""
    summary = ranked_summary({(16, 1): [0.00228, 0.00231, 0.00226], (16, 4): [0.00221, 0.00219, 0.00225],
                              (64, 1): [0.00216, 0.00214, 0.00219], (64, 4): [0.00224, 0.00220, 0.00227]})
    (table,) = _heatmaps(summary)
    styles = {cell.split("]", 1)[0] for column in table.columns[1:] for cell in column._cells}
    assert len(styles) == 1, styles
    from fwe_cli.cli.tune_cmd import _legend

    assert "red: 10 stall points worse; noise floor 1" in _legend(summary)


def test_the_trials_hub_requests_are_added_up_by_kind():
    """The summary's hub_requests adds each trial's counts by kind (a trial that counted none adds nothing)."""
    from fwe_cli.measure.tune import _summed

    assert _summed([{"api": 1, "cdn": 2, "resolver": 0}, None, {"api": 3, "resolver": 1}]) == \
        {"api": 4, "cdn": 2, "resolver": 1}
    assert _summed([None, None]) is None
