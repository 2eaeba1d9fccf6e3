#!/usr/bin/env python3
"""Benchmark (issue #14): what a resume costs at the start of a source and deep into it.

    python scripts/bench_resume.py                           # 200 MB local JSONL, 3 reps
    python scripts/bench_resume.py --mb 500 --reps 5 --workdir /nvme/tmp --out artifacts/bench_resume.json

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
the JSON to --out and prints it; figures are medians with every rep listed, plus the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from fwe_cli.artifacts import provenance, utc_iso, write_json  # noqa: E402
from fwe_cli.loader import FineWebLoader, resolve_config  # noqa: E402
from fwe_cli.loader.sources.synthetic import synthetic_record  # noqa: E402

FILES = 8
SEQ_LEN, BATCH = 1024, 8


def make_source(directory: Path, mb: float) -> Path:
    """FILES JSONL files of synthetic records, ~mb MB in all (kept: a later run reuses them)."""
    done = directory.parent / "source-complete.json"  # beside it: a .json inside would be read as a source file
    if done.exists() and json.loads(done.read_text()).get("mb") == mb:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    target, index = mb * 1e6 / FILES, 0
    for n in range(FILES):
        with open(directory / f"part{n}.jsonl", "wb") as handle:
            written = 0
            while written < target:
                line = orjson.dumps(synthetic_record(1, index)) + b"\n"
                handle.write(line)
                written += len(line)
                index += 1
    done.write_text(json.dumps({"mb": mb, "documents": index}))
    return directory


def config(source: Path, **kw):
    return resolve_config(env={}, local_path=str(source), tokenizer="byte", seq_len=SEQ_LEN, batch_size=BATCH, **kw)


def walk(source: Path, batches: int | None) -> tuple[dict, int, float]:
    """(state after `batches` batches, or after 90 % of the stream when None; batches pulled; seconds)."""
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
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, cwd=ROOT, timeout=600)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"resume run failed (exit {proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return {"wall_s": round(wall, 4), "first_batch_s": round(orjson.loads(proc.stdout)["first_batch_s"], 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=200.0, help="Source size in MB (default 200).")
    parser.add_argument("--reps", type=int, default=3, help="Interleaved repetitions (default 3).")
    parser.add_argument("--workdir", default=None, help="Where the source and states live (default: a temp dir).")
    parser.add_argument("--out", default="artifacts/bench_resume.json", help="Where to write the JSON.")
    args = parser.parse_args()
    if args.mb <= 0 or args.reps < 1:
        parser.error("--mb must be > 0 and --reps >= 1")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="fwe-bench-resume-"))
    load_before = os.getloadavg()
    print(f"source: {args.mb:g} MB of JSONL in {work / 'source'}", file=sys.stderr)
    source = make_source(work / "source", args.mb)
    states = {}
    for name, batches in (("start", 1), ("deep", None)):
        state, pulled, seconds = walk(source, batches)
        (work / f"{name}.json").write_bytes(orjson.dumps(state))
        states[name] = {"batches": pulled, "walk_s": round(seconds, 3), "position": state["position"]}
        print(f"state {name}: after {pulled} batches", file=sys.stderr)
    runs = {"resume_start": [], "resume_deep": [], "skip_deep": []}
    for rep in range(args.reps):
        for name in ("start", "deep"):
            runs[f"resume_{name}"].append(resume_run(source, work / f"{name}.json", work / "artifacts"))
        _, pulled, seconds = walk(source, states["deep"]["batches"] + 1)
        runs["skip_deep"].append({"wall_s": round(seconds, 4)})
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]['wall_s']} s" for k, v in runs.items()), file=sys.stderr)
    med = {k: statistics.median(r["wall_s"] for r in v) for k, v in runs.items()}
    fb = {k: statistics.median(r["first_batch_s"] for r in v) for k, v in runs.items() if k.startswith("resume")}
    result = {
        "kind": "bench_resume", "started": utc_iso(), "mb": args.mb, "files": FILES, "seq_len": SEQ_LEN,
        "batch": BATCH, "reps": args.reps, "states": states, "runs": runs,
        "median_wall_s": med, "median_first_batch_s": fb,
        "ratios": {"resume_deep_over_resume_start": round(med["resume_deep"] / med["resume_start"], 3),
                   # the loader's own time to its first batch after a deep resume, against the time a loader
                   # without positions spends reaching the same batch (both in the loader, no process start-up)
                   "resume_deep_first_batch_over_skip_deep": round(fb["resume_deep"] / med["skip_deep"], 4)},
        "load_avg": {"before": load_before, "after": os.getloadavg()}, **provenance(str(work)),
    }
    write_json(args.out, result)
    print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
