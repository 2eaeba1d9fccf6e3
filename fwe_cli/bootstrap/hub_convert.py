"""Parquet row group -> JSONL lines, for `fwe bootstrap` from the Hub: on the stream's threads (the default), or in
worker processes (`--workers N`), one row group per task.

The lines are exactly what the `datasets` reader path writes for the same rows (fwe_cli/bootstrap/run.py
`encoder`): `--fields text` gives `{"text": ..., "id": ...}` (no `id` key when the row's id is null or absent),
`--fields all` every column in the file's order; orjson, compact, one line per row, `\\n` after each. A row whose
`text` is not a string gives no line: it is reported as (row number in the group, reason).

Decoding runs without pyarrow's own thread pool (`use_threads=False`: for one row group's two columns the pool costs
more CPU than it saves) and releases the GIL, so decode threads overlap the serializing; a worker process returns
its lines joined (one object to pickle). Each thread or worker keeps the last parquet file it opened, so the groups
of one file do not re-read its footer.
"""

from __future__ import annotations

import os
import threading
import time

import orjson

_OPEN = threading.local()
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


def _parquet(path: str, key: str | None):
    import pyarrow.parquet as pq

    held = getattr(_OPEN, "file", None)
    if held is None or held[0] != (path, key):
        held = _OPEN.file = ((path, key), pq.ParquetFile(path))
    return held[1]


def convert_group(path: str, group: int, start_row: int, fields: str, joined: bool = True,
                  key: str | None = None) -> tuple[bytes | list[bytes], list[tuple[int, str]], int]:
    """(the JSONL of the good rows from `start_row` on: one bytes object, or with joined=False the list of lines,
    [(row, reason)] of the bad ones, rows in the group). `key` names this version of the file at `path` (a file
    written again under the same path gets another key), else the path alone does."""
    from fwe_cli.errors import SourceError
    from fwe_cli.loader.files.formats import bad_text_reason

    parquet = _parquet(path, key)
    names = parquet.schema_arrow.names
    if "text" not in names:
        raise SourceError(f"{path}: parquet file has no 'text' column (columns: {', '.join(names)})")
    table = parquet.read_row_group(group, columns=None if fields == "all" else [c for c in ("text", "id")
                                                                                  if c in names],
                                   use_threads=False)
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
    return (b"".join(lines) if joined else lines), bad, rows
