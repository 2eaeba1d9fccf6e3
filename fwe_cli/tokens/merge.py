"""One token output over the outputs of a split run's tasks: the shards a single run would have written, in its order.

    merge_tokens(["OUT/tasks/00000-of-00002", "OUT/tasks/00001-of-00002"], "OUT")   # fwe tokenize --merge
    merge_when_done("OUT", tasks=2)                     # what each task does when it ends: the last one merges

The tasks' shards are already the single run's bytes (tokens/split.py: shards end where spans end, and task i holds
the spans before task i + 1's), so merging writes no token: each shard and index is hard-linked into OUT under its
number in the whole (copied where the filesystem cannot link), then OUT/manifest.json lists them with the sha256
their task recorded (`fwe tokenize --verify --out OUT` re-hashes them). The tasks' outputs stay as they were.

Refused, naming the field (exit 8): tasks made with another tokenizer (name or vocabulary hash), shard size, source
listing (paths, sizes, modification times), task count or span size; a task missing, given twice or unfinished.

Crash-safe like the rest: with OUT's lock held, an incomplete manifest (listing nothing) is written first, so a
merge killed half way is recognised and done again; the links are made under temporary names and renamed; the
complete manifest comes last. The last task to finish merges: each task, once its own manifest says complete,
takes OUT's lock (waiting its turn) and merges when every task's manifest says complete. A task's completion
precedes its look, and the looks take turns, so the last look sees every task complete.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import shutil

from fwe_cli.artifacts import utc_iso
from fwe_cli.errors import OutputError
from fwe_cli.loader.files.token_shards import index_path
from fwe_cli.loader.sources.bad_records import MAX_REPORTED_BAD
from fwe_cli.output import prepare
from fwe_cli.output.faults import NO_FAULTS, Faults
from fwe_cli.output.lock import OutputLock
from fwe_cli.output.manifest_file import fsync_dir, load_manifest, write_manifest
from fwe_cli.output.os_errors import on_output, remove_output, resumable_output_error
from fwe_cli.output.progress_clock import ProgressClock
from fwe_cli.output.verify import listed_file_problems
from fwe_cli.tokens.layout import PARTIAL_SUFFIX, TASKS_DIR, TOKENS, TokensLayout, totals

WAIT_S = 600.0  # a task waits this long for OUT's lock: other tasks' looks and merges take moments
_TASK_RE = re.compile(r"^(\d{5})-of-(\d{5})$")
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK}
# What every task must share with the others, as a refusal names it, and how to read it from a task's manifest.
SAME = (("tokenizer", lambda m: m["tokenizer"].get("name")),
        ("tokenizer vocabulary hash", lambda m: m["tokenizer"].get("vocab_hash")),
        ("--shard-tokens", lambda m: m.get("shard_tokens")),
        ("token dtype", lambda m: m.get("dtype")),
        ("source", lambda m: m["source"].get("path")),
        ("input listing", lambda m: m["source"].get("files")),
        ("--holdout/--holdout-split", lambda m: m["source"].get("holdout")),
        ("task count", lambda m: m["split"].get("tasks")),
        ("span size", lambda m: m["split"].get("span_bytes")))
SPLIT_FIELDS = ("task count", "span size")  # how the work was split, not what the output holds


def task_dirs(out: str, tasks: int | None = None) -> list[str]:
    """The task outputs under OUT/tasks/ (of `tasks` tasks only, when given), in name order."""
    found = []
    for path in sorted(glob.glob(os.path.join(glob.escape(os.path.abspath(out)), TASKS_DIR, "*"))):
        match = _TASK_RE.match(os.path.basename(path))
        if match and os.path.isdir(path) and (tasks is None or int(match.group(2)) == tasks):
            found.append(path)
    return found


def read_parts(dirs: list[str]) -> list[tuple[str, dict | None]]:
    """(directory, its token manifest or None when it has none yet) of each task output."""
    return [(os.path.abspath(d), load_manifest(TokensLayout.for_out(d))) for d in dirs]


def _show(field: str, value: object) -> str:
    if field == "input listing" and isinstance(value, list):
        return f"{len(value)} files ({sum(f.get('bytes', 0) for f in value):,} bytes)"
    return repr(value)


def _listing_difference(a: list, b: list) -> str:
    """The first file two listings disagree on, in a few words."""
    for mine, theirs in zip(a, b):
        if mine != theirs:
            return f"; first difference: {mine.get('path')} ({mine.get('bytes')} bytes, mtime_ns " \
                   f"{mine.get('mtime_ns')}) against {theirs.get('bytes')} bytes, mtime_ns {theirs.get('mtime_ns')}"
    return ""


def check_parts(parts: list[tuple[str, dict | None]]) -> list[tuple[str, dict]]:
    """The parts in task order once they make one whole split run of one configuration; OutputError naming the
    first task or field that does not."""
    if not parts:
        raise OutputError("nothing to merge: no task outputs (OUT/tasks/IIIII-of-NNNNN) given or found")
    for path, manifest in parts:
        if manifest is None:
            raise OutputError(f"{path} holds no token output yet (no manifest.json): run its task first")
        if not isinstance(manifest.get("split"), dict):
            raise OutputError(f"{path} is not a task of a split fwe tokenize (its manifest has no split record): "
                              "merge only the task outputs of one run (OUT/tasks/*)")
    first_path, first = parts[0]
    for path, manifest in parts[1:]:
        for field, read in SAME:
            if read(manifest) != read(first):
                extra = _listing_difference(read(manifest), read(first)) if field == "input listing" else ""
                raise OutputError(f"cannot merge {path} with {first_path}: {field} {_show(field, read(manifest))} "
                                  f"there, {_show(field, read(first))} in the other{extra}; every task of one split "
                                  "must run with the same arguments over the same files")
    tasks = first["split"]["tasks"]
    by_task: dict[int, str] = {}
    for path, manifest in parts:
        task = manifest["split"]["task"]
        if task in by_task:
            raise OutputError(f"task {task} of {tasks} given twice ({by_task[task]} and {path}): give each once")
        by_task[task] = path
    missing = sorted(set(range(tasks)) - set(by_task))
    if missing:
        raise OutputError(f"task {missing[0]} of {tasks} is missing ({len(missing)} in all): run it (fwe tokenize "
                          f"... --task {missing[0]} --tasks {tasks}) or give its directory")
    ordered = sorted(parts, key=lambda part: part[1]["split"]["task"])
    for path, manifest in ordered:
        if not manifest["complete"]:
            raise OutputError(f"task {manifest['split']['task']} of {tasks} ({path}) is not finished "
                              "(complete=false): re-run it to resume it, then merge")
        problems = listed_file_problems(path, {"files": TOKENS.listed(manifest)}, rehash=False)
        if problems:
            raise OutputError(f"task output {path} is damaged: {problems[0]['name']} {problems[0]['problem']}; "
                              f"`fwe tokenize --verify --out {path}` lists the damage; re-run that task with --force")
    return ordered


def merged_manifest(parts: list[tuple[str, dict]]) -> dict:
    """The manifest of the whole (checked parts in task order): the single run's shards, numbered in order."""
    first = parts[0][1]
    shards, bad, examples = [], 0, []
    for _path, manifest in parts:
        for entry in manifest["shards"]:
            name = TokensLayout.shard_name(len(shards))
            shards.append(dict(entry, name=name, index=index_path(name)))
        bad += manifest["bad_records"]["count"]
        examples += manifest["bad_records"]["examples"]
    keep = ("format", "fwe_version", "tokenizer", "vocab_size", "eot", "version", "dtype", "shard_tokens", "header",
            "source")
    split = {key: first["split"][key] for key in ("tasks", "span_bytes", "span_count")}
    return {**{key: first[key] for key in keep}, "complete": True,
            "split": dict(split, merged_from=[{"task": m["split"]["task"], "path": p, "shards": len(m["shards"])}
                                              for p, m in parts]),
            "shards": shards, "totals": totals(shards),
            "bad_records": {"count": bad, "examples": examples[:MAX_REPORTED_BAD]},
            "started": min(m["started"] for _p, m in parts), "finished": utc_iso(), "runs": [], "resume": None}


