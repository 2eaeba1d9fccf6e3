"""The warmup computed from a measured run (measure.warmup, pure functions on made-up producer timelines): the
smallest warmup that removes every stalled step, its timeout and queue depth, the cases where none is needed or none
helps, several runs combined; then how `fwe tune` writes it into fwe.env and verifies it (trials stubbed, fake
clock), and one real `fwe measure` whose planted slow tokenizer stalls its first steps."""

from __future__ import annotations

import orjson
import pytest

from fwe_cli.loader import resolve_config
from fwe_cli.measure import tune
from fwe_cli.measure.tune import TunePlan, env_file_text, run_tune
from fwe_cli.measure.warmup import (STALL_S, advice_env, advise_warmup, StalledSteps, combine, simulate,
                                    work_times)
from tests.helpers import invoke

STEP = 0.1
# batch 1 after a 0.5 s start, then 10 ms a batch, but batch 4 takes 400 ms (a late Hub read)
BURST = [0.5, 0.01, 0.01, 0.4] + [0.01] * 30


def test_work_is_the_time_between_hand_overs_less_the_wait_for_room():
    """A batch's own work: from the previous hand-off (the loader's start for the first) to its own, less the time
    its put waited for room in a full queue (a deeper queue would not have waited)."""
    produced = [(10.5, 0.0), (10.6, 0.05), (10.65, 0.0)]
    assert work_times(produced, start=10.0) == pytest.approx([0.5, 0.05, 0.05])


def test_simulation_waits_for_a_late_batch_and_not_for_early_ones():
    """Without warmup, step 4 asks at 0.8 s (0.5 s + 3 steps) for batch 4, which is queued at 0.92 s: it waits
    0.12 s; every other step finds its batch queued. With 4 batches queued first, training starts at 0.92 s and no
    step waits."""
    waits, start = simulate(BURST, STEP, 20, warmup=0, queue_depth=8)
    assert start == 0.0 and waits[2] == pytest.approx(0.12) and [w for i, w in enumerate(waits) if i != 2] == [0.0] * 18
    waits, start = simulate(BURST, STEP, 20, warmup=4, queue_depth=8)
    assert start == pytest.approx(0.92) and max(waits) == 0.0


def test_the_smallest_warmup_that_removes_every_stall_is_advised():
    """The burst needs 4 batches queued (3 still leave step 4 waiting); the timeout is twice the 0.92 s fill rounded
    up to whole seconds; Q stays 8; the variables say so."""
    advice = advise_warmup(BURST, STEP, 20, queue_depth=8)
    assert (advice.batches, advice.queue_depth, advice.stalled_steps, advice.helps) == (4, 8, 1, True)
    assert advice.fill_s == pytest.approx(0.92) and advice.timeout_s == 2.0
    assert max(simulate(BURST, STEP, 20, warmup=3, queue_depth=8)[0]) > STALL_S
    assert advice_env(advice.to_dict(), 8) == {"NSA_FWE_WARMUP_BATCHES": "4", "NSA_FWE_WARMUP_TIMEOUT": "2"}
    assert "without warmup 1 of 19 steps after the first stall at a 100 ms step" in advice.reason


def test_a_warmup_deeper_than_the_queue_raises_q():
    """With Q 2 the warmup of 4 cannot be queued: Q is raised to 4 with it, and NSA_FWE_Q is among the variables."""
    advice = advise_warmup(BURST, STEP, 20, queue_depth=2)
    assert (advice.batches, advice.queue_depth) == (4, 4) and "Q raised from 2 to 4" in advice.reason
    assert advice_env(advice.to_dict(), 2)["NSA_FWE_Q"] == "4"


def test_no_stall_means_no_warmup_and_a_slow_loader_gets_none():
    """A producer ahead of the step needs no warmup; one slower than the step on average gets none either (a
    warmup would only delay its stalls) and says so; with no step there is nothing to keep up with."""
    fast = advise_warmup([0.5] + [0.01] * 20, STEP, 20, queue_depth=8)
    assert (fast.batches, fast.helps, fast.stalled_steps) == (0, True, 0) and advice_env(fast.to_dict(), 8) == {}
    slow = advise_warmup([0.5] + [0.15] * 40, STEP, 20, queue_depth=8)
    assert (slow.batches, slow.helps) == (0, False) and "falls behind the step" in slow.reason
    none = advise_warmup(BURST, 0.0, 20, queue_depth=8)
    assert (none.batches, none.helps) == (0, False) and "--step-ms 0" in none.reason


