"""What a measured run is asked to do, shared by `fwe measure` (MeasurePlan) and `fwe tune` (TunePlan).

Both spawn the same fresh-process run (`fwe_cli.measure.cold_warm.spawn_run`), so the knobs of one run — steady-state
steps, simulated compute per step, repeats, the per-run time limit and the KPI targets — are declared and checked
once, here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from fwe_cli.errors import ConfigError
from fwe_cli.loader.limits import check_limit

DEFAULT_TARGETS = {"cold_first_batch_s": 10.0, "warm_first_batch_s": 5.0, "fetch_p95_ms": 100.0}
DEFAULT_STEP_MS = 100.0
"""The simulated training step of `fwe measure` and `fwe tune` when --step-ms is not given: the order of one
optimizer step of a small language model on one GPU. GPT-2 small (124M parameters) at batch 8 x 1024 tokens does
6 * 124e6 * 8192 = 6.1 TFLOP per step: ~50 ms on an A100 at 40 % MFU, ~100 ms at the ~20 % MFU of a job that
waits on its data; a 350M model at the same batch takes ~3x that. The stall fraction is only meaningful against a
step time (with none, every wait is a stall), so a run reports it against this one, and a user passes the step
time from their training log for their own figure. --step-ms 0 measures the loader alone: raw tokens/s, no stall."""


def parse_targets(text: str | None) -> dict[str, float]:
    """'cold_first_batch_s=8,fetch_p95_ms=80' -> DEFAULT_TARGETS updated; ConfigError naming a bad entry."""
    targets = dict(DEFAULT_TARGETS)
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in DEFAULT_TARGETS:
            raise ConfigError(f"--targets entry {item!r} is not NAME=VALUE with NAME in {', '.join(DEFAULT_TARGETS)}")
        try:
            targets[key.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--targets entry {item!r}: {value!r} is not a number") from None
        check_limit(key.strip(), targets[key.strip()], f"--targets {key.strip()}", repr(value))
    return targets


@dataclass(frozen=True)
class RunPlan:
    """The knobs of one measured run; subclasses add what their command sweeps or sequences."""

    steps: int = 200
    """Steady-state steps measured after the first batch."""
    step_ms: float = DEFAULT_STEP_MS
    """Simulated consumer compute per step (sleep), in milliseconds (DEFAULT_STEP_MS says why 100); 0 = the loader
    alone (raw throughput; no stall fraction is reported then)."""
    repeats: int = 1
    """How many times the plan's runs are repeated."""
    run_timeout: float = 300.0
    """Seconds one run (a whole subprocess) may take before it is killed and reported as failed."""
    trial_s: float = 0.0
    """Steady state lasts at least this many seconds: more than `steps` steps are taken until it has (0 = exactly
    `steps`). `fwe tune` sets it so a trial of a fast loader is not over in a fraction of a second."""
    targets: dict = field(default_factory=lambda: dict(DEFAULT_TARGETS))
    """KPI limits: cold_first_batch_s, warm_first_batch_s, fetch_p95_ms."""

    def __post_init__(self) -> None:
        for name in ("steps", "step_ms", "repeats", "run_timeout", "trial_s"):  # each knob is the flag --<name with dashes>
            check_limit(name, getattr(self, name), "--" + name.replace("_", "-"))
        missing = [name for name in DEFAULT_TARGETS if name not in self.targets]
        if missing:
            raise ConfigError(f"targets must include {', '.join(missing)}")

    def to_dict(self) -> dict:
        """Every field but the targets (recorded beside the plan), tuples as lists: the artifact's "plan"."""
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "targets"}
        return {name: list(value) if isinstance(value, tuple) else value for name, value in plain.items()}


@dataclass(frozen=True)
class RunEvent:
    """What a measured run's caller hears as a plan runs (for live progress): a run starts, or it has ended with
    its record."""

    phase: str
    """'start' or 'done'."""
    index: int
    """0-based position of the run in the plan."""
    total: int
    """Runs the plan holds (fwe tune: trials planned; the budget may stop it sooner)."""
    label: str
    """What the run is: 'cold', 'warm', 'prime', or a tune setting's label."""
    record: dict | None = None
    """The run's record (phase 'done'): the figures of `fwe_cli.measure.cold_warm.spawn_run`, error filled in."""
