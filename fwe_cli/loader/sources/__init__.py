"""Document sources: one entry point, `DocumentStream`, that opens the configured source and shards it."""

from __future__ import annotations

from typing import Callable, Iterator

from fwe_cli.loader.config import LoaderConfig
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.local import BadRecords, iter_local, resolve_files
from fwe_cli.loader.sources.synthetic import iter_synthetic


class DocumentStream:
    """The shard's documents for a config, in stream order, plus what was learned while reading.

    Opening (file listing, Hub handshake) happens on first iteration, inside the producer, so its cost is
    measured as part of the first batch and a hang there is caught by the loader's timeout.
    """

    def __init__(self, config: LoaderConfig, set_stage: Callable[[str], None] = lambda stage: None,
                 mark: Callable[[str], None] = lambda name: None):
        self.config = config
        self._mark = mark
        self.bad = BadRecords()
        self.files: list[str] = []
        self._set_stage = set_stage

    def describe(self) -> dict:
        c = self.config
        info: dict = {"kind": c.source}
        if c.source == "local":
            info.update(path=c.local_path, files=len(self.files), bad_records=self.bad.to_dict())
        elif c.source == "hub":
            info.update(dataset=c.dataset, name=c.name, split=c.split, bad_records=self.bad.to_dict())
        else:
            info.update(seed=c.seed)
        return info

    def __iter__(self) -> Iterator[Document]:
        c = self.config
        strict = c.bad_records == "error"
        if c.source == "synthetic":
            self._mark("source_opened")
            for doc in iter_synthetic(c.seed, c.shard):
                self._mark("first_document")
                yield doc
            return
        if c.source == "local":
            self._set_stage("opening source (listing local files)")
            self.files = resolve_files(c.local_path, allow_partial=c.allow_partial)
            docs = iter_local(self.files, self.bad, strict)
        else:
            from fwe_cli.loader.sources.hub import iter_hub, open_hub_stream

            self._set_stage(f"opening source (Hub handshake, metadata and file listing for {c.dataset})")
            docs = iter_hub(open_hub_stream(c.dataset, c.name, c.split), c.dataset, self.bad, strict)
        self._mark("source_opened")
        self._set_stage("reading first document")
        for doc in self._shard(docs):
            self._mark("first_document")
            yield doc

    def _shard(self, docs: Iterator[Document]) -> Iterator[Document]:
        """The documents the config's shard owns, indices counted over the whole stream."""
        shard = self.config.shard
        return (doc for index, doc in enumerate(docs) if shard.owns(index))
