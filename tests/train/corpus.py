"""Documents a test can tell apart inside batches (byte tokenizer): each starts with `<NNN>` and ends with `</NNN>`.

    path = write_corpus(tmp_path / "docs.jsonl")
    numbers = doc_numbers(np.concatenate([b.reshape(-1) for b in batches]))   # the documents begun, in order
    order = round_robin([worker0_batches, worker1_batches])                    # as a DataLoader takes them
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tests.helpers import write_jsonl

START = re.compile(rb"<(\d{3})>")


def documents(count: int = 120) -> list[str]:
    return [f"<{i:03d}>" + "abcdefghij"[: 1 + i % 10] * (3 + i % 7) + f"</{i:03d}>" for i in range(count)]


def write_corpus(path: Path, count: int = 120) -> Path:
    return write_jsonl(path, [{"text": text} for text in documents(count)])


def doc_numbers(tokens: np.ndarray) -> list[int]:
    """The numbers of the documents whose start a byte-token stream holds, in order (end-of-text ids dropped)."""
    data = bytes(int(t) for t in np.asarray(tokens).reshape(-1) if int(t) < 256)
    return [int(m.group(1)) for m in START.finditer(data)]


def round_robin(streams: list[list]) -> list:
    """The order a DataLoader takes its workers' items in: one of each in turn, a finished worker left out."""
    out, at = [], [0] * len(streams)
    while any(a < len(s) for a, s in zip(at, streams)):
        for w, stream in enumerate(streams):
            if at[w] < len(stream):
                out.append(stream[at[w]])
                at[w] += 1
    return out
