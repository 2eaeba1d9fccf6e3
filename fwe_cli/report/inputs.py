"""What `fwe report` reads, recognised by content, not by file name: a `fwe measure` or `fwe tune` summary, a
`fwe smoke` artifact, heartbeat JSON lines (one file), or a directory: a training job's heartbeat_rank*.jsonl files
(any number of ranks), else the summary.json it holds (a measure or tune artifact folder).

Every problem with an input is one InputError line naming the path as given (exit 2)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import orjson

from fwe_cli.errors import InputError, os_error_line

HEARTBEAT_FILES = re.compile(r"heartbeat_rank(\d+)\.jsonl$")
KNOWN = ("a fwe measure or tune summary.json, a fwe smoke artifact, heartbeat JSON lines, or a directory of "
         "heartbeat_rank*.jsonl files")
TUNE_KEYS = frozenset({"settings", "recommendation", "objective", "plan"})


@dataclass(frozen=True)
class HeartbeatFile:
    """One heartbeat JSONL file: its lines (JSON objects with a `msg`), in file order."""

    path: str
    lines: tuple[dict, ...]
    skipped: int
    """Lines that were not a heartbeat object (a job killed mid-write leaves half a line behind)."""


@dataclass(frozen=True)
class Input:
    """One input, read and recognised."""

    path: str
    """As the user gave it."""
    kind: str
    """measure | tune | smoke | heartbeats"""
    record: dict | None
    """The artifact (None for heartbeats)."""
    heartbeats: tuple[HeartbeatFile | None, ...]
    """heartbeats: the files given; measure: each run's file, in run order (None where it cannot be found)."""
    warnings: tuple[str, ...] = ()


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise InputError(os_error_line("read", path, exc)) from None


def parse_heartbeat(path: str, raw: bytes) -> HeartbeatFile:
    """The heartbeat objects of a JSONL file; lines that are not one are counted, not fatal."""
    lines, skipped = [], 0
    for text in raw.splitlines():
        if not text.strip():
            continue
        try:
            line = orjson.loads(text)
        except orjson.JSONDecodeError:
            line = None
        if isinstance(line, dict) and isinstance(line.get("msg"), str):
            lines.append(line)
        else:
            skipped += 1
    return HeartbeatFile(path, tuple(lines), skipped)


def _heartbeat_files(directory: str) -> list[str]:
    names = [name for name in os.listdir(directory) if HEARTBEAT_FILES.match(name)]
    names.sort(key=lambda name: int(HEARTBEAT_FILES.match(name).group(1)))  # type: ignore[union-attr]
    return [os.path.join(directory, name) for name in names]


def _skip_warning(beat: HeartbeatFile) -> tuple[str, ...]:
    return (f"{beat.path}: {beat.skipped} line(s) that are not heartbeat JSON skipped",) if beat.skipped else ()


def _heartbeats(given: str, paths: list[str]) -> Input:
    beats = [parse_heartbeat(path, _read(path)) for path in paths]
    if not any(beat.lines for beat in beats):
        if os.path.isdir(os.path.expanduser(given)):
            raise InputError(f"{given}: its heartbeat files hold no heartbeat line (a JSON object with a \"msg\"): "
                             f"{', '.join(os.path.basename(path) for path in paths)}")
        raise InputError(f"{given} is neither a JSON artifact nor heartbeat JSON lines: give {KNOWN}")
    warnings = tuple(w for beat in beats for w in _skip_warning(beat))
    return Input(given, "heartbeats", None, tuple(beats), warnings)


def run_heartbeat_path(summary_path: str, run: dict) -> str | None:
    """Where a measure run's heartbeat file is: as recorded (relative to where `fwe measure` ran), else beside the
    summary in the run's folder (an artifact folder copied elsewhere, e.g. downloaded from CI)."""
    recorded = run.get("heartbeat")
    if not isinstance(recorded, str) or not recorded:
        return None
    run_dir = run.get("run_dir") if isinstance(run.get("run_dir"), str) else os.path.dirname(recorded)
    beside = os.path.join(os.path.dirname(summary_path), os.path.basename(run_dir), os.path.basename(recorded))
    return next((path for path in (recorded, beside) if os.path.isfile(path)), None)


def _measure(given: str, path: str, record: dict) -> Input:
    beats: list[HeartbeatFile | None] = []
    warnings: list[str] = []
    for run in record.get("runs") or []:
        found = run_heartbeat_path(path, run) if isinstance(run, dict) else None
        beat = parse_heartbeat(found, _read(found)) if found else None
        if beat is None and isinstance(run, dict) and run.get("heartbeat") and not run.get("error"):
            warnings.append(f"{given}: heartbeat {run['heartbeat']} not found: no timeline for that run")
        warnings.extend(_skip_warning(beat) if beat else ())
        beats.append(beat)
    return Input(given, "measure", record, tuple(beats), tuple(warnings))


def artifact_input(given: str, path: str, record: dict) -> Input:
    """A JSON object read from `path`, recognised as one of fwe's artifacts."""
    from fwe_cli.measure.regression import artifact_kind

    kind = "tune" if TUNE_KEYS <= record.keys() else artifact_kind(record)
    if kind == "measure":
        return _measure(given, path, record)
    if kind in ("tune", "smoke"):
        return Input(given, kind, record, ())
    if {"command", "error"} <= record.keys():
        raise InputError(f"{given} is the error object of a fwe {record.get('command')} run that ended before its "
                         f"result (exit {record.get('exit_code')}): it holds no figures to report")
    raise InputError(f"{given} is not an artifact fwe report knows: give {KNOWN}")


def read_input(given: str) -> Input:
    """One input path, read and recognised; InputError naming it when it is missing, empty or unknown."""
    path = os.path.expanduser(given)
    if os.path.isdir(path):
        beats = _heartbeat_files(path)
        if beats:
            return _heartbeats(given, beats)
        summary = os.path.join(path, "summary.json")
        if os.path.isfile(summary):
            return read_input(summary)
        raise InputError(f"{given} holds no heartbeat_rank*.jsonl file and no summary.json: give {KNOWN}")
    raw = _read(path)
    if not raw.strip():
        raise InputError(f"{given} is empty: give {KNOWN}")
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _heartbeats(given, [path])  # several JSON objects: JSON lines (or nothing fwe knows: said there)
    if isinstance(record, dict) and isinstance(record.get("msg"), str):
        return _heartbeats(given, [path])  # a heartbeat file of one line
    if not isinstance(record, dict):
        raise InputError(f"{given} holds a JSON {type(record).__name__}, not {KNOWN}")
    return artifact_input(given, path, record)


def read_inputs(paths: list[str]) -> list[Input]:
    """Every input, in the order given (the first bad one raises)."""
    if not paths:
        raise InputError(f"no input given: give {KNOWN}")
    return [read_input(path) for path in paths]
