"""Which documents to read: `SourceSpec`, a tree of sources (a kind, that kind's own options, and its children), and
`ReadOptions`, how to read it.

    SourceSpec.of("hub", dataset="HuggingFaceFW/fineweb-edu", name="sample-10BT")
    SourceSpec.of("local", local_path="/data/fwe_bootstrap")
    SourceSpec.of("head_tail", SourceSpec.of("local", local_path="/data/fwe_bootstrap"))   # a composite

A kind's options are a frozen dataclass its Source class declares (`Source.Options`), checked without touching disk or
network; `registry.open_source(spec, options)` turns a spec into the object that reads it (which, for a local path,
depends on what is there). `to_json`/`from_json` are the one JSON form of a spec: artifacts, resume states and a
measured run's child process all carry it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from fwe_cli.errors import ConfigError, SettingError
from fwe_cli.loader.sources.registry import LEAF_KINDS, kinds, options_class, source_class

SOURCE_FLAGS = ("source", "local_path", "dataset", "name", "split", "revision", "hub_reader", "seed", "where", "tail",
                "holdout", "holdout_split")
"""The flags that name a source: a leaf kind and its options, --tail, which wraps a bootstrap in the head_tail
composite, and --holdout/--holdout-split, which wrap the stream in one side of a held-out split
(`SourceSpec.from_flags`)."""


@dataclass(frozen=True)
class SourceSpec:
    """A source of documents, as the user named it: its kind, the kind's options, the sources it is made of."""

    kind: str = "hub"
    """A registered kind (registry.SOURCES): 'hub', 'local', 'synthetic', or a composite such as 'head_tail'."""
    options: Any = None
    """The kind's options (its Source's `Options` dataclass, or a mapping of them); None: the kind's defaults."""
    children: tuple["SourceSpec", ...] = ()
    """For a composite: the sources it is made of, in order."""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or self.kind not in kinds():
            raise SettingError(lambda n: f"{n('source')} must be one of {', '.join(kinds())}; got {self.kind!r}")
        wanted = options_class(self.kind)
        options = self.options
        if options is None or isinstance(options, Mapping):
            options = _options(self.kind, wanted, options or {})
        elif not isinstance(options, wanted):
            raise ConfigError(f"source {self.kind!r} takes {wanted.__name__} options, got {options!r}")
        children = tuple(self.children)
        if not all(isinstance(child, SourceSpec) for child in children):
            raise ConfigError(f"the children of source {self.kind!r} must be source specs, got {children!r}")
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "children", children)
        source_class(self).check_spec(self)

    @classmethod
    def of(cls, kind: str, *children: "SourceSpec", **options: Any) -> "SourceSpec":
        """A spec from its kind, children and options by name."""
        return cls(kind, options, children)

    def with_options(self, **changes: Any) -> "SourceSpec":
        """This spec with some of its own options changed."""
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **changes))

    def with_children(self, children: tuple["SourceSpec", ...]) -> "SourceSpec":
        return dataclasses.replace(self, children=tuple(children))

    @classmethod
    def from_flags(cls, given: Mapping[str, Any]) -> "SourceSpec":
        """The spec the source's flags name (those given, by field name): `source` a leaf kind (default hub, or local
        when a local path is given) with its options (the flags of other kinds are not its to read), wrapped by
        `tail` hub in the head_tail composite (a bootstrap continued from the Hub), and that by `holdout` in one side
        of a held-out split (`held_out`)."""
        values = dict(given)
        split = {name: values.pop(name, None) for name in ("holdout", "holdout_split")}
        kind = values.pop("source", None) or ("local" if values.get("local_path") else "hub")
        if values.get("split") == SIDES[1] and (split["holdout"] is not None or kind != "hub"):
            raise SettingError(lambda n: f"{n('split')} names a Hub dataset's split (train); the held-out side is read "
                                         f"with {n('holdout')} FRACTION {n('holdout_split')} holdout")
        return held_out(cls._unsplit(kind, values), **split)

    @classmethod
    def _unsplit(cls, kind: str, values: dict[str, Any]) -> "SourceSpec":
        """`from_flags` but for the held-out split: the leaf of `kind`, maybe in the head_tail composite."""
        tail = values.pop("tail", None)
        if kind not in LEAF_KINDS:
            raise SettingError(lambda n: f"{n('source')} must be one of {', '.join(LEAF_KINDS)}; got {kind!r}")
        names = {f.name for f in dataclasses.fields(options_class(kind))}
        spec = cls.of(kind, **{name: value for name, value in values.items() if name in names})
        if tail is None:
            return spec
        if tail != "hub":
            raise SettingError(lambda n: f"{n('tail')} must be one of hub (or unset); got {tail!r}")
        if kind != "local":
            raise SettingError(lambda n: f"{n('tail')} hub continues a bootstrap read from disk: give "
                                         f"{n('local_path')} BOOTSTRAP_DIR, not {n('source')} {kind}")
        return cls.of("head_tail", spec)

    def walk(self) -> Iterator["SourceSpec"]:
        """This node, then every node below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def uses_hub(self) -> bool:
        """Whether reading any node of the tree talks to the Hub."""
        return any(source_class(node).uses_hub for node in self.walk())

    def lists_hub_files(self) -> bool:
        """Whether opening a node of the tree resolves a Hub listing (the native reader's)."""
        return any(source_class(node).lists_hub_files for node in self.walk())

    def grows(self) -> bool:
        """Whether a node of the tree is a bootstrap that may grow (head_tail with --grow)."""
        return any(source_class(node).grows for node in self.walk())

    def heavy_imports(self) -> tuple[str, ...]:
        """The modules a run reading the tree imports before it opens (every node's `heavy_imports`)."""
        return tuple(dict.fromkeys(m for node in self.walk() for m in source_class(node).heavy_imports))

    def shuffle_refusal(self) -> str | None:
        """Why the tree's stream cannot be shuffled (its first node that cannot say), or None."""
        return next((why for node in self.walk() if (why := source_class(node).shuffle_refusal)), None)

    def dealing_refusal(self) -> str | None:
        """Why the tree's stream cannot be dealt to several readers (its first node that cannot), or None."""
        return next((why for node in self.walk() if (why := source_class(node).dealing_refusal)), None)

    def location(self) -> str:
        """Where the documents come from, in a few words, for an error line."""
        return source_class(self).location(self)

    def to_json(self) -> dict[str, Any]:
        """{"kind", the kind's options by name, "children" (a composite's, as specs)}: the one JSON form."""
        data = {"kind": self.kind, **dataclasses.asdict(self.options)}
        if self.children:
            data["children"] = [child.to_json() for child in self.children]
        return data

    @classmethod
    def from_json(cls, data: Any) -> "SourceSpec":
        """The spec `to_json` wrote (validated like any construction); ConfigError naming what does not fit."""
        if not isinstance(data, Mapping) or not isinstance(data.get("kind"), str):
            raise ConfigError(f"a source must be an object with a 'kind', got {data!r}")
        options = {k: v for k, v in data.items() if k not in ("kind", "children")}
        children = data.get("children") or []
        if not isinstance(children, list):
            raise ConfigError(f"the children of source {data['kind']!r} must be a list, got {children!r}")
        return cls(data["kind"], options, tuple(cls.from_json(child) for child in children))


SIDES = ("train", "holdout")
"""The sides of a held-out split (`holdout_split`): the documents not held out, and those held out."""


def held_out(spec: SourceSpec, holdout: Any = None, holdout_split: Any = None) -> SourceSpec:
    """`spec` wrapped in the side `holdout_split` (default train) of a held-out split of `holdout` (a fraction, or its
    text) of its documents (compose.holdout); `spec` itself when no fraction is given. SettingError naming what is
    wrong: a fraction outside [0, 1), an unknown side, a side without a fraction."""
    if holdout is None:
        if holdout_split is not None:
            raise SettingError(lambda n: f"{n('holdout_split')} {holdout_split} reads one side of a held-out split: "
                                         f"give its fraction with {n('holdout')} (e.g. 0.01)")
        return spec
    return SourceSpec.of("holdout", spec, holdout=holdout, holdout_split=SIDES[0] if holdout_split is None
                         else holdout_split)


def _options(kind: str, wanted: type, values: Mapping[str, Any]):
    names = [f.name for f in dataclasses.fields(wanted)]
    unknown = sorted(set(values) - set(names))
    if unknown:
        takes = f"it takes {', '.join(names)}" if names else "it takes none"
        raise ConfigError(f"source {kind!r} has no option {', '.join(map(repr, unknown))} ({takes})")
    return wanted(**values)


@dataclass(frozen=True)
class NoOptions:
    """The options of a kind that has none of its own."""


@dataclass(frozen=True)
class ReadOptions:
    """How a source is read: the reading policy, not which documents (that is the spec)."""

    strict: bool = False
    """A malformed record raises SourceError naming it instead of being counted and skipped."""
    allow_partial: bool = False
    """Accept a bootstrap or token directory whose manifest is not marked complete."""
    verify_parts: bool = False
    """Compare each part's (shard's) sha256 with its manifest before reading; sizes are always compared."""
    hub_cache: bool = True
    """The native Hub reader keeps and reuses the listing and the stream's first row groups (a warm start)."""
    tokenizer: str | None = None
    """The tokenizer the reader's documents will be encoded with (None: the source's own): a token directory is
    checked against it, and a bootstrap whose `tokens/` were made with it is read from those shards."""
    grow: bool = False
    """A bootstrap continued from the Hub (head_tail) is appended the Hub documents read (compose.growth)."""
    storage_options: dict = dataclasses.field(default_factory=dict)
    """An object store's filesystem options (--storage-option KEY=VALUE: remote.object_store), for a URL source."""
