"""The one place where known exceptions become exit codes and one-line messages (`_CODES`), and where a run's outcome
is written into its result (`record_outcome`)."""

from __future__ import annotations

from rich.markup import escape

from fwe_cli import errors
from fwe_cli.errors import (
    CheckFailed,
    ConfigError,
    DiskSpaceError,
    FweError,
    InputError,
    InternalError,
    KpiMissed,
    LoaderError,
    LoaderTimeout,
    OutputError,
    Partial,
    Regression,
    RunsFailed,
    SourceError,
    TokenizerError,
    VerifyFailed,
)

EXIT_OK = 0
EXIT_FAILED = 1  # the command ran but its checks or targets failed
EXIT_USAGE = 2  # bad flag, variable or config value, or a bad input file (typer's usage errors use 2 as well)
EXIT_TIMEOUT = 3  # no batch within the timeout
EXIT_LOADER = 4  # the loader, source or tokenizer failed
EXIT_KPI = 5  # measured, but a target was missed (--fail-on-kpi) or a metric regressed (--baseline)
EXIT_PARTIAL = 6  # fwe tune: the budget ran out before every trial ran; the result covers only what was measured
EXIT_DISK_SPACE = 7  # not enough free disk space (preflight) or the disk filled up while writing
EXIT_OUTPUT = 8  # the output exists with different arguments, is damaged, or cannot be written
EXIT_INTERNAL = 70  # a bug in fwe: an exception it did not expect (sysexits' EX_SOFTWARE); FWE_TRACEBACK=1 shows it
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C / SIGTERM (bootstrap: after saving a resume point)

EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} ok; {EXIT_FAILED} checks failed; {EXIT_USAGE} bad usage; "
    f"{EXIT_TIMEOUT} timeout; {EXIT_LOADER} loader/source/tokenizer error; {EXIT_DISK_SPACE} disk full; "
    f"{EXIT_OUTPUT} an output cannot be written; {EXIT_INTERNAL} internal error (a bug); {EXIT_INTERRUPTED} interrupted."
)
SMOKE_EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} ok; {EXIT_FAILED} checks failed; {EXIT_USAGE} bad usage; "
    f"{EXIT_TIMEOUT} timeout; {EXIT_LOADER} loader/source/tokenizer error; "
    f"{EXIT_KPI} a metric regressed beyond --max-regression against --baseline; {EXIT_DISK_SPACE} disk full; "
    f"{EXIT_OUTPUT} an output cannot be written; {EXIT_INTERNAL} internal error (a bug); {EXIT_INTERRUPTED} interrupted."
)
RUNS_ALIKE_HELP = (f"when every failed run failed alike, the code of that error instead: {EXIT_USAGE} a bad input, "
                   f"{EXIT_TIMEOUT} no batch in time, ...")
MEASURE_EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} measured (targets missed without --fail-on-kpi are reported, not fatal); "
    f"{EXIT_USAGE} bad usage; {EXIT_LOADER} a run failed ({RUNS_ALIKE_HELP}); {EXIT_KPI} a target was missed "
    "with --fail-on-kpi, or a metric regressed beyond --max-regression against --baseline; "
    f"{EXIT_DISK_SPACE} disk full; {EXIT_OUTPUT} an output cannot be written; {EXIT_INTERNAL} internal error (a bug); "
    f"{EXIT_INTERRUPTED} interrupted."
)
TUNE_EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} every trial ran, recommendation and fwe.env written; {EXIT_USAGE} bad usage; "
    f"{EXIT_LOADER} a trial failed (the others are still ranked) or none succeeded ({RUNS_ALIKE_HELP}); "
    f"{EXIT_PARTIAL} partial: --budget-s ran out before every trial ran (fwe.env is written from what was measured "
    "and marked partial); "
    f"{EXIT_DISK_SPACE} disk full; {EXIT_OUTPUT} an output cannot be written; {EXIT_INTERNAL} internal error (a bug); "
    f"{EXIT_INTERRUPTED} interrupted."
)
BOOTSTRAP_EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} ok (complete); {EXIT_FAILED} verification failed; {EXIT_USAGE} bad usage; "
    f"{EXIT_LOADER} source error; {EXIT_DISK_SPACE} not enough disk space (resumable); "
    f"{EXIT_OUTPUT} output conflict, locked by another run, damaged or not writable (see --force); "
    f"{EXIT_INTERNAL} internal error (a bug); {EXIT_INTERRUPTED} interrupted (resumable)."
)
TOKENIZE_EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} ok (complete); {EXIT_FAILED} verification failed; {EXIT_USAGE} bad usage; "
    f"{EXIT_LOADER} source or tokenizer error; {EXIT_DISK_SPACE} disk full (resumable); "
    f"{EXIT_OUTPUT} output made with other arguments (tokenizer, source, shard size), locked by another run, damaged "
    f"or not writable (see --force); {EXIT_INTERNAL} internal error (a bug); {EXIT_INTERRUPTED} interrupted (resumable)."
)

