"""Benchmark (issue #14): what a resume costs at the start of a source and deep into it.

    python -m scripts.bench.resume                           # 200 MB local JSONL, 3 reps
    python -m scripts.bench.resume --mb 500 --reps 5 --workdir /nvme/tmp --out artifacts/bench

The source is FineWeb-Edu-shaped synthetic JSONL (--mb, in 8 files), generated once into --workdir and reused. One
loader run walks it to 90 % and saves `state_dict()` there (not timed); a state at the start is saved after one
batch. Then, per rep and interleaved so machine noise hits every contender alike, each in a fresh process
(`fwe smoke --resume-state STATE --batches 1`, whole process from spawn to exit, and its own first_batch_s):
- resume_start   resuming after the first batch
- resume_deep    resuming at 90 % of the source
and, in-process, the alternative a loader without positions has:
- skip_deep      a fresh loader pulling and dropping batches up to the same 90 % point
The claim: resume_deep costs the same as resume_start (O(1) in the position), and its first batch far less than
skip_deep (which, with the byte tokenizer used here, is mostly reading; with GPT-2 it would also tokenize). Writes
artifacts/bench/resume-<UTC>.json; figures are medians with every rep listed, plus the load average.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson

from fwe_cli.artifacts import utc_iso
from scripts.bench import harness
from scripts.bench.corpus import synthetic_records, write_jsonl
from scripts.bench.harness import median, say

NAME = "resume"
FILES = 8
SEQ_LEN, BATCH = 1024, 8


def make_source(directory: Path, mb: float) -> Path:
    """FILES JSONL files of synthetic records, ~mb MB in all (kept: a later run reuses them)."""
    done = directory.parent / "source-complete.json"  # beside it: a .json inside would be read as a source file
    if done.exists() and json.loads(done.read_text()).get("mb") == mb:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    records = synthetic_records(1)  # one stream across the files: part1 goes on where part0 ended
    documents = sum(write_jsonl(directory / f"part{n}.jsonl", records, mb * 1e6 / FILES)[1] for n in range(FILES))
    done.write_text(json.dumps({"mb": mb, "documents": documents}))
    return directory


def config(source: Path, **kw):
    from fwe_cli.loader import resolve_config

    return resolve_config(env={}, local_path=str(source), tokenizer="byte", seq_len=SEQ_LEN, batch_size=BATCH, **kw)


def walk(source: Path, batches: int | None) -> tuple[dict, int, float]:
    """(state after `batches` batches, or after 90 % of the stream when None; batches pulled; seconds)."""
    from fwe_cli.loader import FineWebLoader

    t0 = time.perf_counter()
    with FineWebLoader(config(source)) as loader:
        total = batches
        if total is None:
            size = sum(p.stat().st_size for p in source.glob("*.jsonl"))
            total = int(0.9 * size / (SEQ_LEN * BATCH))  # byte tokenizer: one id per byte (and one per document)
        for _ in range(total):
            loader.next_batch()
        return loader.state_dict(), total, time.perf_counter() - t0


def resume_run(source: Path, state_path: Path, artifacts: Path) -> dict:
    args = [sys.executable, "-m", "fwe_cli", "smoke", "--local-path", str(source), "--tokenizer", "byte",
            "--seq-len", str(SEQ_LEN), "--batch", str(BATCH), "--batches", "1", "--json",
            "--resume-state", str(state_path), "--artifacts-dir", str(artifacts)]
    wall, proc = harness.run_timed(args)
    if proc.returncode != 0:
        raise SystemExit(f"resume run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return {"wall_s": round(wall, 4), "first_batch_s": round(orjson.loads(proc.stdout)["first_batch_s"], 4)}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--mb", type=float, default=200.0, help="Source size in MB (default 200).")
    parser.add_argument("--reps", type=int, default=3, help="Interleaved repetitions (default 3).")
    parser.add_argument("--workdir", default=None, help="Where the source and states live (default: a temp dir).")
    return parser


def main(argv: list[str] | None = None) -> int:
    bench_parser = parser()
    args = harness.parse(bench_parser, argv)
    if args.mb <= 0 or args.reps < 1:
        bench_parser.error("--mb must be > 0 and --reps >= 1")
    started = utc_iso()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="fwe-bench-resume-"))
    load_before = os.getloadavg()
    say(f"source: {args.mb:g} MB of JSONL in {work / 'source'}")
    source = make_source(work / "source", args.mb)
    states = {}
    for name, batches in (("start", 1), ("deep", None)):
        state, pulled, seconds = walk(source, batches)
        (work / f"{name}.json").write_bytes(orjson.dumps(state))
        states[name] = {"batches": pulled, "walk_s": round(seconds, 3), "position": state["position"]}
        say(f"state {name}: after {pulled} batches")
    runs = harness.interleaved(args.reps, {
        "resume_start": lambda rep: resume_run(source, work / "start.json", work / "artifacts"),
        "resume_deep": lambda rep: resume_run(source, work / "deep.json", work / "artifacts"),
        "skip_deep": lambda rep: {"wall_s": round(walk(source, states["deep"]["batches"] + 1)[2], 4)},
    }, rotate=False, after_rep=lambda rep, done: say(
        f"rep {rep}: " + ", ".join(f"{k} {v[-1]['wall_s']} s" for k, v in done.items())))
    med = {k: median(r["wall_s"] for r in v) for k, v in runs.items()}
    fb = {k: median(r["first_batch_s"] for r in v) for k, v in runs.items() if k.startswith("resume")}
    result = {
        "kind": "bench_resume", "started": started, "mb": args.mb, "files": FILES, "seq_len": SEQ_LEN,
        "batch": BATCH, "reps": args.reps, "states": states, "runs": runs,
        "median_wall_s": med, "median_first_batch_s": fb,
        "ratios": {"resume_deep_over_resume_start": harness.ratio(med["resume_deep"], med["resume_start"]),
                   # the loader's own time to its first batch after a deep resume, against the time a loader
                   # without positions spends reaching the same batch (both in the loader, no process start-up)
                   "resume_deep_first_batch_over_skip_deep": harness.ratio(fb["resume_deep"], med["skip_deep"], 4)},
        "load_avg": {"before": load_before, "after": os.getloadavg()},
    }
    harness.write_result(NAME, args, result, str(work))
    say(f"first batch after resuming: {fb['resume_start']} s at the start, {fb['resume_deep']} s at 90 %, against "
        f"{med['skip_deep']} s to pull and drop the batches up to there")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
