"""How `fwe tokenize` splits its input by file across a launcher's tasks, so that N tasks write the shards one run
writes.

    split = resolve_split(task=None, tasks=None, env=os.environ)  # --task/--tasks > SLURM array > torchrun > one task
    plan = SpanPlan.of(source["files"], shard_tokens, split)       # this task's spans of the listing

The unit of work is a *span*: consecutive files of the source listing (whole files, in listing order), closed once
they hold SPAN_SHARDS x --shard-tokens bytes; a file larger than that is a span of its own. Every run, of one task or
of many, closes a shard where a span ends (besides where the next document would not fit), so each span's shards
are the same bytes whichever task writes them: a span is read from its first document with nothing carried over.
Only the shards' numbers depend on the task; the merge (tokens/merge.py) numbers them in the whole. The spans
depend on the listing (sizes) and --shard-tokens only, never on the task count.

Task i of N takes the spans whose middle byte lies in the i-th N-th of the listing's bytes: contiguous, balanced by
bytes and in listing order, so the tasks' shards, task after task, are the single run's shards in order. A task
with no span (more tasks than spans) writes a complete output of no shards. Its output is `OUT/tasks/IIIII-of-NNNNN/`
(one task: OUT itself).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from fwe_cli.errors import ConfigError
from fwe_cli.hostinfo import node_share
from fwe_cli.loader.shard import slurm_shard
from fwe_cli.loader.sources.deal import Share, Span
from fwe_cli.tokens.layout import TASKS_DIR

SPAN_SHARDS = 16  # a span holds about this many shards' worth of text bytes: its last, short shard is rare
MAX_TASKS = 99_999  # the task directories' names hold five digits
ORIGINS = ("flags", "slurm-array", "torchrun", "default")
TORCHRUN = ("RANK", "WORLD_SIZE")
_PLAIN = (".jsonl", ".json", ".txt", ".ndjson")  # formats whose resume offset is a byte offset of the file


@dataclass(frozen=True)
class TaskSplit:
    """Which task of how many this run is, and where that came from."""

    task: int = 0
    tasks: int = 1
    origin: str = "default"
    """'flags' (--task/--tasks), 'slurm-array' (SLURM_ARRAY_TASK_ID/COUNT), 'torchrun' (RANK/WORLD_SIZE), 'default'."""

    def __post_init__(self) -> None:
        if not isinstance(self.tasks, int) or isinstance(self.tasks, bool) or not 1 <= self.tasks <= MAX_TASKS:
            raise ConfigError(f"--tasks must be an integer from 1 to {MAX_TASKS}, got {self.tasks!r}")
        if not isinstance(self.task, int) or isinstance(self.task, bool) or not 0 <= self.task < self.tasks:
            raise ConfigError(f"--task must be an integer from 0 to {self.tasks - 1} (one of --tasks {self.tasks}), "
                              f"got {self.task!r}")
        if self.origin not in ORIGINS:
            raise ConfigError(f"a task split's origin must be one of {', '.join(ORIGINS)}, got {self.origin!r}")

    @property
    def name(self) -> str:
        """The task's directory under OUT/tasks/: '00003-of-00016'."""
        return f"{self.task:05d}-of-{self.tasks:05d}"

    def out(self, out: str) -> str:
        """Where this task writes: OUT for one task, else OUT/tasks/<name>/."""
        return out if self.tasks == 1 else os.path.join(out, TASKS_DIR, self.name)

    def describe(self) -> str:
        return "one task" if self.tasks == 1 else f"task {self.task} of {self.tasks}, from {self.origin}"


def resolve_split(task: int | None, tasks: int | None, env: Mapping[str, str]) -> TaskSplit:
    """The split of this run: --task/--tasks when given (both), else a SLURM array's task, else torchrun's
    RANK/WORLD_SIZE, else one task. ConfigError naming the flags or variables that are wrong."""
    if task is not None or tasks is not None:
        if task is None or tasks is None:
            raise ConfigError("--task and --tasks go together (task I of N): give both, or neither to take them from "
                              "SLURM_ARRAY_TASK_ID/COUNT or RANK/WORLD_SIZE")
        return TaskSplit(task, tasks, "flags")
    array = slurm_shard(env, "--task/--tasks")
    if array is not None:
        return TaskSplit(array.rem, array.mod, "slurm-array")
    from fwe_cli.loader.shard import rank_from_env  # its parsing and messages, for torchrun's pair only

    launched = rank_from_env({var: env[var] for var in TORCHRUN if var in env})
    if launched is not None:
        return TaskSplit(launched[1].rem, launched[1].mod, "torchrun")
    return TaskSplit()


