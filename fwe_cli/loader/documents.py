"""The one record type that flows between pipeline stages."""

from __future__ import annotations

from typing import Any, Callable


class PlaceName(str):
    """A document's name that fwe made from where it is (`file:line`, `file:rowN`, `dataset#N`) because its record has
    no string `id` of its own: it names a place in a listing, not the document, and changes with the path or the
    file order (a held-out split keys such a document by its text instead: compose.holdout)."""

    __slots__ = ()


class Document:
    """A text document plus where it came from (for error messages and manifests).

    Its text may be given as a function that makes it: a source whose documents cost work to produce (the synthetic
    one generates each) hands them over unmade, and only the documents a shard keeps are ever made."""

    __slots__ = ("_text", "id", "resume", "ids", "segment", "delivered")

    def __init__(self, text: str | Callable[[], str], id: str, resume: Any = None, ids: Any = None):
        self._text = text
        self.id = id
        """Identifier: the record's own id, or a PlaceName (`file:line`, ...) for a record without one."""
        self.resume = resume
        """Where a stream opened anew yields this document first: its source's cursor (sources.order.Cursor, or a
        composite's), set as the reader's stream yields it."""
        self.ids = ids
        """The document's token ids (a numpy view into a token shard, without end-of-text) when it was read already
        tokenized; the pipeline then uses them instead of the tokenizer. None for text."""
        self.delivered = 0
        """Tokens of it a reader of another world delivered before the world changed (sources.deal): the pipeline
        leaves them out."""
        self.segment = None
        """Which segment of its source's stream it belongs to, for a source whose stream has several (a composite's
        parts); None for one. A document batch never spans two segments, and each batch names its segment to the
        source (Source.on_batch)."""

    @property
    def text(self) -> str:
        """The document body; the only field the tokenizer sees ("" for a document read from token shards)."""
        if callable(self._text):
            self._text = self._text()
        return self._text

    def __repr__(self) -> str:
        return f"Document(id={self.id!r}, resume={self.resume!r})"
