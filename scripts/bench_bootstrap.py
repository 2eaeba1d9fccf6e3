#!/usr/bin/env python3
"""Benchmark `fwe bootstrap`: a local JSONL source against `cp` of the same bytes, and the synthetic source.

    python scripts/bench_bootstrap.py                        # 256 MB source, 5 reps
    python scripts/bench_bootstrap.py --mb 1024 --reps 3 --workdir /nvme/tmp

Writes artifacts/bench/bootstrap-<UTC timestamp>.json (and prints it). Per rep, interleaved so machine noise
hits every contender alike, and reported as medians (MB/s of source bytes):
- cp            `cp SRC DST` (coreutils: in-kernel copy, page cache to page cache, nothing forced to disk)
- cp_fsync      the same, then fsync of the copy: the guarantee bootstrap gives (output on disk when done)
- local_all     run_bootstrap(--local-path SRC --fields all): every line parsed and checked, copied as is,
                sha256'd, fsynced
- local_text    the same with --fields text (each record re-encoded as {"text", "id"})
- cold_cp, cold_local_all   cp and local_all with SRC first dropped from the page cache
                (posix_fadvise DONTNEED): the source read from disk, as when staging data not yet in RAM
and once: synthetic (--source synthetic; bound by generating the text on one core).
Also measured on the same bytes, for context: sha256 alone and JSON parsing alone (one core each) -- the
floor of any copy that must check and hash every record. The target: local_all >= 0.25 x cp; the
JSON gives the ratio against every cp variant, with the load average (other processes share the machine).

The source is FineWeb-Edu-shaped synthetic records (all ten fields, ~3.5 KB a line), generated once into
--workdir and reused.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import fwe_cli  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import orjson  # noqa: E402

from fwe_cli.artifacts import provenance, utc_stamp, write_json  # noqa: E402
from fwe_cli.bootstrap.config import bootstrap_config  # noqa: E402
from fwe_cli.bootstrap.run import run_bootstrap  # noqa: E402
from fwe_cli.loader.sources.synthetic import synthetic_record  # noqa: E402

TARGET_RATIO = 0.25


def make_source(path: str, size: int) -> int:
    if os.path.isfile(path) and os.path.getsize(path) >= size:
        return os.path.getsize(path)
    written, index = 0, 0
    with open(path + ".tmp", "wb") as handle:
        while written < size:
            line = orjson.dumps(synthetic_record(1, index), option=orjson.OPT_APPEND_NEWLINE)
            handle.write(line)
            written += len(line)
            index += 1
    os.replace(path + ".tmp", path)
    return written


def drop_from_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def floors(src: str) -> dict:
    """MB/s of sha256 alone and of orjson parsing alone over the source (page cache), one core each."""
    data = open(src, "rb").read()
    t0 = time.perf_counter()
    hashlib.sha256(data).digest()
    sha = len(data) / 1e6 / (time.perf_counter() - t0)
    lines = data.splitlines()
    t0 = time.perf_counter()
    for line in lines:
        orjson.loads(line)
    parse = len(data) / 1e6 / (time.perf_counter() - t0)
    return {"sha256_mb_per_s": round(sha, 1), "json_parse_mb_per_s": round(parse, 1)}


def time_cp(src: str, dst: str, fsync: bool, cold: bool = False) -> float:
    if cold:
        drop_from_cache(src)
    t0 = time.perf_counter()
    subprocess.run(["cp", src, dst], check=True)
    if fsync:
        fd = os.open(dst, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    seconds = time.perf_counter() - t0
    os.remove(dst)
    return seconds


def time_bootstrap(out: str, cold_source: str | None = None, **flags) -> tuple[float, dict]:
    shutil.rmtree(out, ignore_errors=True)
    if cold_source:
        drop_from_cache(cold_source)
    t0 = time.perf_counter()
    result = run_bootstrap(bootstrap_config(out=out, **flags))
    seconds = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    return seconds, result


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1), "runs": [round(v, 1) for v in values]}


def interleaved_reps(src: str, size: int, workdir: str, reps: int) -> tuple[dict[str, list[float]], int]:
    """MB/s of every contender per rep, one after the other within a rep; and the --fields text output size."""
    out, dst = os.path.join(workdir, "out"), os.path.join(workdir, "cp.jsonl")
    gb = 2 * size / 1e9  # more than the source: it is read to the end
    speeds: dict[str, list[float]] = {k: [] for k in ("cp", "cp_fsync", "local_all", "local_text", "cold_cp",
                                                      "cold_local_all")}
    text_out_bytes = 0
    for rep in range(reps):
        speeds["cp"].append(size / 1e6 / time_cp(src, dst, fsync=False))
        speeds["cp_fsync"].append(size / 1e6 / time_cp(src, dst, fsync=True))
        seconds, result = time_bootstrap(out, gb=gb, local_path=src, fields="all")
        assert result["bytes"] == size, "fields=all must copy every byte of the source"
        speeds["local_all"].append(size / 1e6 / seconds)
        seconds, result = time_bootstrap(out, gb=gb, local_path=src, fields="text")
        speeds["local_text"].append(size / 1e6 / seconds)
        text_out_bytes = result["bytes"]
        speeds["cold_cp"].append(size / 1e6 / time_cp(src, dst, fsync=False, cold=True))
        seconds, _ = time_bootstrap(out, cold_source=src, gb=gb, local_path=src, fields="all")
        speeds["cold_local_all"].append(size / 1e6 / seconds)
        print(f"rep {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1]:.0f} MB/s" for k, v in speeds.items()),
              file=sys.stderr)
    return speeds, text_out_bytes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=256, help="size of the local JSONL source in MB (default 256)")
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions (default 5)")
    parser.add_argument("--synthetic-mb", type=float, default=40, help="size of the synthetic run in MB (default 40)")
    parser.add_argument("--workdir", help="where the source and outputs go (default: a temporary directory)")
    parser.add_argument("--artifacts-dir", default="artifacts")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="fwe-bench-bootstrap-")
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, "source.jsonl")
    print(f"preparing {args.mb:g} MB source in {workdir} ...", file=sys.stderr)
    size = make_source(src, int(args.mb * 1e6))
    out = os.path.join(workdir, "out")
    load_before = os.getloadavg()
    speeds, text_out_bytes = interleaved_reps(src, size, workdir, args.reps)
    synth_seconds, synth = time_bootstrap(out, gb=args.synthetic_mb / 1e3, source="synthetic")
    load_after = os.getloadavg()
    floor = floors(src)
    med = {k: statistics.median(v) for k, v in speeds.items()}
    ratios = {
        "local_all_vs_cp": med["local_all"] / med["cp"],
        "local_all_vs_cp_fsync": med["local_all"] / med["cp_fsync"],
        "local_text_vs_cp": med["local_text"] / med["cp"],
        "local_text_vs_cp_fsync": med["local_text"] / med["cp_fsync"],
        "cold_local_all_vs_cold_cp": med["cold_local_all"] / med["cold_cp"],
    }
    report = {
        "bench": "bootstrap",
        "source_bytes": size,
        "reps": args.reps,
        "mb_per_s": {k: summary(v) for k, v in speeds.items()},
        "local_text_output_bytes": text_out_bytes,
        "synthetic": {"bytes": synth["bytes"], "documents": synth["documents"], "seconds": round(synth_seconds, 3),
                      "mb_per_s": round(synth["bytes"] / 1e6 / synth_seconds, 1)},
        "floors": floor,
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "local_all_vs_sha256_alone": round(med["local_all"] / floor["sha256_mb_per_s"], 3),
        "target_ratio": TARGET_RATIO,
        "pass": {k: v >= TARGET_RATIO for k, v in ratios.items() if k.startswith(("local_all", "cold"))},
        "loadavg_1m_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "workdir": workdir,
        **provenance(workdir),
    }
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    path = write_json(os.path.join(args.artifacts_dir, "bench", f"bootstrap-{utc_stamp()}.json"), report)
    sys.stdout.buffer.write(orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
