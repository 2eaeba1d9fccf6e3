"""`fwe tokenize` split across tasks: each task writes its spans' shards resumably into OUT/tasks/, the last one to
finish (or `--merge`) links them into OUT, and OUT is then the single run's output byte for byte, read back as the
text path's batches. Tasks of different configurations are refused naming the field.

The killed runs need a process of their own; everything else goes through the command in this process."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import orjson
import pytest

from fwe_cli.errors import OutputError
from fwe_cli.loader import FineWebLoader, resolve_config
from fwe_cli.loader.files.synthetic import synthetic_record
from tests.helpers import invoke, write_jsonl
from tests.tokens.support import TOKENS_OUTPUT, assert_same_output, cli, core_run, manifest_of

SHARD_TOKENS = "5000"  # spans of 80 kB: each file below is a span of its own, written as several shards
DOCS_PER_FILE = (20, 50, 80, 30, 60, 60)


def _files(directory: Path, counts: tuple[int, ...], seed: int = 3) -> Path:
    directory.mkdir(parents=True)
    index = 0
    for number, count in enumerate(counts):
        write_jsonl(directory / f"part-{number:02d}.jsonl", [synthetic_record(seed, index + i) for i in range(count)])
        index += count
    return directory


def _task(split: tuple[int, int]) -> tuple[str, ...]:
    return "--task", str(split[0]), "--tasks", str(split[1])


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """300 synthetic documents in 6 JSONL files of uneven size (about 0.24 M GPT-2 tokens)."""
    return _files(tmp_path_factory.mktemp("src") / "docs", DOCS_PER_FILE)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, source, gpt2_tokenizer_json) -> Path:
    """The single run every split one must end up identical to."""
    out = tmp_path_factory.mktemp("ref") / "out"
    core_run(source, out, gpt2_tokenizer_json, shard_tokens=int(SHARD_TOKENS))
    return out


def _batches(path: Path, **kw) -> np.ndarray:
    config = resolve_config(env={}, local_path=str(path), seq_len=512, batch_size=4, **kw)
    with FineWebLoader(config) as loader:
        return np.stack([np.array(b) for b in loader])


def test_two_tasks_one_killed_and_resumed_merge_into_the_single_runs_shards(tmp_path, source, reference,
                                                                             gpt2_tokenizer_json):
    """Task 0 of 2 is killed (kill -9 after its third shard is renamed), task 1 (from a SLURM array's variables)
    completes and waits for it; task 0 re-run resumes from its last listed shard and, finishing last, merges: OUT's
    shards and indexes are byte-identical to a single run's, its manifest lists the same entries and totals, and
    `fwe smoke --local-path OUT` (like the loader over the whole of OUT) gives the text path's batches."""
    out = tmp_path / "out"
    args = (str(source), "--tokenizer", gpt2_tokenizer_json, "--out", str(out), "--shard-tokens", SHARD_TOKENS)
    killed = TOKENS_OUTPUT.killed_at("shard-renamed:3", *args, *_task((0, 2)), tmp=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    task0 = out / "tasks" / "00000-of-00002"
    before = manifest_of(task0)
    assert before["complete"] is False and len(before["shards"]) == 2 and before["resume"]["next"] is not None

    second = cli(*args, "--json", tmp=tmp_path, env={"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"})
    assert second.exit_code == 0, second.stderr
    waiting = orjson.loads(second.stdout)
    assert waiting["output"] == str(out / "tasks" / "00001-of-00002") and waiting["shards"] >= 4
    assert waiting["merge"]["outcome"] == "waiting" and waiting["merge"]["waiting_for"] == [0]
    assert not (out / "manifest.json").exists()

    resumed = cli(*args, *_task((0, 2)), "--json", tmp=tmp_path)
    assert resumed.exit_code == 0, resumed.stderr
    result = orjson.loads(resumed.stdout)
    assert result["resumed_from_tokens"] == sum(s["tokens"] for s in before["shards"])
    assert result["merge"]["outcome"] == "merged" and result["merge"]["files_linked"] == 2 * result["merge"]["shards"]
    assert len(manifest_of(task0)["shards"]) + waiting["shards"] == len(manifest_of(reference)["shards"])
    assert_same_output(out, reference)

    text = _batches(source, tokenizer=gpt2_tokenizer_json)
    assert np.array_equal(_batches(out), text)
    saved = tmp_path / "merged.npz"
    smoke = invoke("smoke", "--local-path", str(out), "--seq-len", "512", "--batch", "4", "--batches", str(len(text)),
                   "--save-batches", str(saved), "--artifacts-dir", str(tmp_path / "artifacts"))
    assert smoke.exit_code == 0, smoke.stderr
    assert np.array_equal(np.load(saved)["batches"], text)


def test_a_merge_killed_before_its_manifest_is_done_again(tmp_path, source, reference, gpt2_tokenizer_json):
    """`fwe tokenize --merge --out NEW DIR...` killed after linking every shard, before its complete manifest is
    renamed into place, leaves an incomplete manifest; the same command re-run ends identical to a single run."""
    out = tmp_path / "out"
    args = (str(source), "--tokenizer", gpt2_tokenizer_json, "--out", str(out), "--shard-tokens", SHARD_TOKENS)
    for task in (1, 0):
        assert cli(*args, *_task((task, 2)), tmp=tmp_path).exit_code == 0
    merged = tmp_path / "merged"
    dirs = [str(p) for p in sorted((out / "tasks").iterdir())]
    killed = TOKENS_OUTPUT.killed_at("manifest-tmp:2", "--merge", "--out", str(merged), *dirs, tmp=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert manifest_of(merged)["complete"] is False
    again = cli("--merge", "--out", str(merged), *dirs, "--json", tmp=tmp_path)
    assert again.exit_code == 0, again.stderr
    assert orjson.loads(again.stdout)["outcome"] == "merged"
    assert_same_output(merged, reference)
    confirmed = cli("--merge", "--out", str(out), "--json", tmp=tmp_path)  # the last task merged OUT already
    assert confirmed.exit_code == 0 and orjson.loads(confirmed.stdout)["outcome"] == "already_complete"


def test_more_tasks_than_spans_leave_some_tasks_empty(tmp_path):
    """Five tasks over three one-file spans: two tasks have no file and finish with no shard; whichever task ends
    last merges, and OUT equals the single run (byte tokenizer)."""
    source = _files(tmp_path / "src", (40, 40, 40), seed=8)
    reference = tmp_path / "ref"
    core_run(source, reference, "byte", shard_tokens=20_000)
    out = tmp_path / "out"
    results = []
    for task in (4, 0, 2, 3, 1):
        done = cli(str(source), "--tokenizer", "byte", "--out", str(out), "--shard-tokens", "20000", *_task((task, 5)),
                   "--json", tmp=tmp_path)
        assert done.exit_code == 0, done.stderr
        results.append(orjson.loads(done.stdout))
    assert sorted(r["shards"] for r in results)[:2] == [0, 0]
    assert [r["merge"]["outcome"] for r in results] == ["waiting"] * 4 + ["merged"]
    assert_same_output(out, reference)


@pytest.fixture()
def small(tmp_path) -> Path:
    return _files(tmp_path / "small", (15, 15, 15), seed=12)


def _run(small: Path, out: Path, split: tuple[int, int], tmp: Path, *extra: str):
    return cli(str(small), "--tokenizer", "byte", "--out", str(out), "--shard-tokens", "10000", *_task(split), *extra,
               tmp=tmp)


def _one_line(result) -> str:
    """The one error line (a task that ran before its merge was refused printed its progress before it)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_tasks_of_other_arguments_are_refused_naming_the_field(tmp_path, small, gpt2_tokenizer_json):
    """Tasks made with another tokenizer, shard size or task count, or a task missing or unfinished: the merge is
    refused (exit 8) in one line naming the field, and OUT gets no manifest."""
    out = tmp_path / "out"
    assert _run(small, out, (0, 2), tmp_path).exit_code == 0
    other = cli(str(small), "--tokenizer", gpt2_tokenizer_json, "--out", str(out), "--shard-tokens", "10000",
                *_task((1, 2)), tmp=tmp_path)
    assert other.exit_code == 8 and "cannot merge" in _one_line(other) and "tokenizer" in other.stderr
    assert not (out / "manifest.json").exists()

    sized = tmp_path / "sized"
    assert _run(small, sized, (0, 2), tmp_path).exit_code == 0
    refused = cli(str(small), "--tokenizer", "byte", "--out", str(sized), "--shard-tokens", "12000", *_task((1, 2)),
                  tmp=tmp_path)
    assert refused.exit_code == 8 and "--shard-tokens 12000 there, 10000 in the other" in _one_line(refused)

    counts = tmp_path / "counts"
    assert _run(small, counts, (0, 2), tmp_path).exit_code == 0
    assert _run(small, counts, (1, 3), tmp_path).exit_code == 0
    mixed = cli("--merge", "--out", str(counts), tmp=tmp_path)
    assert mixed.exit_code == 8 and "task count 3 there, 2 in the other" in _one_line(mixed)
    missing = cli("--merge", "--out", str(tmp_path / "m"), str(counts / "tasks" / "00000-of-00002"), tmp=tmp_path)
    assert missing.exit_code == 8 and "task 1 of 2 is missing" in _one_line(missing)

    task1 = counts / "tasks" / "00001-of-00002"
    killed = TOKENS_OUTPUT.killed_at("shard-renamed:2", str(small), "--tokenizer", "byte", "--out", str(counts),
                                     "--shard-tokens", "10000", *_task((1, 2)), tmp=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    unfinished = cli("--merge", "--out", str(tmp_path / "u"), str(counts / "tasks" / "00000-of-00002"), str(task1),
                     tmp=tmp_path)
    assert unfinished.exit_code == 8 and "task 1 of 2" in _one_line(unfinished) and "not finished" in unfinished.stderr


def test_a_changed_input_listing_is_refused_naming_the_file(tmp_path, small):
    """A file rewritten between two tasks' runs: the tasks' listings differ, so the last task's merge is refused
    (exit 8) naming the input listing and the file."""
    out = tmp_path / "out"
    assert _run(small, out, (0, 2), tmp_path).exit_code == 0
    last = small / "part-02.jsonl"
    last.write_bytes(last.read_bytes() + orjson.dumps({"text": "one more"}) + b"\n")
    refused = _run(small, out, (1, 2), tmp_path)
    assert refused.exit_code == 8
    assert "input listing" in _one_line(refused) and "part-02.jsonl" in refused.stderr


def test_a_task_that_cannot_take_outs_lock_in_time_says_who_holds_it(tmp_path, small, monkeypatch):
    """The look at the other tasks waits for OUT's lock, but not forever: past its wait it is refused, naming the
    holder's PID (here another process holds the lock throughout)."""
    from fwe_cli.tokens import merge

    out = tmp_path / "out"
    monkeypatch.setattr(merge, "WAIT_S", 0.2)
    with TOKENS_OUTPUT.lock_held_elsewhere(out) as holder:
        with pytest.raises(OutputError, match=f"pid {holder.pid}"):
            merge.merge_when_done(str(out), 2)


def test_a_filesystem_that_cannot_link_gets_copies(tmp_path, small, monkeypatch):
    """Where a hard link is refused (EXDEV: the tasks on another filesystem), the merge copies each shard and index
    instead (fsynced, renamed into place): the same bytes, said in the result."""
    import errno

    from fwe_cli.tokens import merge

    out = tmp_path / "out"
    for task in (0, 1):
        assert _run(small, out, (task, 2), tmp_path).exit_code == 0

    def no_link(source, target):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(merge.os, "link", no_link)
    copied = tmp_path / "copied"
    result = merge.merge_tokens(merge.task_dirs(str(out)), str(copied))
    assert result["files_copied"] == 2 * result["shards"] > 0 and result["files_linked"] == 0
    assert_same_output(copied, out)
