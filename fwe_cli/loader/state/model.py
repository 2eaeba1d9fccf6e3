"""One reader's state: what every path saves and resumes from (the loader, DataLoader workers, Grain, torchtitan, the
HF Trainer), one type, held in its JSON form: a state in memory, pickled (torch.save) or written as JSON is the
same state, and is checked the same way (state.check).

    {"version": 5, "reader": [mod, rem], "epoch": e, "status": "fresh" | "at" | "done", "batches": n,
     "matching": {...}, "source_files": {...}, "position": {"doc", "skip", "pack"?}, "ended": [cursor, delivered,
     tokens], "held": {"from", "read", "taken"}, "plan": ..., "from": [...], "workers": w, "rows": r, "samples": b}

A reader is `fresh` (it took no batch: its stream starts at epoch `epoch`, or where `plan`/`from` deal it), `at` a
batch (the last one it took: `position`) or `done` (its stream ended: it resumes ended). `matching` holds the
settings a position only means something under and `source_files` the files it was read over (state.taking builds
both once per stream); `ended` is the document its last batch ended in and `held` the stretch of its stream a
best-fit buffer held: what a change of world deals again (state.elastic). The adapters' fields: the DataLoader or
Grain workers of its rank, rows of the next batch already handed out, whether it hands out rows (`samples`).
Adapters carry it as JSON text under "fwe" (`envelope`): torchdata compares and copies a worker's state at every
step, and one string costs it nothing to compare.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import orjson

from fwe_cli.errors import ConfigError
from fwe_cli.loader.shard import Shard

VERSION = 5
FRESH, AT, DONE = "fresh", "at", "done"
STATUSES = (FRESH, AT, DONE)
_OPTIONAL = {"matching": dict, "source_files": dict, "position": dict, "ended": list, "held": dict, "plan": dict,
             "from": list}


@dataclass(frozen=True)
class State:
    """Where one reader is (see the module docstring); its fields hold JSON values (positions as their JSON)."""

    reader: Shard
    epoch: int = 0
    status: str = FRESH
    batches: int = 0
    matching: dict | None = None
    files: dict | None = None
    position: dict | None = None
    ended: list | None = None
    held: dict | None = None
    plan: dict | None = None
    olds: list | None = None
    workers: int = 0
    rows: int = 0
    samples: bool = False

    def to_json(self) -> dict:
        """The state as JSON (nothing to convert: its fields hold JSON)."""
        return {"version": VERSION, "reader": [self.reader.mod, self.reader.rem], "epoch": self.epoch,
                "status": self.status, "batches": self.batches, "matching": self.matching,
                "source_files": self.files, "position": self.position, "ended": self.ended, "held": self.held,
                "plan": self.plan, "from": self.olds, "workers": self.workers, "rows": self.rows,
                "samples": self.samples}

    def text(self) -> str:
        return orjson.dumps(self.to_json()).decode()

    def envelope(self) -> dict[str, str]:
        """As an adapter's state dict: {"fwe": its JSON text}."""
        return {"fwe": self.text()}

    def placed(self, workers: int = 0, rows: int = 0, samples: bool = False) -> "State":
        """This loader's state as an adapter saves it: with its rank's workers, rows handed out, mode."""
        return State(self.reader, self.epoch, self.status, self.batches, self.matching, self.files, self.position,
                     self.ended, self.held, self.plan, self.olds, workers, rows, samples)

    @classmethod
    def from_json(cls, data: Any) -> "State":
        """The state `to_json` wrote; ConfigError, in one line naming what does not fit, for anything else (a state of
        an older fwe names its version)."""
        version = data.get("version") if isinstance(data, dict) else None
        if version != VERSION:
            if isinstance(version, int) and 0 < version < VERSION:
                raise ConfigError(f"the resume state is of version {version}, saved by an older fwe; this fwe reads "
                                  f"version {VERSION} (one state for every reader and adapter): start without it, "
                                  "or resume with the fwe that saved it")
            raise ConfigError(f"not a fwe loader resume state of version {VERSION} (version {version!r})")
        reader = data.get("reader")
        if not (isinstance(reader, list) and len(reader) == 2 and all(_count(v) for v in reader)):
            raise ConfigError(f"resume state's reader must be [mod, rem], got {_short(reader)}")
        for name in ("epoch", "batches", "workers", "rows"):
            if not _count(data.get(name)):
                raise ConfigError(f"resume state's {name} must be a whole number >= 0, got {_short(data.get(name))}")
        if data.get("status") not in STATUSES:
            raise ConfigError(f"resume state's status must be one of {', '.join(STATUSES)}, got "
                              f"{_short(data.get('status'))}")
        for name, kind in _OPTIONAL.items():
            if data.get(name) is not None and not isinstance(data[name], kind):
                raise ConfigError(f"resume state's {name} must be {kind.__name__} or null, got {_short(data[name])}")
        if not isinstance(data.get("samples"), bool):
            raise ConfigError(f"resume state's samples must be true or false, got {_short(data.get('samples'))}")
        if data["status"] != FRESH and data.get("matching") is None:
            raise ConfigError("resume state records no settings (`matching`): give a state `state_dict()` saved")
        try:
            shard = Shard(*reader)
        except ConfigError as exc:
            raise ConfigError(f"resume state's reader does not fit ({exc})") from None
        return cls(shard, data["epoch"], data["status"], data["batches"], data.get("matching"),
                   data.get("source_files"), data.get("position"), data.get("ended"), data.get("held"),
                   data.get("plan"), data.get("from"), data["workers"], data["rows"], data["samples"])

    @classmethod
    def from_envelope(cls, state: Any, what: str) -> "State":
        """The State of an adapter's state dict ({"fwe": text}); ConfigError naming `what` was expected."""
        text = state.get("fwe") if isinstance(state, dict) else None
        try:
            data = orjson.loads(text) if isinstance(text, str) else None
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            raise ConfigError(f"not a {what} state (no fwe reader state under 'fwe'): give what its state_dict() "
                              "returned")
        return cls.from_json(data)

    def check_place(self, reader: Shard, workers: int, samples: bool, where: Callable[[Shard, int], str]) -> None:
        """ConfigError, naming both, unless it was saved by the same reader with as many workers, in the same mode."""
        if (self.reader, self.workers) != (reader, workers):
            raise ConfigError(f"the state was saved by {where(self.reader, self.workers)}, this is "
                              f"{where(reader, workers)}: resume with the world size and workers it was saved with, "
                              "deal every reader's state of that world anew (load_world), or start without the state")
        if self.samples != samples:
            raise ConfigError(f"the state was saved with samples={self.samples}, this has samples={samples}: resume "
                              "in the same mode")


def found_states(states: Any) -> list[State]:
    """Every adapter State found in `states` (adapters' state dicts, or torchdata's StatefulDataLoader state dicts
    that hold them for each worker, in a list of ranks): what a new world is dealt from."""
    found: list[State] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("fwe"), str):
                found.append(State.from_envelope(value, "fwe reader"))
                return
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(states)
    return found


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
