"""What every benchmark under scripts/bench shares: its command line, where and how its result is written, and the
timing helpers several of them use.

    python -m scripts.bench.<name> [--out artifacts/bench] ...       # from the repository root

- `--out` is a folder (default artifacts/bench) in every benchmark; the result is `<name>-<UTC>.json` inside it,
  written atomically (fwe_cli.artifacts.write_json) with the bench's name, its arguments and the provenance block
  (host, versions, fwe's own). The file's path is the one line on stdout; progress and the summary go to stderr.
- Repeats are interleaved (every contender once per rep, the order rotating from rep to rep), so load from other
  work on a shared machine hits every contender alike; figures are medians with every run listed, and peers
  measured in the same run are reported as ratios of them. Compare figures from the same machine only.
- Imports need no path edits: fwe_cli is the installed package, and `tests.hubsim` and `scripts.bench` resolve
  because `python -m` puts the working directory (the repository root) first. Child processes run there too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence, TypeVar

from fwe_cli.artifacts import prepare_output_dir, provenance, utc_stamp, write_json
from fwe_cli.errors import OutputError

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = os.path.join("artifacts", "bench")
T = TypeVar("T")


def bench_parser(name: str, doc: str) -> argparse.ArgumentParser:
    """The parser of `python -m scripts.bench.<name>`: its --help shows the module docstring (what it measures and
    its run line) and it takes --out FOLDER; the bench adds its own flags."""
    parser = argparse.ArgumentParser(prog=f"python -m scripts.bench.{name}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="FOLDER",
                        help=f"folder for the result, written as {name}-<UTC>.json (default {DEFAULT_OUT})")
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse `argv` and check, before any work, that --out is a folder a result can be written into (created when
    missing); a bad one ends the run with one line and exit 2, as any bad flag does."""
    args = parser.parse_args(argv)
    if args.out.endswith(".json"):
        parser.error(f"--out is a folder (the result goes inside it as <name>-<UTC>.json), got {args.out}")
    try:
        prepare_output_dir(args.out)
    except OutputError as exc:
        parser.error(f"--out {exc}")
    return args


def write_result(name: str, args: argparse.Namespace, record: dict, disk_path: str = ".") -> str:
    """Write `record` as `<args.out>/<name>-<UTC>.json` (atomically) with the bench's name, its arguments and the
    provenance block (free disk of `disk_path`: where the bench put its data); print the path on stdout."""
    result = {"bench": name, "args": vars(args), **record, **provenance(str(disk_path))}
    path = write_json(os.path.join(args.out, f"{name}-{utc_stamp()}.json"), result)
    print(path, flush=True)
    return path


def say(text: str) -> None:
    """A progress or summary line for the human watching: stderr (stdout carries the result's path only)."""
    print(text, file=sys.stderr, flush=True)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a measured child process: this one without the users' NSA_FWE_* settings (a bench measures
    the settings it names, not the shell's), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSA_FWE_")}
    env.update(extra)
    return env


def run_timed(cmd: Sequence[str], env: dict | None = None, timeout: float = 600.0,
              cwd: str | os.PathLike = REPO_ROOT) -> tuple[float, subprocess.CompletedProcess]:
    """Run `cmd` (output captured as text) from the repository root, by default with `child_env()`; (seconds from
    spawn to exit, the finished process). The caller decides what a non-zero exit means."""
    started = time.perf_counter()
    proc = subprocess.run(list(cmd), capture_output=True, text=True, env=child_env() if env is None else env,
                          cwd=cwd, timeout=timeout)
    return time.perf_counter() - started, proc


def run_json(cmd: Sequence[str], what: str, env: dict | None = None, timeout: float = 600.0) -> dict:
    """Run a child that prints its result as JSON on its last stdout line (run_timed): that result, with `process_s`
    (spawn to exit); SystemExit naming `what` and the child's one-line error when it fails."""
    import orjson

    seconds, proc = run_timed(cmd, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed: {failure_line(proc)}")
    result = orjson.loads(proc.stdout.strip().splitlines()[-1])
    result["process_s"] = seconds
    return result


def failure_line(proc: subprocess.CompletedProcess) -> str:
    """The last line a failed child wrote on stderr (where fwe and Python put the one-line error)."""
    return (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]


def rotation(names: Sequence[T], rep: int) -> list[T]:
    """`names` rotated by `rep`: the order of rep `rep`, so each contender goes first in turn."""
    shift = rep % len(names) if names else 0
    return [*names[shift:], *names[:shift]]


def interleaved(reps: int, contenders: dict[str, Callable[[int], T]], rotate: bool = True,
                after_rep: Callable[[int, dict[str, list[T]]], None] | None = None) -> dict[str, list[T]]:
    """Run every contender once per rep (called with the rep number), one after another, in an order that rotates
    from rep to rep (or stays as given with rotate=False: when a contender prepares the next one's state);
    `after_rep(rep, results)` reports progress. Returns each contender's results in rep order."""
    results: dict[str, list[T]] = {name: [] for name in contenders}
    for rep in range(reps):
        for name in rotation(list(contenders), rep) if rotate else contenders:
            results[name].append(contenders[name](rep))
        if after_rep is not None:
            after_rep(rep, results)
    return results


def median(values: Iterable[float | None], digits: int | None = None) -> float | None:
    """The median of the values that are not None (None when there are none), rounded to `digits` if given."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    value = statistics.median(present)
    return value if digits is None else round(value, digits)


def spread(values: Sequence[float], digits: int | None = None) -> dict:
    """median, min, max, (max - min) / median and every value, rounded to `digits` if given."""
    rnd = (lambda v: v) if digits is None else (lambda v: round(v, digits))
    med = statistics.median(values)
    return {"median": rnd(med), "min": rnd(min(values)), "max": rnd(max(values)),
            "relative_spread": round((max(values) - min(values)) / med, 4) if med else None,
            "all": [rnd(v) for v in values]}


def ratio(numerator: float | None, denominator: float | None, digits: int = 3) -> float | None:
    """numerator / denominator rounded, or None when either is missing or the denominator is 0: a peer measured in
    the same run is reported as this ratio of medians, never as a figure from another run."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, digits)
