"""Benchmark: how many tokens each packing crops, and at what speed: greedy rows (every row starts at a document,
the one that does not fit is cropped) against best-fit rows (fwe_cli.loader.rows.best_fit) on the same text.

Real FineWeb text when ../shared/fineweb_real is there (replicated to --min-mb; else synthetic records:
scripts.bench.corpus), GPT-2, batches of 8 rows of T = 1024, 2048 and 4096 tokens, --batches each, with document
boundaries (every row's first position is checked to be 0). Each run is a fresh interpreter, the contenders
interleaved over --reps. A run reports the share of the tokens read that were cropped, its wall and CPU seconds
from the loader's start to its last batch, its first batch, and its final state's size and the documents a resume
from it re-reads (best-fit: from the oldest document its buffer held). Targets at T = 2048: best-fit crops <= 0.6 x what
greedy crops, in <= 1.15 x greedy's time. `--buffers 250,1000` also runs best-fit with those buffers at T = 2048 (how
the default was chosen).

    python -m scripts.bench.packing [--reps 3] [--batches 300] [--min-mb 80] [--buffers 250,500,2000]
"""

from __future__ import annotations

import os
import sys
import tempfile

import orjson

from scripts.bench import harness
from scripts.bench.corpus import build_corpus, gpt2_tokenizer, warm_page_cache
from scripts.bench.harness import say, spread

NAME = "packing"
CROP_TARGET, TIME_TARGET, TARGET_T = 0.6, 1.15, 2048
SEQ_LENS = (1024, 2048, 4096)
RUN = """
import sys, time, orjson
t0, c0 = time.perf_counter(), time.process_time()
from fwe_cli.loader import FineWebLoader, resolve_config
settings, batches = orjson.loads(sys.argv[1]), int(sys.argv[2])
first, starts = None, True
with FineWebLoader(resolve_config(**settings)) as loader:
    for i in range(batches):
        batch = loader.next_batch()
        first = first if first is not None else time.perf_counter() - t0
        starts = starts and bool((batch["positions"][:, 0] == 0).all())
    wall, cpu, stats = time.perf_counter() - t0, time.process_time() - c0, loader.stats()
    state = loader.state_dict()
cropped, mark = stats["cropped"], state["position"].get("pack") or {}
print(orjson.dumps({"wall_s": wall, "cpu_s": cpu, "first_batch_s": first, "rows_start_at_documents": starts,
                    "tokens_read": stats["tokens_produced"], "cropped_tokens": cropped["tokens"],
                    "cropped_documents": cropped["documents"], "docs": stats["docs"],
                    "crop_share": cropped["tokens"] / max(1, stats["tokens_produced"]),
                    "state_bytes": len(orjson.dumps(state)), "resume_rereads_docs": mark.get("read", 0)}).decode())
"""


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--reps", type=int, default=3, help="interleaved runs of each contender (default 3)")
    parser.add_argument("--batches", type=int, default=300, help="batches of 8 rows per run (default 300)")
    parser.add_argument("--min-mb", type=float, default=80.0, help="corpus size in MB (default 80: T = 4096 reads ~60)")
    parser.add_argument("--buffers", default="", help="best-fit buffer sizes also run at T = 2048, comma-separated")
    parser.add_argument("--seq-lens", default=",".join(map(str, SEQ_LENS)), help="row lengths (default 1024,2048,4096)")
    parser.add_argument("--synthetic", action="store_true", help="synthetic records instead of real FineWeb text")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "fwe_bench_data"),
                        help="where the corpus is built and kept")
    return parser


def _numbers(text: str, flag: str, parser) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(f"{flag} takes whole numbers separated by commas, got {text!r}")
    if any(v < 1 for v in values):
        parser.error(f"{flag} takes numbers >= 1, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = harness.parse(cli, argv)
    seq_lens, buffers = _numbers(args.seq_lens, "--seq-lens", cli), _numbers(args.buffers, "--buffers", cli)
    corpus, kind = build_corpus(args.data, args.min_mb, args.synthetic)
    warm_page_cache(corpus)
    common = {"env": {}, "local_path": corpus, "tokenizer": gpt2_tokenizer(os.path.join(args.data, "gpt2")),
              "batch_size": 8, "boundaries": True}
    settings = {}
    for t in seq_lens:
        settings[f"greedy_{t}"] = dict(common, seq_len=t, pack="greedy")
        settings[f"best-fit_{t}"] = dict(common, seq_len=t, pack="best-fit")
    for size in buffers:
        settings[f"best-fit_{TARGET_T}_buffer{size}"] = dict(common, seq_len=TARGET_T, pack="best-fit",
                                                             pack_buffer=size)

    def run(name: str):
        def one(rep: int) -> dict:
            out = harness.run_json([sys.executable, "-c", RUN, orjson.dumps(settings[name]).decode(),
                                    str(args.batches)], name)
            say(f"  {name}: crop {out['crop_share']:.1%}, {out['wall_s']:.2f} s, first batch "
                f"{out['first_batch_s']:.2f} s")
            return out
        return one

    results = harness.interleaved(args.reps, {name: run(name) for name in settings},
                                  after_rep=lambda rep, r: say(f"rep {rep + 1}/{args.reps} done"))
    figures = {name: {key: spread([r[key] for r in runs], 4) for key in
                      ("crop_share", "wall_s", "cpu_s", "first_batch_s", "cropped_documents", "docs", "state_bytes",
                       "resume_rereads_docs")}
               for name, runs in results.items()}
    for name, runs in results.items():
        figures[name]["rows_start_at_documents"] = all(r["rows_start_at_documents"] for r in runs)
    by_t = {}
    for t in seq_lens:
        greedy, best = figures[f"greedy_{t}"], figures[f"best-fit_{t}"]
        by_t[t] = {"crop_greedy": greedy["crop_share"]["median"], "crop_best_fit": best["crop_share"]["median"],
                   "crop_ratio": harness.ratio(best["crop_share"]["median"], greedy["crop_share"]["median"]),
                   "time_ratio": harness.ratio(best["wall_s"]["median"], greedy["wall_s"]["median"]),
                   "cpu_ratio": harness.ratio(best["cpu_s"]["median"], greedy["cpu_s"]["median"])}
        say(f"T={t}: crop greedy {by_t[t]['crop_greedy']:.1%}, best-fit {by_t[t]['crop_best_fit']:.1%} "
            f"({by_t[t]['crop_ratio']}x), time {by_t[t]['time_ratio']}x, CPU {by_t[t]['cpu_ratio']}x")
    target = by_t.get(TARGET_T)
    acceptance = None if target is None else {
        "seq_len": TARGET_T, "crop_target": CROP_TARGET, "time_target": TIME_TARGET,
        "pass": bool(target["crop_ratio"] is not None and target["crop_ratio"] <= CROP_TARGET
                     and target["time_ratio"] is not None and target["time_ratio"] <= TIME_TARGET
                     and all(f["rows_start_at_documents"] for f in figures.values()))}
    record = {"data": kind, "corpus_mb": args.min_mb, "batches": args.batches, "batch_size": 8,
              "by_seq_len": {str(t): v for t, v in by_t.items()}, "runs": figures, "acceptance": acceptance}
    harness.write_result(NAME, args, record, args.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
