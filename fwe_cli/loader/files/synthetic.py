"""Built-in offline data: deterministic FineWeb-Edu-shaped records.

Record i depends only on (seed, i), so a reader generates just its own documents and any run, thread count or queue
depth sees the same stream. An epoch is EPOCH_RECORDS records (more than any run reads), one unit of records that
readers split like any source's (sources.units). Text is
English-like prose from a Zipf-weighted vocabulary of ~800 common words (educational topics), in sentences and
paragraphs with a title line, so a byte-level BPE such as GPT-2 spends about as much work per character as on real
FineWeb-Edu (comparison in runbooks/throughput.md), and generating it costs far less than tokenizing it. Lengths are
log-normal with median 2,000 characters and sigma 1.05 (real FineWeb: p10 468, p50 1,684, p90 6,889), capped at 120,000,
so the tail passes 40,000 characters about once in 800 documents.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Iterator

import numpy as np

from fwe_cli.loader.documents import Document
from fwe_cli.loader.limits import check_limit
from fwe_cli.loader.sources.base import Source
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.records import Records
from fwe_cli.loader.sources.units import Piece, Unit
from fwe_cli.loader.sources.where import check_where, filter_of, parse_where

MEDIAN_CHARS = 2000
SIGMA = 1.05
MAX_CHARS = 120_000
MIN_CHARS = 60
DUMPS = ("CC-MAIN-2013-20", "CC-MAIN-2017-04", "CC-MAIN-2019-35", "CC-MAIN-2021-43", "CC-MAIN-2024-10")
DOMAINS = ("edu", "org", "gov", "com", "net")
EPOCH_RECORDS = 1 << 30
"""Records in one epoch of the stream (about 2 TB of text: no run reads it to its end)."""
BLOCK_RECORDS = 1 << 16
"""A shuffled epoch permutes blocks of this many records."""


@lru_cache(maxsize=1)
def _vocabulary() -> tuple[list[str], list[str], np.ndarray]:
    text = resources.files("fwe_cli.loader").joinpath("data/words.txt").read_text(encoding="utf-8")
    words = list(dict.fromkeys(text.split()))  # unique, file order = rough frequency order
    capitalized = [w.capitalize() for w in words]
    ranks = np.arange(1, len(words) + 1, dtype=np.float64)
    weights = 1.0 / ranks**0.9
    cdf = np.cumsum(weights / weights.sum())
    cdf[-1] = 1.0
    return words, capitalized, cdf


def _text(rng: np.random.Generator, target: int) -> str:
    words, capitalized, cdf = _vocabulary()
    n_words = target // 5 + 24
    picks = np.searchsorted(cdf, rng.random(n_words)).tolist()
    sentence_lengths = rng.integers(5, 26, size=n_words // 5 + 2).tolist()
    numbers = rng.integers(0, 2100, size=len(sentence_lengths)).tolist()
    flags = rng.random(len(sentence_lengths)).tolist()
    title = " ".join(capitalized[p] for p in picks[:4])
    parts = [title, "\n"]
    size = len(title) + 1
    pos = 4
    for k, length in enumerate(sentence_lengths):
        chunk = picks[pos : pos + length]
        if len(chunk) < 3 or size >= target:
            break
        pos += length
        body = [capitalized[chunk[0]]] + [words[p] for p in chunk[1:]]
        flag = flags[k]
        if flag < 0.25:
            body.insert(len(body) // 2, f"{words[chunk[1]]},")
        elif flag < 0.35:
            body.insert(len(body) // 2, str(numbers[k]))
        elif flag < 0.40:
            body.insert(1, f"({words[chunk[-1]]})")
        sentence = " ".join(body) + ("?" if flag > 0.97 else ".")
        parts.append(sentence)
        size += len(sentence) + 1
        parts.append("\n" if flag > 0.8 else " ")
    return "".join(parts).rstrip()


def _start(seed: int, index: int) -> tuple[np.random.Generator, str]:
    """Record `index`'s generator and its text (drawn first, so every field after it is the same either way)."""
    rng = np.random.default_rng((seed & 0xFFFFFFFF, index))
    target = int(min(MAX_CHARS, max(MIN_CHARS, MEDIAN_CHARS * np.exp(SIGMA * rng.standard_normal()))))
    return rng, _text(rng, target)


def _text_of(seed: int, index: int) -> str:
    return _start(seed, index)[1]


def _id(seed: int, index: int) -> str:
    return f"<urn:uuid:{seed & 0xFFFFFFFF:08x}-0000-4000-8000-{index:012d}>"


