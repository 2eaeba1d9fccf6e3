"""`fwe tune`'s warmup: computed from the recommended setting's trials (each measured its producer's timeline; see
fwe_cli.measure.warmup), added to the recommendation's variables (fwe.env), and verified by one more run of the
recommended setting with it applied, whose stalled steps are reported (expected: 0). No warmup is written as one
too (0 batches, the default timeout): fwe.env applied over an environment leaves none of its warmup in force.

Only for the stall objective: with no training step (--objective tokens_per_s) there is nothing to keep up with.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from typing import Callable

from fwe_cli.loader.config import LoaderConfig
from fwe_cli.measure.tune_rank import SETTING_ENV
from fwe_cli.measure.warmup import advice_env, combine

VERIFY_DIR = "verify-warmup"


def recommended_warmup(recommendation: dict | None, trials: list[dict], objective: str) -> dict | None:
    """The warmup the recommended setting's trials needed (their advice combined: the largest), None when there is no
    recommendation or no training step."""
    if recommendation is None or objective != "stall":
        return None
    mine = [t for t in trials if t["setting"] == recommendation["setting"] and not t.get("error")]
    return combine([t["warmup_advice"] for t in mine if t.get("warmup_advice")])


def warmup_env(advice: dict | None, queue_depth: int) -> dict[str, str]:
    """The warmup variables tune decides: the advice's (`advice_env`: batches, timeout, a Q raised to hold them), or
    without a warmup NSA_FWE_WARMUP_BATCHES=0 and NSA_FWE_WARMUP_TIMEOUT at its default, so that a warmup set in
    the environment the file is applied to does not stay in force."""
    return advice_env(advice, queue_depth) or {
        SETTING_ENV["warmup_batches"]: "0",
        SETTING_ENV["warmup_timeout"]: f"{LoaderConfig.__dataclass_fields__['warmup_timeout'].default:g}"}


def apply_warmup(recommendation: dict, advice: dict | None) -> None:
    """Add the warmup's variables (`warmup_env`) to the recommendation's env and export line."""
    recommendation["env"] = {**recommendation["env"], **warmup_env(advice, recommendation["setting"]["queue_depth"])}
    recommendation["export"] = "export " + " ".join(f"{k}={v}" for k, v in recommendation["env"].items())


def verify_warmup(base: LoaderConfig, recommendation: dict, advice: dict, plan, out_dir: str, trials: list[dict],
                  spawn: Callable[..., dict]) -> dict:
    """One more run of the recommended setting with the warmup applied (`spawn`: cold_warm.spawn_run); its stalled
    steps and first batch against the trials' median first batch without it."""
    setting = recommendation["setting"]
    config = dataclasses.replace(base, **{**setting, "queue_depth": advice["queue_depth"], "warmup_batches": advice["batches"],
                             "warmup_timeout": advice["timeout_s"]})
    record = spawn(config, "verify", os.path.join(out_dir, VERIFY_DIR), plan)
    before = [t["first_batch_s"] for t in trials if t["setting"] == setting and t.get("first_batch_s") is not None]
    return {"env": advice_env(advice, setting["queue_depth"]), "error": record.get("error"),
            "stalled_steps": record.get("stalled_steps"), "first_stalled_step": record.get("first_stalled_step"),
            "steps": record.get("steps"), "stall_fraction": record.get("stall_fraction"),
            "first_batch_s": record.get("first_batch_s"),
            "first_batch_s_without": round(statistics.median(before), 6) if before else None,
            "warmup": record.get("warmup"), "run_dir": record.get("run_dir"), "heartbeat": record.get("heartbeat")}


def tune_warmup(base: LoaderConfig, plan, recommendation: dict | None, trials: list[dict], out_dir: str,
                stopped: str | None, elapsed: float, spawn: Callable[..., dict]) -> dict | None:
    """The summary's `warmup`: the recommended setting's advice, added to its variables, and verified by one more run
    (`spawn`) when there is a warmup and the budget leaves room for a run (the rule every trial starts by); None
    without a recommendation or a training step. `stopped`: why the sweep stopped early (then nothing more runs)."""
    advice = recommended_warmup(recommendation, trials, plan.objective)
    if advice is None:
        return None
    apply_warmup(recommendation, advice)
    warmup = {"advice": advice, "verify": None, "skipped": None}
    expected = statistics.median(t["duration_s"] for t in trials)
    if not advice["batches"]:
        warmup["skipped"] = "no warmup to verify"
    elif stopped or elapsed + expected > plan.budget_s:
        warmup["skipped"] = f"budget: {elapsed:.1f} s of {plan.budget_s:g} s used, a run takes ~{expected:.1f} s"
    else:
        warmup["verify"] = verify_warmup(base, recommendation, advice, plan, out_dir, trials, spawn)
    return warmup


def warmup_text(warmup: dict | None) -> list[str]:
    """fwe.env's comment lines (and the report's) on the warmup: what was advised and why, and what the
    verification run found."""
    if warmup is None or warmup["advice"] is None:
        return []
    advice, verify = warmup["advice"], warmup["verify"]
    lines = [("warmup: " if advice["batches"] else "warmup: none — ") + advice["reason"]]
    if verify is not None and verify["error"] is None:
        lines.append(f"verified: {verify['stalled_steps']} stalled step(s) of {verify['steps']} in a re-run with it; "
                     f"first batch {verify['first_batch_s']:.2f} s (the trials' median without it: "
                     f"{verify['first_batch_s_without']:.2f} s)" if verify["first_batch_s_without"] is not None else
                     f"verified: {verify['stalled_steps']} stalled step(s) of {verify['steps']} in a re-run with it")
    elif verify is not None:
        lines.append(f"verification run failed: {verify['error'].get('message')}")
    elif warmup.get("skipped"):
        lines.append(f"not verified: {warmup['skipped']}")
    return lines
