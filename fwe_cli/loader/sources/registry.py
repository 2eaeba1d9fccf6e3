"""The one table of source kinds: which object reads a `SourceSpec`.

A kind (the `kind` of a spec; `--source` names the leaf kinds) lists the classes that can read it, first match wins:
a local path is a token directory, a bootstrap or plain files (decided by what is on disk when it is opened), the Hub
is read natively or through `datasets` (decided by its `hub_reader` option). A composite kind (`head_tail`: a
bootstrap of the Hub, then the Hub) is a source made of sources and is registered like any other. The rest of fwe
asks the object (`fwe_cli.loader.sources.base.Source`) what it needs to know. Adding a kind means one module with its
Source class and one line here, or a call of `register` from anywhere (a test, a user's own composite).

Classes are named as 'module:Class' under fwe_cli.loader (the wings: hub/, files/, compose/) and imported when first
asked for, so naming a kind (validating a flag, `fwe --help`) loads none of their readers.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Any, Union

ClassName = Union[str, type]
"""A Source class, or its 'module:Class' name under fwe_cli.loader (the table imports none of them, nor their
base, until asked: the arrows run from the sources and specs to the table, never back)."""

SOURCES: dict[str, tuple[ClassName, ...]] = {
    "hub": ("hub.native:HubNative", "hub.streaming:HubDatasets"),
    "local": ("files.token_dir:TokenDir", "files.text:BootstrapDir", "files.text:LocalFiles"),
    "synthetic": ("files.synthetic:SyntheticSource",),
    "head_tail": ("compose.head_tail:HeadTail",),
    "mixture": ("compose.mixture:Mixture",),
    "holdout": ("compose.holdout:Holdout",),
}
LEAF_KINDS = ("hub", "local", "synthetic")
"""The kinds `--source` names (a composite is made by its own flags or in Python)."""


def register(kind: str, *classes: ClassName) -> None:
    """Make `kind` read by `classes` (tried in order; the last one must accept every spec of the kind)."""
    if not classes:
        raise ValueError(f"register({kind!r}) needs at least one class")
    SOURCES[kind] = tuple(classes)


def kinds() -> tuple[str, ...]:
    return tuple(SOURCES)


@lru_cache(maxsize=None)
def _load(name: str) -> type:
    module, _, cls = name.partition(":")
    return getattr(importlib.import_module(f"fwe_cli.loader.{module}"), cls)


def candidates(kind: str) -> tuple[type, ...]:
    """The classes that may read a kind, in the order they are tried."""
    return tuple(_load(name) if isinstance(name, str) else name for name in SOURCES[kind])


def options_class(kind: str) -> type:
    """The frozen dataclass of a kind's own options (every class of a kind shares its first class's)."""
    return candidates(kind)[0].Options


def source_class(spec: Any) -> type:
    """The Source class a SourceSpec is read by, as far as the spec alone says (no disk, no network): what it needs,
    how it is described and whether it shuffles are the same for every class that could read it once opened."""
    return next(cls for cls in candidates(spec.kind) if cls.reads_spec(spec))


def open_source(spec: Any, options: Any) -> Any:
    """The Source that reads a SourceSpec `spec` with ReadOptions `options` (its children's made by it): the first
    class of its kind that accepts it and finds what is there its own."""
    for cls in candidates(spec.kind):
        if cls.reads_spec(spec) and (source := cls.reader_for(spec, options)) is not None:
            return source
    raise AssertionError(f"no reader for {spec!r}: the last class of each kind recognises everything it accepts")
