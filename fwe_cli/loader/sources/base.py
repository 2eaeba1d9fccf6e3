"""What every source of documents is: `Source`, the object `registry.open_source` returns for a spec.

A source is opened inside the loader's producer (`open`: listing files, the Hub handshake), so its cost is part of
the first batch and a hang there is caught by the loader's timeout. It then yields the whole stream's documents of
one epoch, unsharded, each with the position just after it (`documents`); sources.order numbers, shuffles and shards
them. It describes itself for artifacts (`describe`), says what a resume state must match (`pinned`, and the files it
read: `fingerprint` / `check_fingerprint`), and, for `fwe bootstrap`, yields whole records with resumable positions
(`records`, see sources.records).

Class attributes answer what the spec alone decides (no disk, no network): the spec fields the kind reads, those it
requires, whether it talks to the Hub, whether it can be shuffled, what a run must import before it opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, ClassVar, Iterator

from fwe_cli.errors import ConfigError, SourceError
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.bad_records import BadRecords

if TYPE_CHECKING:  # the kinds' modules import this one: annotations naming their types stay unimported strings
    from fwe_cli.loader.shard import Shard

Order = Callable[[list, int], list]
"""How files are ordered in an epoch: (files, epoch) -> files (as listed, or permuted by the shuffle)."""


class Source:
    """One kind of document source, for one spec; subclasses override what their kind does differently."""

    fields: ClassVar[tuple[str, ...]] = ()
    """The SourceSpec fields that say where this kind's documents are."""
    required: ClassVar[tuple[str, ...]] = ()
    """Of those, the ones a spec must give."""
    uses_hub: ClassVar[bool] = False
    """Reading it talks to the Hugging Face Hub."""
    shuffle_refusal: ClassVar[str | None] = None
    """Why its stream cannot be shuffled (--shuffle-seed is then a usage error saying so); None: it can."""
    reads_tokens: ClassVar[bool] = False
    """Its documents arrive as token ids (a token directory): no tokenizer runs, and tokenizer settings (doc batch,
    threads, backend) change nothing."""
    lists_hub_files: ClassVar[bool] = False
    """Opening it resolves a Hub listing (revision, files): under torch.distributed rank 0 resolves it for all."""
    grows: ClassVar[bool] = False
    """Files may be added to it after its own (a bootstrap grown with --grow) without moving any position: a resume
    state saved over fewer of them still holds."""
    copies_whole_files: ClassVar[bool] = False
    """`fwe bootstrap` downloads its files and converts them (the native Hub reader) instead of reading `records`."""
    heavy_imports: ClassVar[tuple[str, ...]] = ()
    """Modules a run reading it imports before it opens (counted in `fwe measure`'s imports phase)."""

    @classmethod
    def accepts(cls, spec: SourceSpec) -> bool:
        """Whether this class reads `spec`, by the spec alone."""
        return True

    @classmethod
    def found(cls, spec: SourceSpec, options: ReadOptions) -> "Source | None":
        """This class's reader for `spec` when what is there (on disk) is its to read, else None; the last class of
        a kind takes anything."""
        return cls(spec, options)

    @classmethod
    def start_early(cls, spec: SourceSpec, options: ReadOptions) -> None:
        """Start the first request opening `spec` will make, before a loader exists (the `fwe` process, while it
        imports what the run needs); the loader's source takes it over. Default: a source that makes none."""

    @classmethod
    def where(cls, spec: SourceSpec) -> str:
        """Where the documents come from, in a few words (an error line names it)."""
        return spec.kind

    def __init__(self, spec: SourceSpec, options: ReadOptions):
        self.spec = spec
        self.options = options
        self.bad = BadRecords()
        self.files: list[str] = []
        """What `open` found to read: local paths, or the Hub listing's paths."""
        self.revision: str | None = None
        """The Hub commit read, once known."""

    # -- reading (the loader) --------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Imports the first request needs, before the pipeline starts parsing a tokenizer (which holds the GIL)."""

    def open(self, set_stage: Callable[[str], None]) -> None:
        """List files or resolve the Hub listing, once; `set_stage` names what it is doing."""

    def documents(self, epoch: int, at: tuple | None, order: Order) -> Iterator[tuple[Document, tuple]]:
        """(document, position just after it) of the whole stream in epoch `epoch`, from position `at` (None: the
        epoch's start): every shard's documents, in the epoch's file `order`."""
        raise NotImplementedError

    def pretokenized(self) -> ShardTokens | None:
        """A token directory's ShardTokens (eos and vocab from its manifest; no tokenizer is loaded), else None."""
        return None

    def latest_revision(self) -> str | None:
        """The commit a Hub branch points at now, to pin a new bootstrap to (None: not a Hub source, or unknown)."""
        return None

    def default_tokenizer(self) -> str:
        """The tokenizer to encode with when none is given: the one a token directory records, else 'byte'."""
        return "byte"

    def read_ahead_now(self) -> None:
        """The consumer wants more than its first batch: background reads may run ahead now."""

    def close(self) -> None:
        """Stop background reads; callable from any thread, more than once."""

    # -- identity --------------------------------------------------------------------------------------------------
    def describe(self) -> dict:
        """The artifacts' `source` record."""
        return {"kind": self.spec.kind, **self.spec.fields}

    def pinned(self) -> dict:
        """The spec fields a resume state records and must match, with what opening resolved pinned (a branch's
        commit)."""
        return dict(self.spec.fields)

    def fingerprint(self) -> list[dict] | None:
        """The files read, as they were (size and modification time, or the manifest's sha256), so that a resume or
        a bootstrap notices they changed; None for a source without files."""
        return None

    def changed(self, saved: list[dict] | None, may_grow: bool = False) -> str | None:
        """How the files differ from those `saved` (a `fingerprint()` taken earlier) describes, in a few words naming
        the first that differs; None when they are the same. `may_grow`: files added after them are fine (a
        bootstrap grown since, read in stream order)."""
        now = self.fingerprint()
        if saved is None or now is None:
            return None
        keys = set().union(*saved) if saved else set()
        if keys == {"path"}:  # a resume state of fwe <= 0.1 recorded paths only
            now = [{"path": path} for path in self.files]
        else:
            now = [{k: entry.get(k) for k in keys} for entry in now]
        current = now[:len(saved)] if may_grow else now
        for old, new in zip(saved, current):
            if old != new:
                return f"{_show(old)} then, {_show(new)} now"
        if len(current) != len(saved):
            return f"{len(saved)} files of {self.where(self.spec)} then, {len(now)} now"
        return None

    def check_fingerprint(self, saved: list[dict] | None, may_grow: bool = False) -> None:
        """ConfigError (one line, naming the first file that differs) unless the files are those a resume state was
        saved over."""
        change = self.changed(saved, may_grow)
        if change is not None:
            raise ConfigError(f"the resume state was saved over other data ({change}): resume over the same data, or "
                              "start without the state")

    def local_files(self) -> list[str]:
        """Files on this machine the source reads (their pages are dropped for a cold `fwe measure` run)."""
        return []

    # -- records (fwe bootstrap) -----------------------------------------------------------------------------------
    def records(self, shard: Shard, start: dict | None = None, all_fields: bool = False,
                bad: BadRecords | None = None) -> Records:
        """Whole records of the shard, with resumable positions, from `start` (see sources.records)."""
        raise SourceError(f"{self.where(self.spec)} holds no text records to copy")


def _show(entry: dict) -> str:
    """A fingerprint entry in a few words: its name, then what was recorded of it."""
    name = entry.get("path") or entry.get("name")
    rest = ", ".join(f"{k} {v}" for k, v in entry.items() if k not in ("path", "name"))
    return f"{name} ({rest})" if rest else str(name)
