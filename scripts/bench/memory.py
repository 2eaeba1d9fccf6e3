"""Benchmark (issue 32): does memory grow with the steps of a run? Peak RSS of a short and a long run of tiny batches
of a FineWebLoader in-process and of a whole `fwe smoke`, and the difference: whatever a run keeps per step shows
in it (a week-long training run would keep it all).

    python -m scripts.bench.memory [--batches 20000,400000] [--reps 1] [--out artifacts/bench]

Contenders, each run a fresh process (its own peak RSS, from the kernel's accounting of that one child: os.wait4,
Linux's ru_maxrss in KiB), synthetic source, byte tokenizer, --seq-len 16 --batch 1, defaults otherwise:
  loader  `python -c "...loader_run(N)"`: a FineWebLoader pulls N batches in the process, then `stats()`
  smoke   `python -m fwe_cli smoke --source synthetic --tokenizer byte --seq-len 16 --batch 1 --batches N --json`
          (without --save-batches, which keeps the batches it saves)
Runs are interleaved (every contender and count once per rep, the order rotating). Figures: peak RSS in MB per
contender and batch count (median over --reps, every run listed) and growth_mb = the median peak at the largest
count less the one at the smallest; `pass` when each growth is <= GROWTH_LIMIT_MB (5 MB, issue 32's acceptance).
Exit 0 when every run succeeded and pulled its batches (the verdict is in the JSON), 1 otherwise, 2: bad usage.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time

import orjson

from scripts.bench import harness
from scripts.bench.harness import REPO_ROOT, median, say, spread

NAME = "memory"
GROWTH_LIMIT_MB = 5.0
SHAPE = ["--source", "synthetic", "--tokenizer", "byte", "--seq-len", "16", "--batch", "1"]
RUN_TIMEOUT_S = 3600.0


def loader_run(batches: int) -> None:
    """The loader contender's child: a FineWebLoader pulls `batches` batches, stats() is taken, and the steps it
    counted go to stdout as JSON."""
    from fwe_cli.loader import FineWebLoader, resolve_config

    config = resolve_config(env={}, source="synthetic", tokenizer="byte", seq_len=16, batch_size=1)
    with FineWebLoader(config) as loader:
        for _ in range(batches):
            loader.next_batch()
        stats = loader.stats()
    print(orjson.dumps({"batches": stats["steps"], "ok": stats["steps"] == batches}).decode(), flush=True)


def command(contender: str, batches: int, artifacts: str) -> list[str]:
    if contender == "loader":
        return [sys.executable, "-c", f"from scripts.bench.memory import loader_run; loader_run({batches})"]
    return [sys.executable, "-m", "fwe_cli", "smoke", *SHAPE, "--batches", str(batches), "--json",
            "--timeout", f"{RUN_TIMEOUT_S:g}", "--artifacts-dir", artifacts]


def peak_run(cmd: list[str], timeout: float = RUN_TIMEOUT_S) -> dict:
    """Run `cmd` from the repository root (harness.child_env) and wait for it with os.wait4, which gives that one
    child's resource usage: {rc, wall_s, peak_rss_mb, result (its stdout as JSON, or None), stderr_tail}."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=harness.child_env(), cwd=REPO_ROOT)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read().decode(errors="replace")
    try:
        result = orjson.loads(stdout)
    except orjson.JSONDecodeError:
        result = None
    return {"rc": proc.returncode, "wall_s": round(wall, 3), "peak_rss_mb": round(usage.ru_maxrss / 1024, 2),
            "result": result, "stderr_tail": stderr.strip().splitlines()[-1:] if proc.returncode else []}


def one_run(contender: str, batches: int, artifacts: str) -> dict:
    run = peak_run(command(contender, batches, artifacts))
    result = run.pop("result") or {}
    run["ok"] = run["rc"] == 0 and result.get("ok") is True and result.get("batches") == batches
    return run


def growth(peaks: dict[int, list[dict]]) -> float | None:
    """The median peak at the largest batch count less the one at the smallest (MB)."""
    low, high = min(peaks), max(peaks)
    first, last = median(r["peak_rss_mb"] for r in peaks[low]), median(r["peak_rss_mb"] for r in peaks[high])
    return None if first is None or last is None else round(last - first, 2)


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--batches", default="20000,400000",
                        help="comma-separated batch counts (the growth is the largest's peak less the smallest's)")
    parser.add_argument("--reps", type=int, default=1, help="interleaved repetitions")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    counts = sorted({int(n) for n in args.batches.split(",")})
    if len(counts) < 2 or counts[0] < 1:
        parser().error(f"--batches needs two or more positive counts, got {args.batches}")
    artifacts = tempfile.mkdtemp(prefix="fwe_bench_memory_")
    contenders = {f"{name}@{n}": (lambda rep, name=name, n=n: one_run(name, n, artifacts))
                  for name in ("loader", "smoke") for n in counts}
    runs = harness.interleaved(args.reps, contenders, after_rep=lambda rep, done: say(
        f"rep {rep + 1}/{args.reps}: " + ", ".join(f"{key} {done[key][-1]['peak_rss_mb']:.1f} MB" for key in done)))
    figures: dict = {}
    for name in ("loader", "smoke"):
        peaks = {n: runs[f"{name}@{n}"] for n in counts}
        figures[name] = {
            "peak_rss_mb": {str(n): spread([r["peak_rss_mb"] for r in peaks[n]], 2) for n in counts},
            "wall_s": {str(n): median((r["wall_s"] for r in peaks[n]), 3) for n in counts},
            "growth_mb": growth(peaks), "runs": {str(n): peaks[n] for n in counts}}
    all_ok = all(r["ok"] for done in runs.values() for r in done)
    passed = all_ok and all(f["growth_mb"] is not None and f["growth_mb"] <= GROWTH_LIMIT_MB for f in figures.values())
    harness.write_result(NAME, args, {
        "settings": {"shape": " ".join(SHAPE), "batches": counts, "reps": args.reps},
        "commands": {name: " ".join(command(name, counts[-1], "DIR")) for name in ("loader", "smoke")},
        "contenders": figures, "growth_limit_mb": GROWTH_LIMIT_MB, "all_runs_ok": all_ok, "pass": passed})
    for name, entry in figures.items():
        peaks = ", ".join(f"{n}: {entry['peak_rss_mb'][str(n)]['median']:.1f} MB" for n in counts)
        say(f"{name:>6}: peak RSS {peaks}; growth {entry['growth_mb']} MB (limit {GROWTH_LIMIT_MB:g})")
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
