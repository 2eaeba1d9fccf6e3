"""Malformed records met while reading a source: counted in one place, and named (the first few) for the report."""

from __future__ import annotations

from dataclasses import dataclass, field

from fwe_cli.errors import SourceError

MAX_REPORTED_BAD = 20


@dataclass
class BadRecords:
    """Malformed records met so far: a count and the first few `file:line: reason` strings."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, where: str, reason: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_REPORTED_BAD:
            self.examples.append(f"{where}: {reason}")

    def reject(self, where: str, reason: str, strict: bool) -> None:
        """A malformed record at `where`: counted (skip mode), or with `strict` a SourceError naming it."""
        if strict:
            raise SourceError(f"{where}: {reason} (use --bad-records skip to count and skip it)")
        self.add(where, reason)

    def to_dict(self) -> dict:
        return {"count": self.count, "examples": list(self.examples)}


def bad_text_reason(text: object) -> str:
    """Why a record's `text` value, present but not a string, is unusable (parquet and Hub rows)."""
    return "'text' is null" if text is None else f"'text' is {type(text).__name__}, not a string"
