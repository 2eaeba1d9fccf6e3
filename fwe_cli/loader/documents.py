"""The one record type that flows between pipeline stages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Document:
    """A text document plus where it came from (for error messages and manifests)."""

    text: str
    """The document body; the only field the tokenizer sees ("" for a document read from token shards)."""
    id: str
    """Stable identifier: the record's own id, or `file:line` for local files without one."""
    resume: dict | None = None
    """Where a stream opened anew yields this document first (set by DocumentStream: epoch, stream index, source
    position; see fwe_cli.loader.sources.order)."""
    ids: Any = None
    """The document's token ids (a numpy view into a token shard, without end-of-text) when it was read already
    tokenized; the pipeline then uses them instead of the tokenizer. None for text."""
