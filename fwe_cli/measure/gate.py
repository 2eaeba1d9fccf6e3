"""The regression gate of `fwe smoke` and `fwe measure` (--baseline ARTIFACT.json --max-regression PCT): the baseline is
vetted before the run (`open_gate`: a bad one fails before any time is spent), and after it this run's result is
compared with it once (`RegressionGate.judge`), the comparison written into the result. The comparison itself is
fwe_cli.measure.regression; the command-line side (flags, the table of deltas) is fwe_cli/cli/regression_gate.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from fwe_cli.errors import ConfigError, Regression


@dataclass(frozen=True)
class RegressionGate:
    """What a run is compared with: fwe `kind`'s artifact at `path` (None: no --baseline, nothing is compared)."""

    kind: str
    """'smoke' or 'measure'."""
    path: str | None = None
    """The --baseline file."""
    baseline: dict | None = None
    """Its record, as `load_baseline` vetted it."""
    max_regression: float | None = None
    """How much worse a metric may be, in %."""

    def __post_init__(self) -> None:
        if (self.path is None) != (self.baseline is None) or (self.path is not None and self.max_regression is None):
            raise ConfigError("a regression gate needs the baseline's path, its record and the bound together")

    def judge(self, result: dict) -> Regression | None:
        """Compare `result` (smoke's artifact or measure's summary) with the baseline: the comparison goes into
        result["regression"] (None without a baseline); the Regression naming each regressed metric, or None. Whether
        it decides the run's outcome is the caller's: a run that failed by itself keeps its own."""
        from fwe_cli.measure.regression import compare, regression_message

        if self.baseline is None:
            result["regression"] = None
            return None
        record = compare(self.kind, self.baseline, result, self.max_regression, self.path)
        result["regression"] = record
        return None if record["pass"] else Regression(regression_message(record))


def open_gate(kind: str, baseline: str | None, max_regression: float | None, config: dict, plan: dict | None = None,
              flags: Mapping[str, str] | None = None) -> RegressionGate:
    """The gate of --baseline and --max-regression, checked before the run. ConfigError (exit 2, one line) for
    --max-regression without --baseline or out of range, a baseline that cannot be read, is not a good run of fwe
    `kind`, or measured other work than `config` (and `plan`, for measure) describe; `flags` (config field -> flag)
    names the setting that differs."""
    from fwe_cli.measure.regression import (DEFAULT_MAX_REGRESSION_PCT, check_max_regression, check_same_work,
                                            load_baseline)

    if baseline is None:
        if max_regression is not None:
            raise ConfigError(f"--max-regression {max_regression:g} needs --baseline ARTIFACT.json (the run to "
                              "compare against)")
        return RegressionGate(kind)
    bound = DEFAULT_MAX_REGRESSION_PCT if max_regression is None else max_regression
    check_max_regression(bound)
    record = load_baseline(baseline, kind)
    check_same_work(kind, record, config, plan, baseline, flags)
    return RegressionGate(kind, baseline, record, bound)