def synthetic_record(seed: int, index: int) -> dict:
    """The FineWeb-Edu record number `index` of the stream with this seed (all ten fields)."""
    rng, text = _start(seed, index)
    dump = DUMPS[index % len(DUMPS)]
    score = float(np.clip(2.5 + 0.7 * rng.standard_normal(), 0.0, 5.0))
    token_count = max(1, round(len(text) / 4.4))
    return {
        "text": text,
        "id": _id(seed, index),
        "dump": dump,
        "url": f"https://www.example-{index % 9973}.{DOMAINS[index % len(DOMAINS)]}/articles/{index}",
        "file_path": f"s3://commoncrawl/crawl-data/{dump}/segments/{index % 100:05d}/warc/synthetic.warc.gz",
        "language": "en",
        "language_score": float(np.clip(0.9 + 0.05 * rng.standard_normal(), 0.65, 1.0)),
        "token_count": int(token_count),
        "score": score,
        "int_score": int(round(score)),
    }


# The ten fields of a record (FineWeb-Edu's), with their parquet types: what a --where on this source may name.
FIELDS = {"text": "string", "id": "string", "dump": "string", "url": "string", "file_path": "string",
          "language": "string", "language_score": "double", "token_count": "int64", "score": "double",
          "int_score": "int64"}


@dataclass(frozen=True)
class SyntheticOptions:
    seed: int = 0
    """The stream's seed: record i depends only on (seed, i)."""
    where: str | None = None
    """A row filter on the records' ten fields (sources.where): only passing records are documents (each record is
    then made whole to be judged, its text included)."""

    def __post_init__(self) -> None:
        check_limit("seed", self.seed)
        check_where(self.where)
        if self.where is not None:
            parse_where(self.where).check_schema(list(FIELDS), FIELDS, "the synthetic source")


@dataclass(frozen=True, slots=True)
class SyntheticPosition(Position, name="synthetic"):
    """The next record's index."""

    index: int


class SyntheticSource(Source):
    """The built-in stream: record i depends only on (seed, i); no files, no network."""

    Options = SyntheticOptions
    position_type = SyntheticPosition
    block = BLOCK_RECORDS

    def __init__(self, spec, options):
        super().__init__(spec, options)
        self.where, self.filtered = filter_of(spec.options)

    @classmethod
    def location(cls, spec) -> str:
        return f"the synthetic source (seed {spec.options.seed})"

    def describe(self) -> dict:
        info = super().describe()
        return dict(info, **self.filtered.describe()) if self.filtered is not None else info

    def units(self) -> list[Unit]:
        return [Unit(0, 0, EPOCH_RECORDS)]

    def read(self, pieces: list[Piece], at: SyntheticPosition | None) -> Iterator[tuple[Document, SyntheticPosition,
                                                                                          int]]:
        """The records of each piece, each text made only when read (with a filter, every record is made whole to be
        judged)."""
        seed = self.spec.options.seed
        for number, piece in enumerate(pieces):
            first = max(piece.lo, at.index) if at is not None and number == 0 else piece.lo
            if self.filtered is not None:
                for index, record in self.passing_records(first, piece.hi):
                    yield Document(text=record["text"], id=record["id"]), SyntheticPosition(index + 1), \
                        piece.on_line(index)
                continue
            for index in range(first, piece.hi):
                yield Document(text=functools.partial(_text_of, seed, index), id=_id(seed, index)), \
                    SyntheticPosition(index + 1), piece.on_line(index)

    def passing_records(self, index: int, end: int | None = None) -> Iterator[tuple[int, dict]]:
        """(index, record) of each record from `index` on (up to `end`) that passes the filter (the others
        counted)."""
        seed, filtered = self.spec.options.seed, self.filtered
        for index in (itertools.count(index) if end is None else range(index, end)):
            record = synthetic_record(seed, index)
            if filtered.passes(record):
                yield index, record

    def records(self, shard, start=None, all_fields=False, bad=None) -> Records:
        return SyntheticRecords(self, shard, start, all_fields, bad)


class SyntheticRecords(Records):
    """The shard's records, all ten fields; position {"index"}: the next record index of the stream (with a filter:
    {"index": passing records read, every shard's, "record": the next record index of the stream})."""

    def __init__(self, source, shard, start=None, all_fields=False, bad=None):
        super().__init__(source, shard, start, all_fields, bad)
        self._record = int(self.start.get("record", self.index))

    def position(self) -> dict:
        position = super().position()
        return dict(position, record=self._record) if self.source.filtered is not None else position

    def _records(self) -> Iterator[tuple[dict, None]]:
        if self.source.filtered is not None:
            yield from self._passing()
            return
        shard, seed = self.shard, self.source.spec.options.seed
        index = shard.first_owned(self.index)
        while True:
            self.index = index + 1
            yield synthetic_record(seed, index), None
            index += shard.mod

    def _passing(self) -> Iterator[tuple[dict, None]]:
        index = self.index
        for at, record in self.source.passing_records(self._record):
            owned = self.shard.owns(index)
            index += 1
            if owned:
                self.index, self._record = index, at + 1
                yield record, None
