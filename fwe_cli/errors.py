"""The exceptions fwe raises on purpose.

Each maps to one exit code in one place (`_CODES` / `exit_code_for` in fwe_cli/cli/exit_codes.py); anything else is a
bug and keeps its traceback.
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


def os_error_line(operation: str, path: str, exc: OSError) -> str:
    """One line for an OSError: what was being done, to which path, and why, in the OS's words
    ('cannot write /data/out/manifest.json: permission denied (errno EACCES)')."""
    import errno

    reason = (exc.strerror or str(exc) or type(exc).__name__).rstrip(".").lower()
    code = errno.errorcode.get(exc.errno or 0)
    return f"cannot {operation} {path}: {reason}" + (f" (errno {code})" if code else "")
