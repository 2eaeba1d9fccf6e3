"""One invocation of `fwe`: its outcome (`Run`) and, in the `fwe` process, its early start (`EarlyStart`).

The group makes an `Invocation` per run (the `fwe` process's main() makes its own, with the early start on) and keeps
it as click's context object, where the group's hooks find it (`current`) and whence fwe_cli.cli.options.fwe_command
hands a command its `run` or `invocation`; a thread of the run (smoke's watchdog) is handed its `Run`. Nothing here lives beyond the run: two runs in one process share no state.

--json's rule, kept by `Run`: exactly one object on stdout per run. A command's `print_json` holds its result until
the run ends; `finish` (the group as the run exits, the `fwe` process's main, a command ending the process, smoke's
watchdog) decides the outcome once, from any thread, and prints the held result with `exit_code`, or, when the run
ended before a result (usage error, exception, interrupt), an error object {ok: false, exit_code, error: {type,
message, stage?}, command}."""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from typing import NoReturn

import orjson
import typer


def write_json(obj) -> None:
    """One JSON object on stdout, now."""
    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
    sys.stdout.flush()


class Exit(Exception):
    """How the error object names a run that ended with a non-zero code and no error noted."""


class Run:
    """A run's outcome: whether it prints one JSON object (and for which command), the result held until it ends, the
    first error noted, and the exit code it ended with (`code`, decided once by `finish`)."""

    def __init__(self, own_process: bool = False):
        self.own_process = own_process
        """The `fwe` process itself runs this (its main() made the run): ending the run may end the process without
        interpreter shutdown (`end`). False for a command run inside another program (CliRunner)."""
        self.code: int | None = None
        """The exit code the run ended with; None until `finish`."""
        self._lock = threading.Lock()
        self._json = False
        self._command: str | None = None
        self._result: dict | None = None
        self._error: dict | None = None

    def ask_json(self, wants: bool, command: str | None) -> None:
        """Whether this run prints its one JSON object (--json as the command's flags were parsed), and which command
        it is (named in an error object)."""
        with self._lock:
            self._json, self._command = wants, command

    def note_error(self, exc: BaseException, message: str | None = None) -> None:
        """Why the run is ending, for the error object (the first reason noted stands); `message` in place of the
        exception's own text (click's usage errors word theirs in format_message)."""
        from fwe_cli.artifacts import error_record

        record = error_record(exc) if message is None else dict(error_record(exc), message=message)
        with self._lock:
            if self._error is None:
                self._error = record

    def print_json(self, obj) -> None:
        """The command's result object: held until the run ends when --json guards stdout (dropped once it has
        ended), else printed now."""
        with self._lock:
            if self._json:
                if self.code is None:
                    self._result = obj
                return
        write_json(obj)

    def finish(self, code: int, result: dict | None = None) -> bool:
        """End the run with `code`: with --json, print its one object (`result` or the held one, else an error
        object). Only the first call ends it; a later one (another way out, another thread) prints nothing and
        returns False, and `code` stays the first's."""
        with self._lock:
            if self.code is not None:
                return False
            self.code = code
            if self._json:
                write_json(self._object(code, result))
            return True

    def _object(self, code: int, result: dict | None) -> dict:
        error = self._error if code else None
        if code and error is None:
            from fwe_cli.artifacts import error_record

            error = error_record(KeyboardInterrupt("interrupted") if code == 130 else Exit(f"exit code {code}"))
        held = result if result is not None else self._result
        if held is None:
            return {"ok": code == 0, "exit_code": code, "error": error, "command": self._command}
        obj = dict(held, exit_code=code)
        obj.setdefault("ok", code == 0)
        if obj.get("error") is None:
            obj["error"] = error
        return obj

    def end(self, code: int) -> NoReturn:
        """End the run (`finish(code)`; the code it ended with, when another way out came first) once the caller has
        written its artifact and output, and leave.

        In the `fwe` process (`own_process`) the process ends here, through os._exit after stdout and stderr are
        flushed: interpreter shutdown would wait for background work the run no longer needs (a tokenizer encode, a
        Hub read, read-ahead), and a thread stuck in a native read cannot be joined at all (shutdown waits on it and
        can abort once the read wakes, long after the timeout). A run inside another program (CliRunner) never ends
        its host: it leaves through typer.Exit with the code, and a thread it could not join is a daemon the host's
        exit does not wait for (FineWebLoader.close), as for any library user of the loader."""
        self.finish(code)
        if self.own_process:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(self.code)
        raise typer.Exit(self.code)


@dataclass
class EarlyStart:
    """The `fwe` process's early start (fwe_cli.cli.app.FweApp): a command whose module has `start_early(words,
    early)` is handed its words as typed before typer checks them, and notes here what it started, for its run.
    Made by main() only: a command run inside another program (CliRunner) never starts early."""

    requests_from: int | None = None
    """The Hub requests this process had made when the command's early start began (its run counts those after);
    None when nothing was started."""


@dataclass
class Invocation:
    """One run of `fwe`: its outcome, and its early start when the `fwe` process has one on (None otherwise). The group
    keeps it as click's context object."""

    run: Run = field(default_factory=Run)
    early: EarlyStart | None = None


def current(ctx: typer.Context) -> Invocation:
    """The invocation a command's context belongs to; a fresh one for a context made outside a run of the group."""
    found = ctx.find_object(Invocation)
    return found if found is not None else Invocation()
