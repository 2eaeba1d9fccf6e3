"""What both Hub readers share: the kind's options, the artifacts' record, the commit a resume pins, and turning rows
into Documents (a row whose `text` is not a string is a bad record); and the position of a row in a listing's parquet
files, which the native reader and a bootstrap's Hub tail both read. The readers: hub.native (range reads, the
default) and hub.streaming (`datasets` streaming, the reference; same documents in the same order)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from fwe_cli.errors import SettingError
from fwe_cli.loader.documents import Document, PlaceName
from fwe_cli.loader.sources.bad_records import BadRecords, bad_text_reason
from fwe_cli.loader.sources.base import Source
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.where import Filtered, check_where, filter_of

HUB_READERS = ("native", "datasets")


@dataclass(frozen=True)
class HubOptions:
    dataset: str = "HuggingFaceFW/fineweb-edu"
    """The dataset repository id."""
    name: str | None = "sample-10BT"
    """The dataset config name."""
    split: str = "train"
    """The split to stream."""
    revision: str | None = None
    """A branch, tag or commit sha to read (None: main); artifacts record the commit read."""
    hub_reader: str = "native"
    """'native' (huggingface_hub + pyarrow range reads) or 'datasets' (datasets streaming, the reference; same
    documents in the same order)."""
    where: str | None = None
    """A row filter on the files' columns (sources.where): only passing rows are documents."""

    def __post_init__(self) -> None:
        check_where(self.where)
        if self.hub_reader not in HUB_READERS:
            raise SettingError(lambda n: f"{n('hub_reader')} must be one of {', '.join(HUB_READERS)}; "
                                         f"got {self.hub_reader!r}")
        for name in ("dataset", "split"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise SettingError(lambda n, name=name: f"{n(name)} must name a Hub {name}, got "
                                                        f"{getattr(self, name)!r}")


@dataclass(frozen=True, slots=True)
class HubRowPosition(Position, name="hub_row", version=2):
    """Just after row `row` (counted from 1) of row group `group` of file `file` (its number in the listing)."""

    file: int
    group: int
    row: int


class HubSource(Source):
    """A dataset config's split on the Hugging Face Hub (or any HF_ENDPOINT)."""

    Options = HubOptions
    adopts = ("revision",)
    uses_hub = True

    def __init__(self, spec, options):
        super().__init__(spec, options)
        self.where, self.filtered = filter_of(spec.options)

    @classmethod
    def location(cls, spec) -> str:
        return spec.options.dataset

    def describe(self) -> dict:
        o = self.spec.options
        return {"kind": self.spec.kind, "dataset": o.dataset, "name": o.name, "split": o.split,
                "reader": o.hub_reader, "revision": self.revision or o.revision, "bad_records": self.bad.to_dict(),
                **(self.filtered.describe() if self.filtered is not None else {})}

    def pinned(self) -> dict:
        """The spec's options and the commit read: a resume reads that commit again, whatever its branch is now."""
        return dict(super().pinned(), revision=self.revision or self.spec.options.revision)


def iter_hub(rows: Iterator[tuple[dict, object, int]], dataset: str, bad: BadRecords, strict: bool,
             counted: int = 0, filtered: Filtered | None = None) -> Iterator[tuple[Document, object, int]]:
    """(document, position after it, its anchor) for the good rows of `rows` ((row, position after it, anchor) from
    either Hub reader); `counted` rows this reader read came before. A row that does not pass the filter of
    `filtered` is counted there; a row whose `text` is not a string is counted in `bad` as `{dataset}#row{n}` (or
    raises with `strict`); a row without a string `id` is named `{dataset}#{row index}` (n and the index count the
    rows this reader read)."""
    for row, after, anchor in rows:
        counted += 1
        if filtered is not None and not filtered.passes(row, lambda: f"{dataset}#row{counted}"):
            continue
        text = row.get("text")
        if not isinstance(text, str):
            bad.reject(f"{dataset}#row{counted}", bad_text_reason(text), strict)
            continue
        rid = row.get("id")
        yield Document(text=text, id=rid if isinstance(rid, str) else PlaceName(f"{dataset}#{counted - 1}")), after, \
            anchor