def _differences(old: dict, new: dict) -> list[str]:
    """What an existing output at OUT was made with that this merge is not (named as a refusal names them)."""
    out = [f"{field} {_show(field, read(old))} there, {_show(field, read(new))} now"
           for field, read in SAME if field not in SPLIT_FIELDS and read(old) != read(new)]
    if not out and old.get("complete") and [s["sha256"] for s in old["shards"]] != [s["sha256"] for s in new["shards"]]:
        out.append("the tasks' shards are not those merged there")
    return out


def _place(source: str, target: str) -> str:
    """`target` made the file `source` is (a hard link, else a copy), under a temporary name then renamed: 'linked'
    or 'copied'."""
    if os.path.exists(target) and os.path.samefile(source, target):
        return "linked"
    partial = target + PARTIAL_SUFFIX
    remove_output(partial)
    try:
        os.link(source, partial)
        how = "linked"
    except OSError as exc:
        if exc.errno not in _NO_LINK:  # only a filesystem that cannot link is copied to
            raise resumable_output_error("link", partial, exc) from None
        with on_output("copy to", partial):
            shutil.copyfile(source, partial)
            with open(partial, "rb+") as handle:
                os.fsync(handle.fileno())
        how = "copied"
    with on_output("rename", target):
        os.replace(partial, target)
    return how


