"""The one record type that flows between pipeline stages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Document:
    """A text document plus where it came from (for error messages and manifests)."""

    text: str
    """The document body; the only field the tokenizer sees."""
    id: str
    """Stable identifier: the record's own id, or `file:line` for local files without one."""
    resume: dict | None = None
    """Where a stream opened anew yields this document first (set by DocumentStream: epoch, stream index, source
    position; see fwe_cli.loader.sources.order)."""