def test_runs_combine_to_the_largest_need_and_a_run_none_helps_decides():
    """Over several runs: the largest warmup, Q, timeout and fill any of them needs; if no warmup helps one run,
    that run's advice is the answer."""
    small = advise_warmup(BURST, STEP, 20, queue_depth=8).to_dict()
    late = advise_warmup([2.0, 0.01, 0.01, 0.01, 0.01, 0.6] + [0.01] * 30, STEP, 20, queue_depth=2).to_dict()
    both = combine([small, late])
    assert both["batches"] == max(small["batches"], late["batches"]) == late["batches"]
    assert both["queue_depth"] == 8 and both["timeout_s"] == max(small["timeout_s"], late["timeout_s"])
    assert both["runs"] == 2
    slow = advise_warmup([0.5] + [0.15] * 40, STEP, 20, queue_depth=8).to_dict()
    assert combine([small, slow])["helps"] is False and combine([]) is None


def test_a_measured_stall_is_an_empty_queue_and_a_real_wait():
    """Measured stalled steps (numbered from 2, as the heartbeat numbers them): the queue was empty when the step
    asked and it waited more than STALL_S; a long wait with a batch queued (the GIL) is not one. Counted as they come:
    how many, and the first."""
    stalled = StalledSteps()
    assert (stalled.count, stalled.first) == (0, None)
    for fill, wait in zip([0, 3, 0, 0], [0.05, 0.01, 0.0002, 0.2]):
        stalled.note(fill, wait)
    assert (stalled.count, stalled.first) == (2, 2)
    late = StalledSteps()
    for fill, wait in zip([None, 0, 0], [0.0002, 0.0001, 0.3]):  # None: no prefetch, nothing queued
        late.note(fill, wait)
    assert (late.count, late.first) == (1, 4)


# -- fwe tune: the recommended setting's warmup into fwe.env, verified by one more run -------------------------------

def test_tune_writes_the_warmup_into_fwe_env_and_verifies_it(monkeypatch):
    """Stall objective, trials stubbed: the recommended setting's trials needed a warmup of 4 at Q 2, so fwe.env sets
    NSA_FWE_Q=4 and the warmup with its reason; one more run of that setting, configured with the warmup, reports
    its stalled steps and first batch."""
    clock, spawned = {"t": 0.0}, []
    advice = advise_warmup(BURST, STEP, 20, queue_depth=2).to_dict()

    def fake_spawn_run(config, kind, run_dir, plan, env=None):
        clock["t"] += 1.0
        spawned.append((kind, config))
        return {"kind": kind, "error": None, "stall_fraction": 0.01, "fetch_p95_ms": 1.0, "fetch_p99_ms": 120.0,
                "first_batch_s": 0.6 if kind == "trial" else 1.0, "stalled_steps": 1 if kind == "trial" else 0,
                "steps": 19, "warmup_advice": advice, "warmup": {"requested": config.warmup_batches},
                "run_dir": run_dir}

    monkeypatch.setattr(tune, "spawn_run", fake_spawn_run)
    plan = TunePlan(doc_batches=(16,), queue_depths=(2,), repeats=2, budget_s=100.0, steps=1, step_ms=100.0)
    summary = run_tune(resolve_config(env={}, source="synthetic"), plan, "out", clock=lambda: clock["t"])
    kind, config = spawned[-1]
    assert [k for k, _ in spawned] == ["trial", "trial", "verify"]
    assert (config.queue_depth, config.warmup_batches, config.warmup_timeout, config.doc_batch) == (4, 4, 2.0, 16)
    verify = summary["warmup"]["verify"]
    assert verify["stalled_steps"] == 0 and verify["first_batch_s"] == 1.0 and verify["first_batch_s_without"] == 0.6
    summary.update(finished="now", host={"hostname": "node"}, test_hooks={})
    text = env_file_text(summary)
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "NSA_FWE_DOC_BATCH=16", "NSA_FWE_Q=4", "NSA_FWE_WARMUP_BATCHES=4", "NSA_FWE_WARMUP_TIMEOUT=2"]
    assert "# warmup: without warmup 1 of 19 steps" in text and "# verified: 0 stalled step(s) of 19" in text


def test_tune_leaves_the_verification_out_when_the_budget_is_spent(monkeypatch):
    """A budget that the trials used up: the warmup is still advised and written, its verification is skipped
    with the reason."""
    advice = advise_warmup(BURST, STEP, 20, queue_depth=8).to_dict()
    monkeypatch.setattr(tune, "spawn_run", lambda config, kind, run_dir, plan, env=None: {
        "kind": kind, "error": None, "stall_fraction": 0.01, "fetch_p95_ms": 1.0, "warmup_advice": advice})
    clock = iter(float(t) for t in range(100))
    plan = TunePlan(doc_batches=(16,), queue_depths=(8,), repeats=1, budget_s=1.5, steps=1, step_ms=100.0)
    summary = run_tune(resolve_config(env={}, source="synthetic"), plan, "out", clock=lambda: next(clock))
    assert summary["warmup"]["verify"] is None and summary["warmup"]["skipped"].startswith("budget")
    assert summary["recommendation"]["env"]["NSA_FWE_WARMUP_BATCHES"] == "4"


