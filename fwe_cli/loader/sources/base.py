"""What every source of documents is: `Source`, the object `registry.open_source` returns for a spec, with every
capability a source may have declared here with its default, so the pipeline asks and never probes.

A source is opened inside the loader's producer (`open`: listing files, the Hub handshake), so its cost is part of
the first batch and a hang there is caught by the loader's timeout. A source read by units (every leaf) says what it
is made of (`units`, from metadata alone: sources.units) and reads the pieces of them a reader's share holds (`read`),
each document with its typed position just after it (sources.position); sources.order deals, orders and resumes
them, one read path for every such source (`stream`). A composite is a source made of sources: its spec's children
become `children` (opened, closed, described, pinned and fingerprinted with it); one that composes their streams (a
mixture, a held-out split) overrides `stream`, `frontier` and `plan_for`, and its cursor holds its children's.

Class attributes answer what the spec alone decides (no disk, no network): the kind's options, its children, whether
it talks to the Hub, whether it can be shuffled, what a run must import before it opens.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, ClassVar, Hashable, Iterator

from fwe_cli.errors import ConfigError, SourceError
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.bad_records import BadRecords
from fwe_cli.loader.sources.deal import Frontier, leaf_share
from fwe_cli.loader.sources.fingerprint import files_changed
from fwe_cli.loader.sources.order import Cursor, StreamOrder, leaf_documents
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.registry import open_source
from fwe_cli.loader.sources.spec import NoOptions
from fwe_cli.loader.sources.units import BLOCK_BYTES, Layout, Piece, Unit, epoch_layout

if TYPE_CHECKING:  # the kinds' modules import this one: annotations naming their types stay unimported strings
    import numpy as np

    from fwe_cli.loader.shard import Shard
    from fwe_cli.loader.sources.records import Records
    from fwe_cli.loader.sources.spec import ReadOptions, SourceSpec
    from fwe_cli.loader.tokenization.pretokenized import ShardTokens

Emit = Callable[..., None]
"""Writes one heartbeat event: emit(msg, step=..., **fields)."""


class Source:
    """One kind of document source, for one spec; subclasses override what their kind does differently."""

    Options: ClassVar[type] = NoOptions
    """The frozen dataclass of the kind's own options (spec.options)."""
    children_allowed: ClassVar[tuple[int, int | None]] = (0, 0)
    """How many children a spec of the kind has: (at least, at most or None for any)."""
    position_type: ClassVar[type[Position] | None] = None
    """The type of the positions `read` yields and starts after."""
    adopts: ClassVar[tuple[str, ...]] = ()
    """Options a resume takes from the state when the spec leaves them unset (a Hub branch's commit)."""
    uses_hub: ClassVar[bool] = False
    """Reading it talks to the Hugging Face Hub."""
    shuffle_refusal: ClassVar[str | None] = None
    """Why its stream cannot be shuffled (--shuffle-seed is then a usage error saying so); None: it can."""
    dealing_refusal: ClassVar[str | None] = None
    """Why its stream cannot be dealt to several readers (more than one rank or DataLoader worker is then a usage
    error saying so); None: it can."""
    reads_tokens: ClassVar[bool] = False
    """Its documents arrive as token ids (a token directory): no tokenizer runs, and tokenizer settings (doc batch,
    threads, backend) change nothing."""
    lists_hub_files: ClassVar[bool] = False
    """Opening it resolves a Hub listing (revision, files): under torch.distributed rank 0 resolves it for all."""
    grows: ClassVar[bool] = False
    """Files may be added to it after its own (a bootstrap grown with --grow) without moving any position: a resume
    state saved over fewer of them still holds."""
    block: ClassVar[int] = BLOCK_BYTES
    """A shuffled epoch permutes its units in blocks of at most this much of their coordinate (sources.units)."""
    copies_whole_files: ClassVar[bool] = False
    """`fwe bootstrap` downloads its files and converts them (the native Hub reader) instead of reading `records`."""
    heavy_imports: ClassVar[tuple[str, ...]] = ()
    """Modules a run reading it imports before it opens (counted in `fwe measure`'s imports phase)."""

    # -- the spec alone ----------------------------------------------------------------------------------------------
    @classmethod
    def reads_spec(cls, spec: SourceSpec) -> bool:
        """Whether this class reads `spec`, by the spec alone."""
        return True

    @classmethod
    def reader_for(cls, spec: SourceSpec, options: ReadOptions) -> "Source | None":
        """This class's reader for `spec` when what is there (on disk) is its to read, else None; the last class of
        a kind takes anything."""
        return cls(spec, options)

    @classmethod
    def check_spec(cls, spec: SourceSpec) -> None:
        """ConfigError (one line) unless `spec` is one this kind can read: by default, the number of children."""
        low, high = cls.children_allowed
        count = len(spec.children)
        if count < low or (high is not None and count > high):
            wanted = "no" if high == 0 else f"{low}" if low == high else f"at least {low}"
            raise ConfigError(f"source {spec.kind!r} takes {wanted} child sources, got {count}")

    @classmethod
    def start_early(cls, spec: SourceSpec, options: ReadOptions) -> None:
        """Start the first request opening `spec` will make, before a loader exists (the `fwe` process, while it
        imports what the run needs); the loader's source takes it over. Default: a source that makes none."""

    @classmethod
    def location(cls, spec: SourceSpec) -> str:
        """Where the documents come from, in a few words (an error line names it)."""
        return spec.kind

    @classmethod
    def make_child(cls, spec: SourceSpec, options: ReadOptions) -> "Source":
        """The object reading one of a composite's children (default: whatever the registry opens for it)."""
        return open_source(spec, options)

    def __init__(self, spec: SourceSpec, options: ReadOptions):
        self.spec = spec
        self.options = options
        self.children: list[Source] = [self.make_child(child, options) for child in spec.children]
        self._bad = BadRecords()
        self.files: list[str] = []
        """What `open` found to read: local paths, or the Hub listing's paths."""
        self.revision: str | None = None
        """The Hub commit read, once known."""

    @property
    def bad(self) -> BadRecords:
        """Malformed records met so far, one count for the whole tree."""
        return self._bad

    @bad.setter
    def bad(self, bad: BadRecords) -> None:
        self._bad = bad
        for child in self.children:
            child.bad = bad

    # -- reading (the loader) --------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Imports the first request needs, before the pipeline starts parsing a tokenizer (which holds the GIL)."""
        for child in self.children:
            child.prepare()

    def open(self, set_stage: Callable[[str], None]) -> None:
        """List files or resolve the Hub listing, once; `set_stage` names what it is doing."""
        for child in self.children:
            child.open(set_stage)

    # -- units (a source read through them: sources.units, sources.order) -----------------------------------------
    def units(self) -> list[Unit]:
        """What the source is made of (after `open`), from metadata alone, in listing order."""
        raise NotImplementedError(f"{type(self).__name__} has no units: it composes its children's streams")

    def layout(self, epoch: int, seed: int | None) -> Layout:
        """Epoch `epoch`'s line (sources.units.epoch_layout), made once per epoch and seed."""
        key = (epoch, seed)
        cached = self.__dict__.get("_layout")
        if cached is None or cached[0] != key:
            cached = (key, epoch_layout(self.units(), seed, epoch, self.block))
            self._layout = cached
        return cached[1]

    def read(self, pieces: list[Piece], at: Position | None) -> Iterator[tuple[Document, Position, int]]:
        """(document, its position after it, its anchor on the line) for the documents of `pieces` in order, those of
        the first piece's unit only after `at` (None: all): what a reader's span holds, nothing else read."""
        raise NotImplementedError

    def stream(self, order: StreamOrder, start: Position | None, plan: Position | None) -> Iterator[Document]:
        """The reader's documents (`order.readers`), each with its `resume` (this source's cursor: a stream opened at
        it yields that document first), from `start` (None: the beginning); `plan`: what a changed world dealt
        this reader (a `plan_for`), None for the fresh share."""
        return leaf_documents(self, order, start, plan)

    def frontier(self, resume: Position, delivered: int, tokens: int) -> Position:
        """Where this reader stands when its last batch ended `delivered` tokens into a document of `tokens` (as its
        stream holds them) whose `resume` is given: what a changed world deals the rest from (`plan_for`)."""
        return Frontier(resume, delivered, tokens)

    def plan_for(self, olds: list[tuple[Position | None, Position | None]], order: StreamOrder) -> Position:
        """The plan of the reader `order.readers` of a new world (its stream ordered by `order`) that continues the
        old readers, each given as (the plan it was started with or None, its `frontier` or None when it delivered
        nothing), in the old readers' order."""
        return leaf_share(self, olds, order)

    def check_resume(self, resume: Position | None) -> None:
        """ConfigError unless `resume` is a cursor of this source (a resume state's, decoded)."""
        if resume is None:
            return
        inner = [resume.window.at, resume.window.end_at] if isinstance(resume, Cursor) else None
        if inner is None or not all(p is None or isinstance(p, self.position_type or ()) for p in inner):
            raise ConfigError(f"the resume position {resume.to_json()} is not one of {self.location(self.spec)}: "
                              "resume over the same source, or start without the state")

    def bind_encoder(self, make: Callable[[], Callable[[list[str]], list]], threads: int) -> None:
        """For a source that counts its documents' tokens (a mixture by tokens): `make()` gives the function that
        encodes texts to their ids with the loader's tokenizer (waiting for it to load), to run on up to `threads`
        threads. Default: passed on to the children."""
        for child in self.children:
            child.bind_encoder(make, threads)

    def pretokenized(self) -> ShardTokens | None:
        """A token directory's ShardTokens (eos and vocab from its manifest; no tokenizer is loaded), else None."""
        return None

    def token_chunks(self, order: StreamOrder, start: Position | None,
                     sizes: Iterator[int]) -> Iterator[tuple[np.ndarray, np.ndarray, Callable]] | None:
        """For a source whose documents are token ids (a token directory), read unshuffled: (ids, each document's
        tokens, its cursor by number in the chunk) per chunk of about `next(sizes)` tokens, from `start`
        (sources.order.leaf_chunks); None when the source reads documents only."""
        return None

    def first_batches(self, config, tokenizer: str):
        """The first batches earlier runs kept for this stream (hub.first_batches.FirstBatches), or None when
        none can be kept: a fresh warm start replays them, a cold one keeps its own."""
        return None

    def latest_revision(self) -> str | None:
        """The commit a Hub branch points at now, to pin a new bootstrap to (None: not a Hub source, or unknown)."""
        return None

    def default_tokenizer(self) -> str:
        """The tokenizer to encode with when none is given: the one a token directory records, else 'byte'."""
        return "byte"

    def read_ahead_now(self) -> None:
        """The consumer wants more than its first batch: background reads may run ahead now."""
        for child in self.children:
            child.read_ahead_now()

    def close(self) -> None:
        """Stop background reads; callable from any thread, more than once."""
        for child in self.children:
            child.close()

    def wait_for_writes(self, timeout: float) -> bool:
        """After `close`: wait at most `timeout` seconds for what the source writes for the next run (the first
        batches it kept); whether nothing is left to write."""
        return all([child.wait_for_writes(timeout) for child in self.children])

    # -- per-segment figures -----------------------------------------------------------------------------------------
    def on_batch(self, segment: Hashable, step: int, fetch_s: float, emit: Emit) -> dict:
        """The consumer took batch `step` (after waiting `fetch_s`), made of documents of `segment` (the `segment`
        its documents carry: None for a source of one): a source of several counts its figures here and may emit
        heartbeat events; returns fields for that step's fineweb_fetch line."""
        return {}

    def figures(self) -> dict:
        """What the stats add for this source's parts (a composite's), by key: {"parts": batches of each segment and
        where one began} (a bootstrap then the Hub), {"sources": each child's weight and share} (a mixture); none for
        a source of one part."""
        return {}

    # -- identity --------------------------------------------------------------------------------------------------
    def describe(self) -> dict:
        """The artifacts' `source` record."""
        info = {"kind": self.spec.kind, **dataclasses.asdict(self.spec.options)}
        if self.children:
            info["children"] = [child.describe() for child in self.children]
        return info

    def pinned(self) -> dict:
        """This node's options a resume state records and must match, with what opening resolved pinned (a branch's
        commit); the tree's is `pinned_tree`."""
        return dataclasses.asdict(self.spec.options)

    def pinned_tree(self) -> dict:
        """{"kind", pinned(), "children": each child's} for the whole tree."""
        node = {"kind": self.spec.kind, **self.pinned()}
        if self.children:
            node["children"] = [child.pinned_tree() for child in self.children]
        return node

    def fingerprint(self) -> list[dict] | None:
        """The files this node read, as they were (size and modification time, or the manifest's sha256), so that a
        resume or a bootstrap notices they changed; None for a source without files of its own."""
        return None

    def changed(self, saved: list[dict] | None, may_grow: bool = False) -> str | None:
        """How this node's files differ from those `saved` (a whole `fingerprint()` taken earlier: a bootstrap's or
        a token directory's) describes, in a few words naming the first that differs; None when they are the same.
        `may_grow`: files added after them are fine (a bootstrap grown since, read in stream order)."""
        return files_changed(saved, self.fingerprint(), self.files, self.location(self.spec), may_grow)

    def local_files(self) -> list[str]:
        """Files on this machine the source reads (their pages are dropped for a cold `fwe measure` run)."""
        return [path for child in self.children for path in child.local_files()]

    # -- records (fwe bootstrap) -----------------------------------------------------------------------------------
    def records(self, shard: Shard, start: dict | None = None, all_fields: bool = False,
                bad: BadRecords | None = None) -> Records:
        """Whole records of the shard, with resumable positions, from `start` (see sources.records)."""
        raise SourceError(f"{self.location(self.spec)} holds no text records to copy")

