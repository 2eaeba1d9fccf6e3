"""Which documents to read: `SourceSpec`, the one description of a source, embedded wherever a source is named (the
loader's config, a bootstrap's config, a record stream), and `ReadOptions`, how to read it.

    SourceSpec("hub", dataset="HuggingFaceFW/fineweb-edu", name="sample-10BT")
    SourceSpec("local", local_path="/data/fwe_bootstrap")
    SourceSpec("synthetic", seed=3)

A spec says what the user asked for and is checked without touching disk or network; `registry.open_source(spec,
options)` turns it into the object that reads it (which, for a local path, depends on what is there: plain files, a
bootstrap, a token directory). A spec's `kind` is the `--source` value; its other fields are the flags of the same
name, and each kind uses some of them (the registry's classes say which).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.limits import check_limit
from fwe_cli.loader.sources.registry import KINDS, HUB_READERS, source_class

TAILS = ("hub",)

@dataclass(frozen=True)
class SourceSpec:
    """A source of documents, as the user named it."""

    kind: str = "hub"
    """'hub' (the Hugging Face Hub), 'local' (files, a bootstrap or a token directory) or 'synthetic' (built in)."""
    local_path: str | None = None
    """For 'local': a JSONL/TXT/parquet file, a directory or glob of them, a bootstrap or a token directory."""
    dataset: str = "HuggingFaceFW/fineweb-edu"
    """For 'hub': the dataset repository id."""
    name: str | None = "sample-10BT"
    """For 'hub': the dataset config name."""
    split: str = "train"
    """For 'hub': the split to stream."""
    revision: str | None = None
    """For 'hub': a branch, tag or commit sha to read (None: main); artifacts record the commit read."""
    hub_reader: str = "native"
    """For 'hub': 'native' (huggingface_hub + pyarrow range reads) or 'datasets' (datasets streaming, the reference;
    same documents in the same order)."""
    seed: int = 0
    """For 'synthetic': the stream's seed."""
    tail: str | None = None
    """For 'local' naming a bootstrap of the Hub: 'hub' continues, once its documents are read, from the Hub with the
    first document it did not copy, at its revision (NSA_FWE_TAIL); None: the local copy is all (sources.head_tail)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SettingError(lambda n: f"{n('source')} must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if self.hub_reader not in HUB_READERS:
            raise SettingError(lambda n: f"{n('hub_reader')} must be one of {', '.join(HUB_READERS)}; "
                                         f"got {self.hub_reader!r}")
        if self.tail is not None and self.tail not in TAILS:
            raise SettingError(lambda n: f"{n('tail')} must be one of {', '.join(TAILS)} (or unset); got {self.tail!r}")
        check_limit("seed", self.seed)
        cls = source_class(self)
        if self.tail is not None and "tail" not in cls.fields:
            raise SettingError(lambda n: f"{n('tail')} {self.tail} continues a bootstrap read from disk: give "
                                         f"--local-path BOOTSTRAP_DIR, not {n('source')} {self.kind}")
        for name in cls.required:
            if not getattr(self, name):
                raise ConfigError(f"source {self.kind!r} needs {name} (--{name.replace('_', '-')}), got none")

    @property
    def fields(self) -> dict[str, Any]:
        """The fields this kind reads (its location: path, repository, seed), by name."""
        return {name: getattr(self, name) for name in source_class(self).fields}

    def where(self) -> str:
        """Where the documents come from, in a few words, for an error line."""
        return source_class(self).where(self)

    def replace(self, **changes: Any) -> "SourceSpec":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The flat view artifacts and resume states have always recorded: the kind under `source`."""
        plain = dataclasses.asdict(self)
        return {"source": plain.pop("kind"), **plain}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SourceSpec":
        values = {name: data[name] for name in FLAT_FIELDS if name in data}
        if "source" in values:
            values["kind"] = values.pop("source")
        return cls(**values)


FLAT_FIELDS = ("source", *(f.name for f in dataclasses.fields(SourceSpec) if f.name != "kind"))
"""The names a spec's fields have in a flat config (LoaderConfig.to_dict, flags): the kind is `source`."""


@dataclass(frozen=True)
class ReadOptions:
    """How a source is read: the reading policy, not which documents (that is the spec)."""

    strict: bool = False
    """A malformed record raises SourceError naming it instead of being counted and skipped."""
    allow_partial: bool = False
    """Accept a bootstrap or token directory whose manifest is not marked complete."""
    verify_parts: bool = False
    """Compare each part's (shard's) sha256 with its manifest before reading; sizes are always compared."""
    use_cache: bool = True
    """The native Hub reader keeps and reuses the listing and the stream's first row groups (a warm start)."""
    tokenizer: str | None = None
    """The tokenizer the reader's documents will be encoded with (None: the source's own): a token directory is
    checked against it, and a bootstrap whose `tokens/` were made with it is read from those shards."""
    grow: bool = False
    """A bootstrap continued from the Hub (--tail hub) is appended the Hub documents read (sources.growth)."""