def env_file_values(text: str) -> dict[str, str]:
    """fwe.env's NAME=value lines, as `set -a; . fwe.env` sets them."""
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


@pytest.mark.parametrize("work", [[0.5] + [0.01] * 40, [0.5] + [0.15] * 40], ids=["no-stall", "falls-behind"])
def test_fwe_env_without_a_warmup_overrides_a_stale_one(monkeypatch, work):
    """When the recommended setting needs no warmup (no step stalled) or none helps (the loader falls behind),
    fwe.env still writes the warmup tune decided, NSA_FWE_WARMUP_BATCHES=0 and the default timeout: applied over an
    environment that holds another node's warmup (8 batches, 5 s, more than the recommended Q of 2 can hold), the
    resolved config is the one tune decided, with no warmup left in force."""
    advice = advise_warmup(work, STEP, 20, queue_depth=2).to_dict()
    assert advice["batches"] == 0
    monkeypatch.setattr(tune, "spawn_run", lambda config, kind, run_dir, plan, env=None: {
        "kind": kind, "error": None, "stall_fraction": 0.0, "fetch_p95_ms": 1.0, "warmup_advice": advice})
    plan = TunePlan(doc_batches=(16,), queue_depths=(2,), repeats=1, budget_s=100.0, steps=1, step_ms=100.0)
    summary = run_tune(resolve_config(env={}, source="synthetic"), plan, "out", clock=lambda: 0.0)
    summary.update(finished="now", host={"hostname": "node"}, test_hooks={})
    written = env_file_values(env_file_text(summary))
    assert written == {"NSA_FWE_DOC_BATCH": "16", "NSA_FWE_Q": "2", "NSA_FWE_WARMUP_BATCHES": "0",
                       "NSA_FWE_WARMUP_TIMEOUT": "30"}
    assert summary["recommendation"]["export"].endswith("NSA_FWE_WARMUP_BATCHES=0 NSA_FWE_WARMUP_TIMEOUT=30")
    stale = {"NSA_FWE_WARMUP_BATCHES": "8", "NSA_FWE_WARMUP_TIMEOUT": "5", "NSA_FWE_Q": "8"}
    applied = resolve_config(env={**stale, **written}, source="synthetic")
    assert (applied.warmup_batches, applied.warmup_timeout, applied.queue_depth) == (0, 30.0, 2)
    assert applied.warmup_timeout == resolve_config(env={}, source="synthetic").warmup_timeout


# -- a real fwe measure ----------------------------------------------------------------------------------------------

def test_measure_says_where_the_stall_went_and_the_warmup_that_removes_it(tmp_path):
    """Every tokenize call sleeps 400 ms (the test hook) and a batch is ~8 documents, so batch 2 comes ~400 ms
    after batch 1, 300 ms later than the 100 ms step asks for it, however fast the machine: the run stalls, the
    waits are mostly tokenize (the stage that sleeps), the summary's line says so, and the advice is a warmup whose
    variables `fwe measure` prints."""
    result = invoke("measure", "--cold", "--source", "synthetic", "--tokenizer", "byte", "--seq-len", "2048",
                    "--batch", "8", "--steps", "20", "--json", "--artifacts-dir", str(tmp_path),
                    env={"FWE_TEST_SLOW_DOC_BATCH": "64:400"})
    summary = orjson.loads(result.stdout)
    assert result.exit_code == 0, result.stderr
    (run,) = summary["runs"]
    assert run["stalled_steps"] >= 1 and run["first_stalled_step"] >= 2
    split = summary["stall_split"]
    assert max(split["by_stage_s"], key=split["by_stage_s"].get) == "tokenize"
    assert split["line"].startswith("stall ") and "% tokenize" in split["line"]
    advice = summary["warmup_advice"]
    assert advice["helps"] and advice["batches"] >= 1 and advice["timeout_s"] >= 1
    assert sum(run["stall_by_stage_s"].values()) > 0
    human = invoke("measure", "--cold", "--source", "synthetic", "--tokenizer", "byte", "--seq-len", "2048",
                   "--batch", "8", "--steps", "20", "--artifacts-dir", str(tmp_path),
                   env={"FWE_TEST_SLOW_DOC_BATCH": "64:400"})
    text = " ".join(human.stderr.split())
    assert "where the wait went: stall" in text and "warmup: NSA_FWE_WARMUP_BATCHES=" in text
