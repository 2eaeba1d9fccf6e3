"""Stream a dataset from the Hugging Face Hub (or any HF_ENDPOINT) through `datasets`.

`datasets` is imported here, lazily: its imports cost more than a local or synthetic run's whole start, so those
runs skip them.
HF_ENDPOINT, HF_HOME and HF_DATASETS_CACHE are honoured by the clients themselves.
"""

from __future__ import annotations

from typing import Iterator

from fwe_cli.errors import SourceError
from fwe_cli.loader.documents import Document
from fwe_cli.loader.sources.local import BadRecords, bad_text_reason
from fwe_cli.loader.transient import attempts_note, call_with_retries


REVISION_TIMEOUT_S = 30.0


def hub_revision(dataset: str, timeout: float = REVISION_TIMEOUT_S) -> str | None:
    """The commit sha the dataset's default branch points at now, or None when the Hub cannot say.

    `fwe bootstrap` records it in the manifest and pins it on resume, so a resumed copy reads the same data.
    """
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(dataset, timeout=timeout).sha
    except Exception:  # offline, gated, or an endpoint without the API: the revision is simply unknown
        return None


def open_hub_stream(dataset: str, name: str | None, split: str, revision: str | None = None,
                    all_columns: bool = False):
    """Handshake, metadata and file listing: returns the streaming IterableDataset.

    Only `text` and `id` are kept unless `all_columns`; `revision` pins a commit (None: the default branch).
    Transient failures (HTTP 429/5xx, cut connections) are retried: see fwe_cli.transient.
    """
    from fwe_cli.loader.hub_env import offline
    from fwe_cli.loader.sources.hub_listing import check_reachable

    if not offline():
        check_reachable(dataset, revision)
    try:
        from datasets import load_dataset

        stream = call_with_retries(
            lambda: load_dataset(dataset, name=name, split=split, streaming=True, revision=revision),
            f"opening Hub dataset {dataset}")
    except Exception as exc:  # datasets/huggingface_hub raise many types; keep the cause chained
        raise SourceError(f"cannot open Hub dataset {dataset!r} (config {name!r}, split {split!r})"
                          f"{attempts_note(exc)}: {exc}") from exc
    columns = stream.column_names
    if columns and "text" not in columns:
        raise SourceError(f"Hub dataset {dataset!r} has no 'text' column (columns: {', '.join(columns)})")
    if columns and not all_columns:
        stream = stream.select_columns([c for c in ("text", "id") if c in columns])
    return stream


def hub_rows(stream, dataset: str, bad: BadRecords, strict: bool, rows: int = 0) -> Iterator[tuple[dict, int]]:
    """(row, rows read so far) for each row of `stream` with a string `text`; `rows` counts rows read before.

    A row whose `text` is not a string is counted in `bad` as `{dataset}#row{n}` and skipped, or with `strict`
    raises SourceError naming it."""
    for row in stream:
        rows += 1
        text = row.get("text")
        if isinstance(text, str):
            yield row, rows
            continue
        bad.reject(f"{dataset}#row{rows}", bad_text_reason(text), strict)


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


def datasets_rows(stream, rows: int = 0) -> Iterator[tuple[dict, tuple]]:
    """A `datasets` stream's rows with their position: (rows read,). A stream opened at a position skips that many
    rows (`IterableDataset.skip`, which reads them: the `datasets` reader resumes in O(rows), the native one not)."""
    if rows:
        stream = stream.skip(rows)
    for rows, row in enumerate(stream, start=rows + 1):
        yield row, (rows,)
