"""The range of every number a user can set (flags, NSA_FWE_* variables, LoaderConfig.from_dict, measure/tune plans,
grids and targets), in one table, and the one check of a value against it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fwe_cli.errors import ConfigError

MAX_TIMEOUT_S = 86_400.0
"""The longest timeout fwe takes (one day): any real wait is far shorter, and past it `inf` or 1e308 would overflow
the OS's time_t inside the waits instead of failing here."""


@dataclass(frozen=True)
class Limit:
    """The range one number must be in: an integer (or a finite number) from `low` to `high`."""

    low: float
    high: float
    integer: bool = True
    low_open: bool = False
    """The low end itself is not allowed (a timeout must be > 0)."""

    def rule(self) -> str:
        if self.integer:
            return f"an integer from {self.low:,} to {self.high:,}"
        return f"a number {'>' if self.low_open else '>='} {self.low:,g} and <= {self.high:,.0f}"

    def check(self, setting: str, value: Any, typed: str | None = None) -> None:
        """ConfigError naming `setting` and what was typed (`typed`, else the value) unless `value` is in range."""
        if self.integer:
            ok = isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high
        else:  # inf is above every high and nan fails every comparison: no separate finiteness test
            ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
                  and (value > self.low if self.low_open else value >= self.low) and value <= self.high)
        if not ok:
            raise ConfigError(f"{setting} must be {self.rule()}, got {typed if typed is not None else repr(value)}")


_TIMEOUT = Limit(0, MAX_TIMEOUT_S, integer=False, low_open=True)
# Every number a user can set, checked against its range wherever it is set (flag, NSA_FWE_* variable, from_dict,
# a plan): a huge value fails here naming the setting, not later as an overflow in a wait, a refused allocation or
# an integer orjson cannot write into the artifact (it takes 64 bits at most). The highs are far above any real use.
LIMITS: dict[str, Limit] = {
    # LoaderConfig fields
    "seq_len": Limit(1, 1 << 20),
    "batch_size": Limit(1, 1 << 16),
    "doc_batch": Limit(1, 1 << 16),
    "queue_depth": Limit(1, 4096),
    "warmup_batches": Limit(0, 4096),
    "report_docs": Limit(0, 10**12),
    "tokenizer_threads": Limit(0, 1024),
    "rank": Limit(0, 1 << 20),
    "seed": Limit(-(1 << 63), (1 << 63) - 1),
    "shuffle_seed": Limit(-(1 << 63), (1 << 63) - 1),
    "shuffle_window": Limit(1, 1_000_000),
    "epochs": Limit(1, 1_000_000),
    "epoch": Limit(0, 1_000_000),
    "pack_buffer": Limit(1, 1_000_000),
    "warmup_timeout": _TIMEOUT,
    "loader_timeout": _TIMEOUT,
    "shard_mod": Limit(1, 1 << 20),
    "shard_rem": Limit(0, (1 << 20) - 1),  # and below shard_mod, which Shard checks
    # the knobs of a command or a measured run (fwe_cli.measure.plan, fwe smoke)
    "batches": Limit(1, 1_000_000),
    "steps": Limit(1, 10_000_000),
    "repeats": Limit(1, 10_000),
    "step_ms": Limit(0, MAX_TIMEOUT_S * 1000, integer=False),
    "run_timeout": _TIMEOUT,
    "trial_s": Limit(0, MAX_TIMEOUT_S, integer=False),
    "budget_s": Limit(0, 7 * MAX_TIMEOUT_S, integer=False, low_open=True),
    # fwe bootstrap: sizes (GB, MB as typed; bytes once converted) and parallelism
    "gb": Limit(0, 1e6, integer=False, low_open=True),
    "file_mb": Limit(0, 1e6, integer=False, low_open=True),
    "checkpoint_mb": Limit(0, 1e6, integer=False, low_open=True),
    "target_bytes": Limit(1, 10**15),
    "file_bytes": Limit(1, 10**12),
    "checkpoint_bytes": Limit(1, 10**12),
    "workers": Limit(0, 1024),
    "downloads": Limit(1, 256),
    # KPI targets (--targets NAME=VALUE)
    "cold_first_batch_s": _TIMEOUT,
    "warm_first_batch_s": _TIMEOUT,
    "fetch_p95_ms": Limit(0, MAX_TIMEOUT_S * 1000, integer=False, low_open=True),
    # the regression gate's bound, % worse than --baseline (fwe_cli.measure.regression); 0 would fail on noise alone
    "max_regression": Limit(0, 1000, integer=False, low_open=True),
}


def check_limit(name: str, value: Any, setting: str | None = None, typed: str | None = None) -> None:
    """Check `value` against LIMITS[name]; the error names `setting` (a flag or variable; default the name)."""
    LIMITS[name].check(setting or name, value, typed)
