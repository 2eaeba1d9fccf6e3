"""Benchmark: a mix of three sources against one source of the same text: tokens/s of the loader, steady state.

The corpus (real FineWeb text when ../shared/fineweb_real is there, else synthetic records: scripts.bench.corpus) is
dealt line by line into three JSONL files. `single` reads the three files as one local source; `mix` reads each as
a source of a --mix (weights 1:1:1 by tokens, so the mix encodes its documents itself to count them). GPT-2,
seq 1024, batch 8, default threads; each run is a fresh interpreter, the contenders interleaved; a run's figure is
its tokens/s between its batches at 10 % and 90 % of --batches. Target: mix >= 0.95 x single.

    python -m scripts.bench.mix [--reps 3] [--min-mb 40] [--batches 400] [--synthetic] [--out artifacts/bench]
"""

from __future__ import annotations

import os
import sys
import tempfile

import orjson

from scripts.bench import harness
from scripts.bench.corpus import build_corpus, gpt2_tokenizer
from scripts.bench.harness import say, spread

NAME = "mix"
TARGET = 0.95
RUN = """
import sys, time, orjson
from fwe_cli.loader import FineWebLoader, resolve_config
settings, batches = orjson.loads(sys.argv[1]), int(sys.argv[2])
times = []
with FineWebLoader(resolve_config(**settings)) as loader:
    for _ in range(batches):
        loader.next_batch()
        times.append(time.perf_counter())
    stats = loader.stats()
lo, hi = batches // 10, batches * 9 // 10
tokens = (hi - lo) * settings["seq_len"] * settings["batch_size"]
print(orjson.dumps({"tokens_per_s": tokens / (times[hi] - times[lo]), "sources": stats["sources"]}).decode())
"""


def split_corpus(path: str, directory: str, parts: int = 3) -> list[str]:
    """The corpus's lines dealt round-robin into `parts` JSONL files (reused when there: each is written under a
    temporary name and renamed once whole, so a run stopped half way leaves no short part behind)."""
    names = [os.path.join(directory, f"part{i}.jsonl") for i in range(parts)]
    if not all(os.path.isfile(n) for n in names):
        handles = [open(n + ".tmp", "wb") for n in names]
        with open(path, "rb") as source:
            for i, line in enumerate(source):
                handles[i % parts].write(line)
        for handle in handles:
            handle.close()
        for name in names:
            os.replace(name + ".tmp", name)
    return names


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--reps", type=int, default=3, help="interleaved runs of each contender (default 3)")
    parser.add_argument("--min-mb", type=float, default=40.0, help="corpus size in MB (default 40)")
    parser.add_argument("--batches", type=int, default=400, help="batches per run (default 400)")
    parser.add_argument("--synthetic", action="store_true", help="synthetic records instead of real FineWeb text")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "fwe_bench_data"),
                        help="where the corpus is built and kept")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    corpus, kind = build_corpus(args.data, args.min_mb, args.synthetic)
    folder = os.path.join(args.data, f"mix_{os.path.basename(corpus)}")
    os.makedirs(folder, exist_ok=True)
    parts = split_corpus(corpus, folder)
    mix = os.path.join(folder, "mix.json")
    with open(mix, "wb") as handle:
        handle.write(orjson.dumps({"by": "tokens", "sources": [{"weight": 1, "local_path": p} for p in parts]}))
    common = {"env": {}, "tokenizer": gpt2_tokenizer(os.path.join(args.data, "gpt2")), "seq_len": 1024,
              "batch_size": 8}
    settings = {"single": dict(common, local_path=folder + "/part*.jsonl"), "mix": dict(common, mix=mix)}

    def run(name: str):
        def one(rep: int) -> dict:
            return harness.run_json([sys.executable, "-c", RUN, orjson.dumps(settings[name]).decode(),
                                     str(args.batches)], name)
        return one

    results = harness.interleaved(args.reps, {name: run(name) for name in settings},
                                  after_rep=lambda rep, r: say(f"rep {rep + 1}/{args.reps} done"))
    rates = {name: spread([r["tokens_per_s"] for r in runs], 1) for name, runs in results.items()}
    ratio = harness.ratio(rates["mix"]["median"], rates["single"]["median"])
    record = {"data": kind, "corpus_mb": args.min_mb, "tokens_per_s": rates, "mix_vs_single": ratio,
              "target": TARGET, "pass": ratio is not None and ratio >= TARGET,
              "mix_sources": results["mix"][-1]["sources"]}
    harness.write_result(NAME, args, record, args.data)
    say(f"single {rates['single']['median']:,.0f} tokens/s, mix of 3 {rates['mix']['median']:,.0f} tokens/s: "
        f"{ratio}x (target >= {TARGET})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
