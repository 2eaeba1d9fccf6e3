"""A held-out split: a composite that keeps one side of its child's documents, the side chosen per document by a
stable hash, so that an evaluation set never leaks into training.

    SourceSpec.of("holdout", child, holdout=0.1, holdout_split="holdout")   # --holdout 0.1 --holdout-split holdout
    held_out(child, 0.1, "holdout")                                          # the same (sources.spec)

Which side a document is on depends on the document alone (`held_out_key`, `is_held_out`): the first 8 bytes of the
blake2b digest of its key, read as a fraction of 2**64, below `holdout` puts it in the held-out set. Its key is the
record's own string `id`; a record without one (a TXT line, a JSONL or parquet row with no string id: fwe names those
by their place, a `PlaceName`) is keyed by its text. So the two sides are disjoint, together they are the whole
stream, and they are the same on every machine for any file order, shard, shuffle, world size, mixture or resume; a
smaller fraction's held-out set lies inside a larger one's. A token directory keeps neither ids nor text: it is
refused (split the text before tokenizing it).

The split filters the child's stream as each reader reads it (any child: a source of units, a mixture): each reader
gets the side of its own share, and the cursor of a kept document is the child's. `describe()` counts the documents it
kept and removed so far (of this reader's share).
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b
from typing import Hashable, Iterator

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.documents import Document, PlaceName
from fwe_cli.loader.shard import Shard
from fwe_cli.loader.sources.base import Emit, Source
from fwe_cli.loader.sources.records import Records
from fwe_cli.loader.sources.spec import SIDES

_SPAN = 2**64


def held_out_key(text_or_id: str) -> bytes:
    """The bytes a document's side is decided by (its id, or its text where it has no id)."""
    return text_or_id.encode("utf-8", "surrogatepass")


def document_key(doc: Document) -> bytes:
    """A loader document's key: its own id, or its text when its id is a PlaceName (no id of its own)."""
    return held_out_key(doc.text if isinstance(doc.id, PlaceName) else doc.id)


def record_key(record: dict) -> bytes:
    """A whole record's key (fwe bootstrap): its `id` when a string, else its text (what `document_key` finds for the
    document read from it)."""
    rid = record.get("id")
    return held_out_key(rid if isinstance(rid, str) else record["text"])


def is_held_out(key: bytes, holdout: float) -> bool:
    """Whether the document of `key` is in the held-out `holdout` fraction."""
    return int.from_bytes(blake2b(key, digest_size=8).digest(), "big") < holdout * _SPAN


@dataclass(frozen=True)
class HoldoutOptions:
    holdout: float | None = None
    """The fraction of documents held out, 0 <= holdout < 1 (--holdout, NSA_FWE_HOLDOUT: text is read as a number)."""
    holdout_split: str = "train"
    """Which side is read: 'train' (the documents not held out) or 'holdout' (the held-out ones) (--holdout-split)."""

    def __post_init__(self) -> None:
        typed = self.holdout
        value = _number(typed)
        if value is None or not 0 <= value < 1:
            raise SettingError(lambda n: f"{n('holdout')} must be a fraction from 0 up to (not including) 1: the "
                                         f"share of documents held out, got {typed!r}")
        object.__setattr__(self, "holdout", value)
        if self.holdout_split not in SIDES:
            raise SettingError(lambda n: f"{n('holdout_split')} must be train or holdout (the side of {n('holdout')} "
                                         f"to read), got {self.holdout_split!r}")


def _number(value) -> float | None:
    """A number, or the text of one, as a float; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        return None


class Holdout(Source):
    """One side of its child's documents (see the module docstring)."""

    Options = HoldoutOptions
    children_allowed = (1, 1)

    @classmethod
    def location(cls, spec) -> str:
        o = spec.options
        side = "held-out" if o.holdout_split == "holdout" else "training"
        return f"the {side} side of {spec.children[0].location()} (--holdout {o.holdout:g})"

    def __init__(self, spec, options):
        super().__init__(spec, options)
        self.child = self.children[0]
        self.kept = 0
        """Documents (or records) of the side read, so far."""
        self.removed = 0
        """Documents (or records) of the other side passed over, so far."""
        self._holdout = spec.options.holdout
        self._side = spec.options.holdout_split == SIDES[1]

    def keeps(self, key: bytes) -> bool:
        """Whether the document of `key` is on the side read (counted)."""
        kept = is_held_out(key, self._holdout) == self._side
        if kept:
            self.kept += 1
        else:
            self.removed += 1
        return kept

    def open(self, set_stage) -> None:
        super().open(set_stage)
        if self.child.reads_tokens:
            where = self.child.location(self.child.spec)
            raise ConfigError(f"--holdout splits documents by their id or text, and {where} is token ids without "
                              "either: split the text when tokenizing it (fwe tokenize --holdout)")

    # -- a filter over the child's stream: the child's cursors, frontiers and plans are its own -----------------
    def stream(self, order, start, plan) -> Iterator[Document]:
        for doc in self.child.stream(order, start, plan):
            if self.keeps(document_key(doc)):
                yield doc

    def frontier(self, resume, delivered: int, tokens: int):
        return self.child.frontier(resume, delivered, tokens)

    def plan_for(self, olds, order):
        return self.child.plan_for(olds, order)

    def check_resume(self, resume) -> None:
        self.child.check_resume(resume)

    def token_chunks(self, order, start, sizes):
        return None  # (a token directory is refused as it opens)

    # -- what the child knows ----------------------------------------------------------------------------------------
    def default_tokenizer(self) -> str:
        return self.child.default_tokenizer()

    def latest_revision(self) -> str | None:
        return self.child.latest_revision()

    def on_batch(self, segment: Hashable, step: int, fetch_s: float, emit: Emit) -> dict:
        return self.child.on_batch(segment, step, fetch_s, emit)

    def figures(self) -> dict | None:
        return self.child.figures()

    def describe(self) -> dict:
        return dict(super().describe(), documents_kept=self.kept, documents_removed=self.removed)

    def records(self, shard, start=None, all_fields=False, bad=None) -> Records:
        return HoldoutRecords(self, shard, start, all_fields, bad)


class HoldoutRecords(Records):
    """The side's records of the shard: the child's records of every shard, split, then sharded by the side's own
    index (as the loader shards the side's documents). Its `source` is the child, whose files it reads. Position
    {"index": the side's records before the next one (every shard's), "child": the child's records' position just
    after the last one yielded}."""

    def __init__(self, split: Holdout, shard, start=None, all_fields=False, bad=None):
        super().__init__(split.child, shard, start, all_fields, bad)
        self.split = split
        self.inner = split.child.records(Shard(), self.start.get("child"), all_fields, self.bad)

    @property
    def revision(self) -> str | None:
        return self.inner.revision

    def _open(self) -> None:
        self.inner.open()
        self.revision_pinned = self.inner.revision_pinned

    def position(self) -> dict:
        return {"index": self.index, "child": self.inner.position()}

    def _records(self) -> Iterator[tuple[dict, bytes | None]]:
        keeps, owns, index = self.split.keeps, self.shard.owns, self.index
        for record, raw in self.inner:
            if keeps(record_key(record)):
                index += 1
                if owns(index - 1):
                    self.index = index
                    yield record, raw