def _merge_locked(layout: TokensLayout, parts: list[tuple[str, dict]], force: bool, faults: Faults) -> dict:
    clock = ProgressClock()
    merged = merged_manifest(parts)
    existing = prepare.prepare_output(layout, force, lambda old: _differences(old, merged))
    counts = {"linked": 0, "copied": 0}
    if existing is not None and existing["complete"]:
        outcome, merged = "already_complete", existing
    else:
        write_manifest(layout, dict(merged, complete=False, shards=[], totals=totals([]), finished=None,
                                    resume={"merge": True}), before_rename=lambda: faults.reached("manifest-tmp"))
        entries = iter(merged["shards"])
        for path, manifest in parts:
            for shard, entry in zip(manifest["shards"], entries):
                for name, number in ((shard["name"], entry["name"]), (shard["index"], entry["index"])):
                    counts[_place(os.path.join(path, name), os.path.join(layout.out, number))] += 1
        fsync_dir(layout.out)
        merged["runs"] = [{"merged": utc_iso(), "tasks": len(parts), **counts}]
        write_manifest(layout, merged, before_rename=lambda: faults.reached("manifest-tmp"))
        outcome = "merged"
    return {"ok": True, "complete": True, "outcome": outcome, "output": layout.out,
            "manifest_path": layout.manifest_path, "tokenizer": merged["tokenizer"], "tasks": len(parts),
            **merged["totals"], "files_linked": counts["linked"], "files_copied": counts["copied"],
            "seconds": round(clock.elapsed(), 3), "bad_records": merged["bad_records"], "manifest": merged}


def merge_tokens(dirs: list[str], out: str, force: bool = False, faults: Faults | None = None) -> dict:
    """`fwe tokenize --merge`: the task outputs `dirs` (none: every one under OUT/tasks/) merged into `out`;
    OutputError naming what keeps them from being one run's."""
    layout = TokensLayout.for_out(out)
    parts = check_parts(read_parts(dirs or task_dirs(out)))
    with OutputLock(layout):
        return _merge_locked(layout, parts, force, faults or Faults.from_env())


def merge_when_done(out: str, tasks: int, faults: Faults = NO_FAULTS) -> dict:
    """What a task does once its own output is complete: with OUT's lock (waiting its turn), merge every task's
    output into OUT when all `tasks` are complete; else say which it waits for."""
    layout = TokensLayout.for_out(out)
    with OutputLock(layout, wait_s=WAIT_S):
        parts = read_parts(task_dirs(out, tasks))
        done = {m["split"]["task"] for _p, m in parts if m is not None and m["complete"] and "split" in m}
        waiting = sorted(set(range(tasks)) - done)
        if waiting:
            return {"outcome": "waiting", "output": layout.out, "waiting_for": waiting[:20],
                    "waiting_count": len(waiting)}
        return _merge_locked(layout, check_parts(parts), False, faults)
