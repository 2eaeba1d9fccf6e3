"""The one table of source kinds: which object reads a `SourceSpec`.

A `--source` value names a kind; each kind lists the classes that can read it, first match wins: a local path is a
token directory, a bootstrap or plain files (decided by what is on disk when it is opened), the Hub is read natively
or through `datasets` (decided by --hub-reader); a bootstrap of the Hub with --tail hub is read locally, then from the
Hub. The rest of fwe asks the object (`fwe_cli.loader.sources.base.Source`)
what it needs to know: its fields, whether it shuffles, whether it talks to the Hub, how it describes and fingerprints
itself. Adding a kind means adding one module with its Source class and one line here.

Classes are named as 'module:Class' under fwe_cli.loader.sources and imported when first asked for, so naming a kind
(validating a flag, `fwe --help`) loads none of their readers; nothing is imported here at all (the spec module,
which validates a kind, imports this one), so the types in annotations are names only.
"""

from __future__ import annotations

import importlib
from functools import lru_cache


SOURCES: dict[str, tuple[str, ...]] = {
    "hub": ("hub_native:HubNative", "hub_datasets:HubDatasets"),
    "local": ("head_tail:HeadTail", "token_dir:TokenDir", "file_sources:BootstrapDir", "file_sources:LocalFiles"),
    "synthetic": ("synthetic:SyntheticSource",),
}
KINDS = tuple(SOURCES)
HUB_READERS = ("native", "datasets")


@lru_cache(maxsize=None)
def _load(name: str) -> type[Source]:
    module, _, cls = name.partition(":")
    return getattr(importlib.import_module(f"fwe_cli.loader.sources.{module}"), cls)


def candidates(kind: str) -> tuple[type[Source], ...]:
    """The classes that may read a kind, in the order they are tried."""
    return tuple(_load(name) for name in SOURCES[kind])


def source_class(spec: SourceSpec) -> type[Source]:
    """The class a spec is read by, as far as the spec alone says (no disk, no network): what it needs, how it is
    described and whether it shuffles are the same for every class that could read it once opened."""
    return next(cls for cls in candidates(spec.kind) if cls.accepts(spec))


def open_source(spec: SourceSpec, options: ReadOptions) -> Source:
    """The object that reads `spec`: the first class of its kind that accepts it and finds what is there its own."""
    for cls in candidates(spec.kind):
        if cls.accepts(spec) and (source := cls.found(spec, options)) is not None:
            return source
    raise AssertionError(f"no reader for {spec!r}: the last class of each kind recognises everything it accepts")
