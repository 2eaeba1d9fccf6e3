"""Benchmark `fwe bootstrap`: a local JSONL source against `cp` of the same bytes, and the synthetic source.

    python -m scripts.bench.bootstrap                        # 256 MB source, 5 reps
    python -m scripts.bench.bootstrap --mb 1024 --reps 3 --workdir /nvme/tmp

Writes artifacts/bench/bootstrap-<UTC>.json. Per rep, interleaved (in this order: each cold run drops the
source from the page cache, the warm runs after it read it back in) so machine noise hits every contender alike,
and reported as medians with every run (MB/s of source bytes):
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

import hashlib
import os
import shutil
import subprocess
import tempfile
import time

import orjson

from scripts.bench import harness
from scripts.bench.corpus import synthetic_records, write_jsonl
from scripts.bench.harness import say, spread

NAME = "bootstrap"
TARGET_RATIO = 0.25


def make_source(path: str, size: int) -> int:
    """The source's size in bytes: synthetic records (seed 1) up to `size`, reused when already that large."""
    if os.path.isfile(path) and os.path.getsize(path) >= size:
        return os.path.getsize(path)
    return write_jsonl(path, synthetic_records(1), size)[0]


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
    from fwe_cli.bootstrap.config import bootstrap_config
    from fwe_cli.bootstrap.run import run_bootstrap

    shutil.rmtree(out, ignore_errors=True)
    if cold_source:
        drop_from_cache(cold_source)
    t0 = time.perf_counter()
    result = run_bootstrap(bootstrap_config(out=out, **flags))
    seconds = time.perf_counter() - t0
    shutil.rmtree(out, ignore_errors=True)
    return seconds, result


def contenders(src: str, size: int, workdir: str, outputs: dict) -> dict:
    """name -> one timed run (MB/s of the source's bytes), in the order a rep runs them; `outputs[fields]` gets the
    bytes each bootstrap variant wrote."""
    out, dst = os.path.join(workdir, "out"), os.path.join(workdir, "cp.jsonl")
    gb = 2 * size / 1e9  # more than the source: it is read to the end

    def local(fields: str, cold: bool = False) -> float:
        seconds, result = time_bootstrap(out, cold_source=src if cold else None, gb=gb, local_path=src, fields=fields)
        if fields == "all":
            assert result["bytes"] == size, "fields=all must copy every byte of the source"
        outputs[fields] = result["bytes"]
        return size / 1e6 / seconds

    return {"cp": lambda rep: size / 1e6 / time_cp(src, dst, fsync=False),
            "cp_fsync": lambda rep: size / 1e6 / time_cp(src, dst, fsync=True),
            "local_all": lambda rep: local("all"),
            "local_text": lambda rep: local("text"),
            "cold_cp": lambda rep: size / 1e6 / time_cp(src, dst, fsync=False, cold=True),
            "cold_local_all": lambda rep: local("all", cold=True)}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--mb", type=float, default=256, help="size of the local JSONL source in MB (default 256)")
    parser.add_argument("--reps", type=int, default=5, help="interleaved repetitions (default 5)")
    parser.add_argument("--synthetic-mb", type=float, default=40, help="size of the synthetic run in MB (default 40)")
    parser.add_argument("--workdir", help="where the source and outputs go (default: a temporary directory)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="fwe-bench-bootstrap-")
    os.makedirs(workdir, exist_ok=True)
    src = os.path.join(workdir, "source.jsonl")
    say(f"preparing {args.mb:g} MB source in {workdir} ...")
    size = make_source(src, int(args.mb * 1e6))
    load_before = os.getloadavg()
    outputs: dict = {}
    speeds = harness.interleaved(args.reps, contenders(src, size, workdir, outputs), rotate=False, after_rep=lambda
                                 rep, done: say(f"rep {rep + 1}/{args.reps}: " + ", ".join(
                                     f"{k} {v[-1]:.0f} MB/s" for k, v in done.items())))
    synth_seconds, synth = time_bootstrap(os.path.join(workdir, "out"), gb=args.synthetic_mb / 1e3, source="synthetic")
    load_after = os.getloadavg()
    floor = floors(src)
    med = {k: harness.median(v) for k, v in speeds.items()}
    ratios = {f"{a}_vs_{b}": harness.ratio(med[a], med[b]) for a, b in (
        ("local_all", "cp"), ("local_all", "cp_fsync"), ("local_text", "cp"), ("local_text", "cp_fsync"),
        ("cold_local_all", "cold_cp"))}
    report = {
        "source_bytes": size,
        "reps": args.reps,
        "mb_per_s": {k: spread(v, digits=1) for k, v in speeds.items()},
        "local_text_output_bytes": outputs["text"],
        "synthetic": {"bytes": synth["bytes"], "documents": synth["documents"], "seconds": round(synth_seconds, 3),
                      "mb_per_s": round(synth["bytes"] / 1e6 / synth_seconds, 1)},
        "floors": floor,
        "ratios": ratios,
        "local_all_vs_sha256_alone": harness.ratio(med["local_all"], floor["sha256_mb_per_s"]),
        "target_ratio": TARGET_RATIO,
        "pass": {k: v >= TARGET_RATIO for k, v in ratios.items() if k.startswith(("local_all", "cold"))},
        "loadavg_1m_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "workdir": workdir,
    }
    harness.write_result(NAME, args, report, workdir)
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    say(", ".join(f"{k} {v}" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
