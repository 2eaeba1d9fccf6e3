"""Documents grouped for one tokenizer call each: a ramp from a small first group, one source segment per group, and
the documents read before a source failed delivered before the failure."""

from __future__ import annotations

from itertools import islice
from typing import Callable, Iterable, Iterator

from fwe_cli.errors import FweError
from fwe_cli.loader.documents import Document


def doc_batches(documents: Iterable[Document], first: int, most: int,
                closing: Callable[[], bool] = lambda: False) -> Iterator[list[Document]]:
    """Lists of documents in stream order: `first` documents, then twice as many each time up to `most` (the first
    batch needs ~seq_len x batch tokens, not `most` long documents' worth, so it does not wait on a large first
    encode: scripts/bench/first_batch.py). A list never spans two segments of a source (`Document.segment`), so a
    position saved in a segment resumes in it and reads nothing of the one before. When reading fails (a FweError) after some documents of a list were read, that list comes first."""
    docs = iter(documents)
    size = min(first, most)
    held: list[Document] = []  # a document of the next segment: it starts the next list
    while not closing():
        chunk, held = held, []
        failure = None
        try:
            for doc in islice(docs, size - len(chunk)):
                if chunk and doc.segment != chunk[0].segment:
                    held = [doc]
                    break
                chunk.append(doc)
        except FweError as exc:
            if not chunk:
                raise
            failure = exc
        size = min(size * 2, most)
        if not chunk:
            return
        yield chunk
        if failure is not None:
            raise failure
