"""Run generated resume cases: `python -m scripts.check_resume --examples 5000 [--seed 0] [--no-workers]`.

Each case (scripts.check_resume.cases) is run and held to what an uninterrupted run delivers (check.check); the first
that fails is shrunk by hypothesis to a small one and printed as the short script that reproduces it, with exit 1.
Progress goes to stderr every 50 cases; a summary (cases run, seconds, the failing script) to stdout as JSON and to
artifacts/check_resume/check_resume-<UTC>.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, reject, seed, settings

from fwe_cli.artifacts import utc_stamp
from scripts.check_resume.cases import Case, cases
from scripts.check_resume.check import Unfit, check

REPO = Path(__file__).resolve().parents[2]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scripts.check_resume", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=200, help="cases to run (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0: the same cases every run)")
    parser.add_argument("--no-workers", action="store_true", help="draw no DataLoader worker processes")
    parser.add_argument("--out", default=str(REPO / "artifacts" / "check_resume"), help="where the summary JSON goes")
    return parser


def run_cases(examples: int, draw_seed: int, workers: bool, progress=lambda n: None) -> tuple[int, Case | None, str]:
    """(cases run, the failing case shrunk or None, its error) for `examples` cases drawn with `draw_seed`."""
    seen = {"count": 0, "failed": None, "error": ""}

    @seed(draw_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False, print_blob=False,
              suppress_health_check=list(HealthCheck))
    @given(cases(workers=workers))
    def each(case: Case) -> None:
        seen["count"] += 1
        progress(seen["count"])
        try:
            check(case)
        except Unfit:
            reject()
        except Exception as exc:
            seen["failed"], seen["error"] = case, f"{type(exc).__name__}: {exc}"
            raise

    try:
        each()
    except Exception:  # noqa: BLE001 - the failing case is kept in `seen`
        if seen["failed"] is None:
            raise
    return seen["count"], seen["failed"], seen["error"]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.examples < 1:
        parser().error(f"--examples must be at least 1, got {args.examples}")
    started = time.perf_counter()

    def progress(count: int) -> None:
        if count % 50 == 0:
            print(f"check_resume: {count} cases, {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)

    count, failed, error = run_cases(args.examples, args.seed, not args.no_workers, progress)
    summary = {"examples": args.examples, "run": count, "seed": args.seed, "workers": not args.no_workers,
               "seconds": round(time.perf_counter() - started, 1), "ok": failed is None, "error": error or None,
               "script": failed.script() if failed is not None else None}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"check_resume-{utc_stamp()}.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    if failed is not None:
        print(f"check_resume: a case fails ({error}); it runs again with:\n\n{failed.script()}", file=sys.stderr)
    sys.stdout.write(orjson.dumps(summary).decode() + "\n")
    return 0 if failed is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
