"""Parquet row group -> JSONL bytes, for `fwe bootstrap` from the Hub; run in worker processes, one group per task.

The lines are exactly what the `datasets` reader path writes for the same rows (fwe_cli/bootstrap/run.py
`encoder`): `--fields text` gives `{"text": ..., "id": ...}` (no `id` key when the row's id is null or absent),
`--fields all` every column in the file's order; orjson, compact, one line per row, `\\n` after each. A row whose
`text` is not a string gives no line: it is reported as (row number in the group, reason).

Each worker keeps the last parquet file it opened, so the groups of one file do not re-read its footer. Decoding
(pyarrow) and serializing (orjson) hold the GIL for most of the time, so the groups are spread over processes.
"""

from __future__ import annotations

import os
import threading
import time

import orjson

_OPEN: dict = {}
PARENT_POLL_S = 0.5


def watch_parent(parent: int) -> None:
    """Worker initializer: Ctrl-C and SIGTERM (sent to the whole process group by a terminal or SLURM) are left to
    the parent, which stops at a checkpoint and then shuts the workers down; and the worker ends soon after its
    parent is gone (a kill -9 of `fwe bootstrap` must not leave workers blocked forever on a task queue)."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    try:  # Linux: the kernel sends SIGKILL when the parent dies
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def poll() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=poll, name="fwe-watch-parent", daemon=True).start()


def _parquet(path: str):
    import pyarrow.parquet as pq

    parquet = _OPEN.get(path)
    if parquet is None:
        _OPEN.clear()
        parquet = _OPEN[path] = pq.ParquetFile(path)
    return parquet


def convert_group(path: str, group: int, start_row: int, fields: str) -> tuple[bytes, list[tuple[int, str]], int]:
    """(JSONL of the good rows from `start_row` on, [(row, reason)] of the bad ones, rows in the group)."""
    from fwe_cli.errors import SourceError
    from fwe_cli.loader.sources.local import bad_text_reason

    parquet = _parquet(path)
    names = parquet.schema_arrow.names
    if "text" not in names:
        raise SourceError(f"{path}: parquet file has no 'text' column (columns: {', '.join(names)})")
    table = parquet.read_row_group(group, columns=None if fields == "all" else [c for c in ("text", "id")
                                                                                  if c in names])
    rows = table.num_rows
    if start_row:
        table = table.slice(start_row)
    dumps, newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    lines: list[bytes] = []
    bad: list[tuple[int, str]] = []
    if fields == "all":
        option = newline | orjson.OPT_SERIALIZE_NUMPY
        for row, record in enumerate(table.to_pylist(), start=start_row):
            if isinstance(record["text"], str):
                lines.append(dumps(record, option=option, default=str))
            else:
                bad.append((row, bad_text_reason(record["text"])))
    else:
        texts = table.column("text").to_pylist()
        ids = table.column("id").to_pylist() if "id" in names else [None] * len(texts)
        for row, (text, rid) in enumerate(zip(texts, ids), start=start_row):
            if isinstance(text, str):
                lines.append(dumps({"text": text} if rid is None else {"text": text, "id": rid}, option=newline,
                                   default=str))
            else:
                bad.append((row, bad_text_reason(text)))
    return b"".join(lines), bad, rows