def task_threads(split: TaskSplit, env: Mapping[str, str]) -> int | None:
    """Encoding threads for a task torchrun started beside others on its node (LOCAL_WORLD_SIZE of them): its
    share of the cores (hostinfo.node_share); None (one per core) otherwise."""
    if split.origin != "torchrun" or not env.get("LOCAL_WORLD_SIZE", "").strip():
        return None
    return node_share(env)


def span_bytes(shard_tokens: int) -> int:
    return SPAN_SHARDS * shard_tokens


def file_spans(sizes: list[int], limit: int) -> list[tuple[int, int]]:
    """[lo, hi) file ranges of consecutive files, each closed once it holds `limit` bytes (the last one may hold
    fewer); together they cover every file once, in order."""
    spans, lo, held = [], 0, 0
    for number, size in enumerate(sizes):
        held += size
        if held >= limit:
            spans.append((lo, number + 1))
            lo, held = number + 1, 0
    if lo < len(sizes):
        spans.append((lo, len(sizes)))
    return spans


def task_spans(spans: list[tuple[int, int]], sizes: list[int], split: TaskSplit) -> tuple[int, int]:
    """[first, end) of the spans `split`'s task takes: those whose middle byte lies in its N-th of all the bytes
    (empty, at its place in the order, when there are none)."""
    total = sum(sizes)
    owners, before = [], 0
    for lo, hi in spans:
        size = sum(sizes[lo:hi])
        owners.append(min(split.tasks - 1, (2 * before + size) * split.tasks // (2 * total)) if total else 0)
        before += size
    return sum(o < split.task for o in owners), sum(o <= split.task for o in owners)


@dataclass(frozen=True)
class SpanPlan:
    """The spans of a listing and the range of them one task reads."""

    files: tuple[dict, ...]
    """The listing: fingerprint entries ({path, bytes, ...}) of the source's files."""
    spans: tuple[tuple[int, int], ...]
    first: int
    end: int
    span_bytes: int

    @classmethod
    def of(cls, files: list[dict], shard_tokens: int, split: TaskSplit) -> "SpanPlan":
        sizes = [int(f["bytes"]) for f in files]
        spans = file_spans(sizes, span_bytes(shard_tokens))
        first, end = task_spans(spans, sizes, split)
        return cls(tuple(files), tuple(spans), first, end, span_bytes(shard_tokens))

    def record(self, split: TaskSplit) -> dict:
        """The manifest's `split`: what a resume and the merge compare."""
        return {"task": split.task, "tasks": split.tasks, "origin": split.origin, "span_bytes": self.span_bytes,
                "span_count": len(self.spans), "spans": [self.first, self.end]}

    def _bytes(self, lo: int, hi: int) -> int:
        return sum(int(f["bytes"]) for f in self.files[lo:hi])

    @property
    def task_bytes(self) -> int:
        """Source bytes of this task's files."""
        return self._bytes(*self._file_range(self.first, self.end))

    def _file_range(self, first: int, end: int) -> tuple[int, int]:
        if first >= end:
            return 0, 0
        return self.spans[first][0], self.spans[end - 1][1]

    def share(self, span: int) -> Share:
        """What reads span `span`'s files whole, in order: the stretch of the source's unshuffled line they make
        (a unit a file, its extent its bytes: fwe tokenize takes no row filter)."""
        lo, hi = self.spans[span]
        return Share(0, ((Span(self._bytes(0, lo), self._bytes(0, hi)),),))

    def done_bytes(self, span: int, resume=None) -> int:
        """This task's source bytes before a document of `span` (its `resume`, a cursor; None: the span's start).
        Progress only: exact for plain JSONL/TXT, file-granular otherwise."""
        start = self._file_range(self.first, self.end)[0]
        lo = self.spans[span][0]
        done = self._bytes(start, lo)
        at = resume.window.end_at if resume is not None else None
        if at is not None:
            number, offset = at.file, at.offset
            done += self._bytes(lo, number)
            if number < len(self.files) and self.files[number]["path"].endswith(_PLAIN):
                done += min(offset, int(self.files[number]["bytes"]))
        return done
