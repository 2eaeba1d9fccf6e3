"""The Hub read through `datasets` streaming (--hub-reader datasets): the reference for stream order, and what
`fwe bootstrap --hub-reader datasets` copies.

Opening resolves the commit the revision (default main) names, with one HEAD, and reads at that commit: artifacts
and resume states name it, and a resume or a resumed bootstrap reads it again, wherever the branch is by then (or
fails, one line naming it: never another commit).

`datasets` is imported here, lazily: its imports cost more than a local or synthetic run's whole start, so those
runs skip them.
HF_ENDPOINT, HF_HOME and HF_DATASETS_CACHE are honoured by the clients themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

import orjson

from fwe_cli.errors import ConfigError, SourceError
from fwe_cli.loader.documents import Document
from fwe_cli.loader.hub.source import HubSource, iter_hub
from fwe_cli.loader.remote.transient import attempts_note, call_with_retries
from fwe_cli.loader.sources.bad_records import BadRecords, bad_text_reason
from fwe_cli.loader.sources.position import Position
from fwe_cli.loader.sources.records import Records
from fwe_cli.loader.sources.units import Piece, Unit
from fwe_cli.loader.sources.where import Where


def hub_revision(dataset: str, revision: str | None = None) -> str | None:
    """The commit `revision` (a branch, tag or commit sha; None: main) names now: one HEAD of the dataset's card
    (hub.api.head_revision). None offline, or when the Hub answers with an error naming no commit (no such dataset
    or revision: `datasets` then says which). A Hub that cannot be reached (refused, no answer, 5xx after the
    retries) is SourceError at once, the one unreachable line naming the revision (datasets' own client retries a
    refused connection for a minute, a line per retry)."""
    from fwe_cli.loader.hub.api import head_revision
    from fwe_cli.loader.remote.hub_env import offline

    if offline():
        return None
    try:
        return head_revision(dataset, revision or "main")
    except SourceError as exc:
        response = getattr(exc.__cause__, "response", None)
        status = getattr(response, "status_code", None)
        if status is None or status >= 500:
            raise
        return response.headers.get("x-repo-commit") or None


def open_hub_stream(dataset: str, name: str | None, split: str, revision: str | None = None,
                    all_columns: bool = False, where: Where | None = None):
    """Metadata and file listing through `datasets`: returns the streaming IterableDataset.

    Only `text`, `id` and the columns of the row filter `where` are kept unless `all_columns` (a filter's column the
    dataset lacks is a ConfigError naming it); `revision` pins a commit (None: the default branch).
    Transient failures (HTTP 429/5xx, cut connections) are retried: see fwe_cli.transient. A failure is one line
    naming the dataset, the revision and the cause.
    """
    at = f", revision {revision}" if revision else ""
    try:
        from datasets import load_dataset

        stream = call_with_retries(
            lambda: load_dataset(dataset, name=name, split=split, streaming=True, revision=revision),
            f"opening Hub dataset {dataset}")
    except Exception as exc:  # datasets/huggingface_hub raise many types; keep the cause chained
        cause = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SourceError(f"cannot open Hub dataset {dataset!r} (config {name!r}, split {split!r}{at})"
                          f"{attempts_note(exc)}: {cause}") from exc
    columns = stream.column_names
    if columns and "text" not in columns:
        raise SourceError(f"Hub dataset {dataset!r} has no 'text' column (columns: {', '.join(columns)})")
    filter_columns = where.columns if where is not None else ()
    lacking = [c for c in filter_columns if columns and c not in columns]
    if lacking:
        raise ConfigError(f"--where names {lacking[0]!r}, which Hub dataset {dataset!r} (config {name!r}) lacks "
                          f"(its columns: {', '.join(columns)})")
    if columns and not all_columns:
        stream = stream.select_columns(list(dict.fromkeys(c for c in ("text", "id", *filter_columns) if c in columns)))
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


@dataclass(frozen=True, slots=True)
class DatasetsRowPosition(Position, name="datasets_row"):
    """Rows of the `datasets` stream read so far."""

    rows: int


def datasets_rows(stream, rows: int = 0) -> Iterator[tuple[dict, DatasetsRowPosition]]:
    """A `datasets` stream's rows with their position. A stream opened at a position skips that many rows
    (`IterableDataset.skip`, which reads them: the `datasets` reader resumes in O(rows), the native one not)."""
    if rows:
        stream = stream.skip(rows)
    for rows, row in enumerate(stream, start=rows + 1):
        yield row, DatasetsRowPosition(rows)


class HubDatasets(HubSource):
    """Streaming through `datasets`: the same documents in the same order as the native reader; it resumes by
    reading and dropping rows (O(position)), and cannot be shuffled (it is the reference for stream order)."""

    shuffle_refusal = ("--shuffle-seed needs the native Hub reader (the datasets reader is the reference for stream "
                       "order): drop --hub-reader datasets or the shuffle")
    dealing_refusal = ("the datasets Hub reader streams the whole dataset in one process: use the native reader "
                       "(--hub-reader native), which deals each rank and DataLoader worker its own row groups")
    heavy_imports = ("datasets",)
    position_type = DatasetsRowPosition

    @classmethod
    def reads_spec(cls, spec) -> bool:
        return spec.options.hub_reader == "datasets"

    def __init__(self, spec, options):
        super().__init__(spec, options)
        self._resolved = False

    def units(self) -> list[Unit]:
        return [Unit(0, 0, 1, whole=True)]  # the stream, read from its start by one reader

    def read(self, pieces: list[Piece], at: DatasetsRowPosition | None) -> Iterator[tuple[Document,
                                                                                         DatasetsRowPosition, int]]:
        if not pieces:
            return iter(())
        rows = at.rows if at else 0
        line = pieces[0].line
        return iter_hub(((row, after, line) for row, after in datasets_rows(self.datasets_stream(), rows)),
                        self.spec.options.dataset, self.bad, self.options.strict, counted=rows,
                        filtered=self.filtered)

    def open(self, set_stage: Callable[[str], None]) -> None:
        """The commit to read (`revision`), resolved once: one HEAD (none offline)."""
        o = self.spec.options
        set_stage(f"opening source (Hub handshake, metadata and file listing for {o.dataset})")
        if not self._resolved:
            self.revision = hub_revision(o.dataset, o.revision)
            self._resolved = True

    def datasets_stream(self, all_columns: bool = False):
        """The `datasets` stream at the commit `open` resolved (offline: at the spec's revision, the one known).
        SourceError when the Hub answered without naming the commit and `datasets` opened it anyway: a run must
        know what it read."""
        from fwe_cli.loader.remote.hub_env import endpoint, offline

        self.open(lambda stage: None)
        o = self.spec.options
        stream = open_hub_stream(o.dataset, o.name, o.split, self.revision or o.revision, all_columns, self.where)
        if self.revision is None and not offline():
            raise SourceError(f"{endpoint()} did not say which commit {o.dataset}@{o.revision or 'main'} is: "
                              "a run must know the commit it reads, so that a resume reads it again")
        return stream

    def latest_revision(self) -> str | None:
        return hub_revision(self.spec.options.dataset, self.spec.options.revision)

    def records(self, shard, start=None, all_fields=False, bad=None) -> Records:
        return HubRecords(self, shard, start, all_fields, bad)


class HubRecords(Records):
    """Rows of the `datasets` stream at the commit the source resolved; position {"index", "rows", "state"}: rows
    read, and `datasets`' own state_dict when it has one (a resume then skips nothing). A revision that cannot be
    read fails: another commit is never read in its place."""

    def __init__(self, source: HubDatasets, shard, start=None, all_fields=False, bad=None):
        super().__init__(source, shard, start, all_fields, bad)
        self.rows = int(self.start.get("rows", 0))
        self._state = self.start.get("state")
        self._stream = None
        self._stateful = False

    @property
    def revision(self) -> str | None:
        """The commit read (the spec's revision until the source resolved it)."""
        return self.source.revision or self.source.spec.options.revision

    def _open(self) -> None:
        stream = self.source.datasets_stream(all_columns=self.all_fields)
        self.revision_pinned = self.revision is not None
        if self._state is not None:
            try:
                stream.load_state_dict(self._state)
                self._stateful = True
            except Exception:  # a state from another datasets version: fall back to skipping rows
                stream = stream.skip(self.rows)
        elif self.rows:
            stream = stream.skip(self.rows)
        else:
            self._stateful = hasattr(stream, "state_dict")
        self._stream = stream

    def position(self) -> dict:
        state = None
        if self._stateful:
            state = self._stream.state_dict()
            try:
                orjson.dumps(state)
            except TypeError:
                state = None
        return {"index": self.index, "rows": self.rows, "state": state}

    def _records(self) -> Iterator[tuple[dict, None]]:
        spec = self.source.spec.options
        index = self.index
        filtered = self.source.filtered
        for row, rows in hub_rows(self._stream, spec.dataset, self.bad, self.strict, rows=self.rows):
            if filtered is not None and not filtered.passes(row, lambda: f"{spec.dataset}#row{rows}"):
                continue
            owned = self.shard.owns(index)
            index += 1
            if owned:
                self.index, self.rows = index, rows
                yield row, None
