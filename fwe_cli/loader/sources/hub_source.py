"""What both Hub readers share: the spec fields, the artifacts' record, the commit a resume pins, and turning rows
into Documents (a row whose `text` is not a string is a bad record). The readers: hub_native (range reads, the
default) and hub_datasets (`datasets` streaming, the reference; same documents in the same order)."""

from __future__ import annotations

from typing import Iterator

from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.bad_records import BadRecords, bad_text_reason
from fwe_cli.loader.sources.base import Source


class HubSource(Source):
    """A dataset config's split on the Hugging Face Hub (or any HF_ENDPOINT)."""

    fields = ("dataset", "name", "split", "hub_reader")
    uses_hub = True

    @classmethod
    def where(cls, spec) -> str:
        return spec.dataset

    def describe(self) -> dict:
        spec = self.spec
        return {"kind": spec.kind, "dataset": spec.dataset, "name": spec.name, "split": spec.split,
                "reader": spec.hub_reader, "revision": self.revision or spec.revision, "bad_records": self.bad.to_dict()}

    def pinned(self) -> dict:
        """The spec's fields and the commit read: a resume reads that commit again, whatever its branch is now."""
        return dict(super().pinned(), revision=self.revision or self.spec.revision)


def iter_hub(rows: Iterator[tuple[dict, tuple]], dataset: str, bad: BadRecords, strict: bool,
             counted: int = 0) -> Iterator[tuple[Document, tuple]]:
    """(document, position after it) for the good rows of `rows` ((row, position after it) pairs from either Hub
    reader), unsharded; `counted` rows came before. A row whose `text` is not a string is counted in `bad` as
    `{dataset}#row{n}` (or raises with `strict`); a row without a string `id` is named `{dataset}#{row index}`."""
    for row, after in rows:
        counted += 1
        text = row.get("text")
        if not isinstance(text, str):
            bad.reject(f"{dataset}#row{counted}", bad_text_reason(text), strict)
            continue
        rid = row.get("id")
        yield Document(text=text, id=rid if isinstance(rid, str) else f"{dataset}#{counted - 1}"), after
