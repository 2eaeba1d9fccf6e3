"""The one record type that flows between pipeline stages."""

from __future__ import annotations

from typing import Any, Callable


class PlaceName(str):
    """A document's name that fwe made from where it is (`file:line`, `file:rowN`, `dataset#N`) because its record has
    no string `id` of its own: it names a place in a listing, not the document, and changes with the path or the
    file order (a held-out split keys such a document by its text instead: sources.holdout)."""

    __slots__ = ()


class Document:
    """A text document plus where it came from (for error messages and manifests).

    Its text may be given as a function that makes it: a source whose documents cost work to produce (the synthetic
    one generates each) hands them over unmade, and only the documents a shard keeps are ever made."""

    __slots__ = ("_text", "id", "resume", "ids", "segment", "delivered", "child")

    def __init__(self, text: str | Callable[[], str], id: str, resume: dict | None = None, ids: Any = None):
        self._text = text
        self.id = id
        """Identifier: the record's own id, or a PlaceName (`file:line`, ...) for a record without one."""
        self.resume = resume
        """Where a stream opened anew yields this document first (set by DocumentStream: epoch, stream index, source
        position; see fwe_cli.loader.sources.order)."""
        self.ids = ids
        """The document's token ids (a numpy view into a token shard, without end-of-text) when it was read already
        tokenized; the pipeline then uses them instead of the tokenizer. None for text."""
        self.delivered = 0
        """Tokens of it a rank of another world delivered before the world changed (loader.elastic): the pipeline
        leaves them out."""
        self.child = None
        """For a document a source took from one of the children it orders itself (a mixture): (the child's number,
        its cursor in that child's stream); what a change of world size resumes each child from."""
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
