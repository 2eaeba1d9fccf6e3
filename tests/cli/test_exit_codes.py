"""The one table from exceptions and outcomes to exit codes (fwe_cli/cli/exit_codes.py), and how a run's outcome is
written into its result."""

from __future__ import annotations

import pytest

from fwe_cli.cli.exit_codes import (EXIT_FAILED, EXIT_INTERNAL, EXIT_KPI, EXIT_LOADER, EXIT_OK, EXIT_PARTIAL,
                                    EXIT_TIMEOUT, EXIT_USAGE, exit_code_for, record_outcome)
from fwe_cli.errors import (CheckFailed, InputError, InternalError, KpiMissed, LoaderTimeout, Partial, Regression,
                            RunFailed, SourceError, TrialFailed, VerifyFailed)


@pytest.mark.parametrize("exc, code", [
    (None, EXIT_OK), (CheckFailed(["shape"]), EXIT_FAILED), (VerifyFailed("2 problem(s)"), EXIT_FAILED),
    (KpiMissed("missed"), EXIT_KPI), (Regression("worse"), EXIT_KPI), (Partial("budget"), EXIT_PARTIAL),
    (InputError("truncated"), EXIT_USAGE), (LoaderTimeout("late", stage="x"), EXIT_TIMEOUT),
    (InternalError("bug"), EXIT_INTERNAL), (ValueError("unexpected"), EXIT_INTERNAL),
])
def test_each_outcome_has_its_code(exc, code):
    """Every outcome a command can end with maps to the code --help and runbooks/exit-codes.md give it; an exception
    fwe did not expect is an internal error."""
    assert exit_code_for(exc) == code


@pytest.mark.parametrize("types, code", [
    (["InputError", "InputError"], EXIT_USAGE),
    (["LoaderTimeout"], EXIT_TIMEOUT),
    (["SourceError", "SourceError"], EXIT_LOADER),
    (["InputError", "LoaderTimeout"], EXIT_LOADER),
    (["RunTimeout"], EXIT_LOADER),  # the run's own process: killed past --run-timeout, not an error class of fwe
    (["ValueError"], EXIT_LOADER),
    ([], EXIT_LOADER),
])
def test_failed_runs_exit_with_their_failures_code_when_they_agree(types, code):
    """measure/tune: the code of the error every failed run failed with (a truncated .gz in every run is bad input,
    2), and the loader's 4 when they differ or name nothing fwe raises."""
    for kind in (RunFailed, TrialFailed):
        assert exit_code_for(kind("failed", [{"type": name, "message": "m", "stage": None} for name in types])) == code


def test_record_outcome_writes_the_outcome_into_the_result_and_keeps_a_recorded_error():
    """record_outcome sets ok and exit_code, and error from the outcome unless the run recorded its own (with its stage)."""
    result = {"error": None}
    assert record_outcome(result, CheckFailed([])) == EXIT_FAILED
    assert result == {"ok": False, "exit_code": EXIT_FAILED,
                      "error": {"type": "CheckFailed", "message": "checks failed: no batch", "stage": None}}
    own = {"error": {"type": "SourceError", "message": "gone", "stage": "reading first document"}}
    assert record_outcome(own, SourceError("gone")) == EXIT_LOADER and own["error"]["stage"] == "reading first document"
    fine: dict = {}
    assert record_outcome(fine, None) == EXIT_OK and fine == {"ok": True, "exit_code": EXIT_OK, "error": None}
