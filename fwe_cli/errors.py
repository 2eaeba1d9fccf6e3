"""The exceptions fwe raises on purpose.

Each maps to one exit code in one place (`_CODES` / `exit_code_for` in fwe_cli/cli/exit_codes.py); anything else is a
bug and keeps its traceback. Besides the failures, a command's outcome is an exception too when it ends the command
with a non-zero code (checks failed, runs failed, a target missed, a regression, a partial sweep): the command
records it in its result and raises it, and the one table gives its exit code. Their class names are the `error.type`
of the result and of the --json object.
"""


class EndOfData(Exception):
    """The loader has no batch left: its last epoch ended. Not an error (plain iteration just stops on it)."""


class FweError(Exception):
    """Base class: an error fwe knows how to explain in one line."""


class ConfigError(FweError, ValueError):
    """A setting has a bad value (flag, environment variable or config field). Exit code: usage."""


class SettingError(ConfigError):
    """A bad choice or combination of config settings, whose message names each setting through a function:
    `describe(name)` with `name(field)` giving how to call it. Raised, it names the fields; `resolve_config`
    re-raises it naming what the user typed (the flag, or the NSA_FWE_* variable) via `naming`."""

    def __init__(self, describe):
        self.describe = describe
        super().__init__(describe(lambda field: field))

    def naming(self, name) -> ConfigError:
        return ConfigError(self.describe(name))


class SourceError(FweError):
    """A document source could not be opened or read (missing file, bad record in strict mode, Hub error)."""


class TokenizerError(FweError):
    """The tokenizer could not be loaded (missing file, unreachable Hub, no end-of-document token)."""


class LoaderError(FweError):
    """The loader failed while producing batches; the producer's exception is chained as __cause__."""


class LoaderTimeout(LoaderError):
    """No batch arrived within the allowed time. `stage` names the step the producer was stuck in."""

    def __init__(self, message: str, stage: str = "unknown"):
        super().__init__(message)
        self.stage = stage


class HardTimeout(LoaderTimeout):
    """No result at all in time: a last-resort watchdog ended a run the loader's own deadline could not (e.g. a
    read blocked in the main thread). Exit code: timeout."""


class OutputError(FweError):
    """An output cannot be written, or is in a state fwe will not touch without being told (e.g. a bootstrap
    made with different arguments, or one whose listed files are damaged)."""


class DiskSpaceError(OutputError):
    """Not enough free disk space: found before starting (preflight) or hit while writing (ENOSPC)."""


class InputError(FweError):
    """An input is not what it must be: a bootstrap part whose size or sha256 differs from its manifest, a path that
    is not a regular file (a FIFO, a device, a directory where a file is expected), a compressed file that ends
    early. Exit code: usage (2), as for a bad flag: the input given is wrong, fwe is not."""


class InternalError(Exception):
    """The record of a bug: an exception fwe did not expect, as a run's error object names it (built, not raised).
    Exit code: internal (70)."""


# -- outcomes: a command ran, and this is why it still ends with a non-zero code -------------------------------------

class CheckFailed(FweError):
    """`fwe smoke` pulled its batches, but a check of them failed (or no batch came). Exit code: failed (1)."""

    def __init__(self, failed: list[str]):
        super().__init__(f"checks failed: {', '.join(failed) or 'no batch'}")


class VerifyFailed(FweError):
    """`--verify` found damage in a bootstrap or a token output. Exit code: failed (1)."""


class RunsFailed(FweError):
    """Measured runs (fresh processes) failed; `failures` holds their error records ({type, message, stage}). Exit
    code: the one their errors map to when they all agree (2 when every run found a bad input, 3 when every run
    timed out, ...), else loader (4)."""

    def __init__(self, message: str, failures: list[dict]):
        super().__init__(message)
        self.failures = failures


class RunFailed(RunsFailed):
    """`fwe measure`: some of its runs failed."""


class TrialFailed(RunsFailed):
    """`fwe tune`: some of its trials failed, or none succeeded."""


class KpiMissed(FweError):
    """`fwe measure --fail-on-kpi`: a target was missed. Exit code: 5."""


class Regression(FweError):
    """`--baseline`: a metric is worse than the baseline's by more than --max-regression. Exit code: 5."""


class Partial(FweError):
    """`fwe tune`: --budget-s ran out before every trial ran; the result covers what was measured. Exit code: 6."""


def os_error_line(operation: str, path: str, exc: OSError) -> str:
    """One line for an OSError: what was being done, to which path, and why, in the OS's words
    ('cannot write /data/out/manifest.json: permission denied (errno EACCES)')."""
    import errno

    reason = (exc.strerror or str(exc) or type(exc).__name__).rstrip(".").lower()
    code = errno.errorcode.get(exc.errno or 0)
    return f"cannot {operation} {path}: {reason}" + (f" (errno {code})" if code else "")


class FweNotice(UserWarning):
    """Not a problem, but worth one line to the user (the `fwe` command prints it as `note:`): e.g. a bootstrap read
    from the token shards made from it."""
