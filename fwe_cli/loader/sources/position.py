"""Where a source is in its stream: one typed, versioned value per source kind, with one JSON codec for all of them.

Each source defines its position as a frozen dataclass subclassing `Position` with a registered `name` (and a
`version` that changes when its fields do); a composite's position holds its children's positions as fields. A
position is the place just after a document: a source opened at it yields the next document first.

    @dataclass(frozen=True, slots=True)
    class RowPosition(Position, name="rows"):
        row: int

    RowPosition(7).to_json()                   # {"type": "rows", "v": 1, "row": 7}
    Position.from_json({"type": "rows", "v": 1, "row": 7})

Fields hold ints, strings, None, positions, or tuples of them: JSON as it is, a nested position as its own object.
A resume state is checked on the way in: an unknown type or version, a missing or extra field, a value of the wrong
kind is a ConfigError naming it, before any source is opened.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from fwe_cli.errors import ConfigError

_TYPES: dict[tuple[str, int], type["Position"]] = {}


class Position:
    """Base of every source's position type (subclasses are frozen dataclasses)."""

    __slots__ = ()
    name: ClassVar[str]
    version: ClassVar[int]

    def __init_subclass__(cls, name: str | None = None, version: int = 1, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if name is not None:
            cls.name, cls.version = name, version
        if "name" in cls.__dict__:  # also the copy `dataclass(slots=True)` makes of the class, which replaces it
            _TYPES[(cls.name, cls.version)] = cls

    def to_json(self) -> dict:
        """This position as JSON: its type, its version and its fields (lists for tuples: JSON as it is held)."""
        out = {"type": self.name, "v": self.version}
        for name in _names(type(self)):
            value = getattr(self, name)
            out[name] = value.to_json() if isinstance(value, Position) else \
                _encode(value) if isinstance(value, tuple) else value
        return out

    @staticmethod
    def from_json(data: Any) -> "Position":
        """The position `data` (a `to_json()` value) describes; ConfigError naming what does not fit."""
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ConfigError(f"a saved position must be an object with a 'type', got {_short(data)}")
        cls = _TYPES.get((data["type"], data.get("v")))
        if cls is None:
            raise ConfigError(f"a saved position of type {data['type']!r} version {data.get('v')!r} is not one this "
                              "fwe reads: resume with the fwe that saved it, or start without the state")
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        extra = sorted(set(data) - set(names) - {"type", "v"})
        missing = [name for name in names if name not in data]
        if extra or missing:
            raise ConfigError(f"a saved {cls.name} position has fields {sorted(set(data) - {'type', 'v'})}, expected "
                              f"{names}")
        try:
            position = cls(**{name: _decode(data[name]) for name in names})
            position.check()
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"a saved {cls.name} position does not fit ({exc})") from None
        return position

    def check(self) -> None:
        """ValueError unless every field is a whole number >= 0, a string, None or a position (checked in turn); a
        type with other rules overrides it. Run on positions read back, not on each one a source makes."""
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, field.name)
            if isinstance(value, Position):
                value.check()
            elif isinstance(value, bool) or (isinstance(value, int) and value < 0) or not (
                    value is None or isinstance(value, (int, str, tuple))):
                raise ValueError(f"{field.name} must be a whole number >= 0, got {value!r}")


_FIELDS: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    """A position type's field names, in order (looked up once per type: a state encodes a position at every step)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    return names


def _encode(value: Any) -> Any:
    if isinstance(value, Position):
        return value.to_json()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        return Position.from_json(value)
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    if value is None or isinstance(value, (str, int)) and not isinstance(value, bool):
        return value
    raise ValueError(f"unexpected value {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def encode(position: Position | None) -> dict | None:
    """A position's JSON, or None for none."""
    return None if position is None else position.to_json()


def decode(data: Any) -> Position | None:
    """`Position.from_json`, with None for none."""
    return None if data is None else Position.from_json(data)