ERROR = "[bold red]error:[/]"
# exception -> its exit code and how its line on stderr starts; the first entry the exception is an instance of wins
_CODES: list[tuple[type[BaseException], int, str]] = [
    (ConfigError, EXIT_USAGE, ERROR),
    (InputError, EXIT_USAGE, ERROR),
    (LoaderTimeout, EXIT_TIMEOUT, ERROR),
    (CheckFailed, EXIT_FAILED, ERROR),
    (VerifyFailed, EXIT_FAILED, ERROR),
    (KpiMissed, EXIT_KPI, ERROR),
    (Regression, EXIT_KPI, "[bold red]REGRESSED:[/]"),
    (Partial, EXIT_PARTIAL, "[bold yellow]PARTIAL:[/]"),
    (DiskSpaceError, EXIT_DISK_SPACE, ERROR),
    (OutputError, EXIT_OUTPUT, ERROR),
    (LoaderError, EXIT_LOADER, ERROR),
    (SourceError, EXIT_LOADER, ERROR),
    (TokenizerError, EXIT_LOADER, ERROR),
    (FweError, EXIT_LOADER, ERROR),
    (KeyboardInterrupt, EXIT_INTERRUPTED, ERROR),  # its line is the one word `interrupted` (fwe_command)
    (InternalError, EXIT_INTERNAL, ERROR),
]


def _entry(kind: type[BaseException]) -> tuple[int, str]:
    return next(((code, head) for cls, code, head in _CODES if issubclass(kind, cls)), (EXIT_INTERNAL, ERROR))


def _record_code(record: dict) -> int:
    """The exit code of an error record ({type, ...}) a measured run wrote: its class's, when fwe_cli.errors names it
    (the errors of a run's own process: its timeout, its crash, ... are loader failures)."""
    kind = getattr(errors, str(record.get("type")), None)
    return _entry(kind)[0] if isinstance(kind, type) and issubclass(kind, FweError) else EXIT_LOADER


def exit_code_for(exc: BaseException | None) -> int:
    """0 for None; a RunsFailed: the code its runs failed with when they all agree, else EXIT_LOADER; any other
    exception: its entry in _CODES (one fwe did not expect: EXIT_INTERNAL)."""
    if exc is None:
        return EXIT_OK
    if isinstance(exc, RunsFailed):
        codes = {_record_code(record) for record in exc.failures}
        return codes.pop() if len(codes) == 1 else EXIT_LOADER
    return _entry(type(exc))[0]


def error_line(exc: BaseException) -> str:
    """The one line on stderr (rich markup, the message escaped) for a known exception or outcome."""
    return f"{_entry(type(exc))[1]} {escape(one_line(exc))}"


def record_outcome(result: dict, failure: FweError | None) -> int:
    """Write a run's outcome into its result (the artifact and the --json object): ok, exit_code, and error (unless
    the run recorded its own already); returns the exit code."""
    from fwe_cli.artifacts import error_record

    code = exit_code_for(failure)
    result.update(ok=code == EXIT_OK, exit_code=code)
    if result.get("error") is None:
        result["error"] = None if failure is None else error_record(failure)
    return code


def internal_error_line(exc: BaseException) -> str:
    """The one line for an exception fwe did not expect: what it was, and how to see and report it."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return (f"internal error: {type(exc).__name__}" + (f": {first}" if first else "")
            + " (a bug in fwe; FWE_TRACEBACK=1 prints the traceback, please report it)")


def one_line(exc: BaseException) -> str:
    """`error: <message>` (plus the root cause when it adds something)."""
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in message:
        message += f" (caused by {type(cause).__name__}: {str(cause).splitlines()[0]})"
    return message
