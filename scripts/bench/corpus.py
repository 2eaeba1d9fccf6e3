"""The text the benchmarks read: real FineWeb text from ../shared/fineweb_real (beside the repository) when present,
replicated to a size, else fwe's synthetic FineWeb-Edu records; and GPT-2's tokenizer.json, built offline.

    from scripts.bench.corpus import build_corpus, gpt2_tokenizer
    path, kind = build_corpus("/tmp/fwe_bench_data", min_mb=80)   # reused when already built

Benchmarks may read the real data; tests never do (they pass --synthetic).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Iterator

import numpy as np
import orjson

from scripts.bench.harness import REPO_ROOT

REAL_DIR = REPO_ROOT.parent / "shared" / "fineweb_real"
SUBSET, SAMPLE = REAL_DIR / "fineweb_subset.json", REAL_DIR / "fineweb_sample.txt"


def real_texts() -> list[str]:
    """fineweb_subset.json's texts, then fineweb_sample.txt cut at line ends into FineWeb-like lengths
    (log-normal, median 1,684 characters, sigma 1.05, as the subset's own distribution)."""
    texts = [record["text"] for record in orjson.loads(SUBSET.read_bytes())]
    lines = SAMPLE.read_text(encoding="utf-8").split("\n")
    rng = np.random.default_rng(0)
    target, current, size = 0, [], 0
    for line in lines:
        if not current:
            target = int(np.clip(1684 * np.exp(1.05 * rng.standard_normal()), 200, 40_000))
        current.append(line)
        size += len(line) + 1
        if size >= target:
            texts.append("\n".join(current))
            current, size = [], 0
    if current:
        texts.append("\n".join(current))
    return texts


def synthetic_records(seed: int) -> Iterator[dict]:
    """fwe's synthetic FineWeb-Edu records (all ten fields) of `seed`, in order, without end."""
    from fwe_cli.loader.files.synthetic import synthetic_record

    return (synthetic_record(seed, index) for index in itertools.count())


def write_jsonl(path: str | Path, records: Iterator[dict], size: float) -> tuple[int, int]:
    """Records from `records` as JSONL lines into `path` until it holds at least `size` bytes, written to a temporary
    file and renamed (a run stopped half way leaves no short file under the name). Returns (bytes, lines)."""
    written = lines = 0
    with open(f"{path}.tmp", "wb") as handle:
        while written < size:
            line = orjson.dumps(next(records), option=orjson.OPT_APPEND_NEWLINE)
            handle.write(line)
            written += len(line)
            lines += 1
    os.replace(f"{path}.tmp", path)
    return written, lines


def build_corpus(directory: str, min_mb: float, synthetic: bool = False) -> tuple[str, str]:
    """A JSONL file of >= min_mb MB of FineWeb-Edu-shaped records (real text in the synthetic records' schema, or
    synthetic records); reused when already built. Returns (path, what it holds)."""
    real = not synthetic and SUBSET.is_file() and SAMPLE.is_file()
    kind = "real FineWeb text (../shared/fineweb_real: fineweb_subset.json + fineweb_sample.txt), replicated" \
        if real else "synthetic FineWeb-Edu records (fwe_cli.loader.files.synthetic)"
    path = os.path.join(directory, f"{'real' if real else 'synthetic'}_{min_mb:g}mb.jsonl")
    if os.path.isfile(path):
        return path, kind
    os.makedirs(directory, exist_ok=True)
    records = synthetic_records(0)
    if real:
        texts = real_texts()
        records = (dict(record, text=text, token_count=max(1, round(len(text) / 4.4)))
                   for record, text in zip(records, itertools.cycle(texts)))
    write_jsonl(path, records, min_mb * 1e6)
    return path, kind


def warm_page_cache(path: str) -> None:
    """Read `path` once, so that every run after it reads the same cached pages."""
    with open(path, "rb") as handle:
        while handle.read(1 << 24):
            pass


def read_texts(path: str) -> list[str]:
    """The `text` of every record of a JSONL file, in order (pre-read text for a tokenizer ceiling)."""
    with open(path, "rb") as handle:
        return [orjson.loads(line)["text"] for line in handle]


def gpt2_tokenizer(directory: str) -> str:
    """GPT-2's tokenizer.json in `directory`, built offline from the packaged vocabulary unless already there."""
    from fwe_cli.loader.tokenization.gpt2_vocab import write_gpt2_tokenizer_json

    path = os.path.join(directory, "tokenizer.json")
    return path if os.path.isfile(path) else write_gpt2_tokenizer_json(directory)
