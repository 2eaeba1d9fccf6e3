"""The one place where known exceptions become one-line messages and exit codes."""

from __future__ import annotations

from fwe_cli.errors import (
    ConfigError,
    DiskSpaceError,
    FweError,
    InputError,
    LoaderError,
    LoaderTimeout,
    OutputError,
    SourceError,
    TokenizerError,
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
MEASURE_EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} measured (targets missed without --fail-on-kpi are reported, not fatal); "
    f"{EXIT_USAGE} bad usage; {EXIT_LOADER} a run failed or timed out; {EXIT_KPI} a target was missed with --fail-on-kpi, "
    f"or a metric regressed beyond --max-regression against --baseline; "
    f"{EXIT_DISK_SPACE} disk full; {EXIT_OUTPUT} an output cannot be written; {EXIT_INTERNAL} internal error (a bug); "
    f"{EXIT_INTERRUPTED} interrupted."
)
TUNE_EXIT_CODES_HELP = (
    f"Exit codes: {EXIT_OK} every trial ran, recommendation and fwe.env written; {EXIT_USAGE} bad usage; "
    f"{EXIT_LOADER} a trial failed (the others are still ranked) or none succeeded; {EXIT_PARTIAL} partial: "
    "--budget-s ran out before every trial ran (fwe.env is written from what was measured and marked partial); "
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

_CODES: list[tuple[type[BaseException], int]] = [
    (ConfigError, EXIT_USAGE),
    (InputError, EXIT_USAGE),
    (LoaderTimeout, EXIT_TIMEOUT),
    (DiskSpaceError, EXIT_DISK_SPACE),
    (OutputError, EXIT_OUTPUT),
    (LoaderError, EXIT_LOADER),
    (SourceError, EXIT_LOADER),
    (TokenizerError, EXIT_LOADER),
    (FweError, EXIT_LOADER),
]


def exit_code_for(exc: BaseException | None) -> int:
    if exc is None:
        return EXIT_OK
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return EXIT_FAILED


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
