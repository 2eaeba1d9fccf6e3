"""Benchmark: a mix of three sources against one source of the same text, and a scheduled mix of the three against
the fixed one: tokens/s of the loader, steady state; and how closely a schedule delivers its plan.

The corpus (real FineWeb text when ../shared/fineweb_real is there, else synthetic records: scripts.bench.corpus) is
dealt line by line into three JSONL files. `single` reads the three files as one local source; `mix` reads each as
a source of a --mix (weights 1:1:1 by tokens, so the mix encodes its documents itself to count them); `scheduled`
reads them under a schedule (1:1:1 to a quarter of --batches, a linear ramp to 1:2:5 to three quarters, then held),
which changes the weights in the measured window. GPT-2, seq 1024, batch 8, default threads; each run is a fresh
interpreter, the contenders interleaved; a run's figure is its tokens/s between its batches at 10 % and 90 % of
--batches. Targets: mix >= 0.95 x single, scheduled >= 0.95 x mix.

The schedule's accuracy (one fresh interpreter, not timed): the same schedule stretched over --accuracy-steps steps,
read as 1 rank and as each of 3 ranks; each document counted at the step it was chosen for, by its tokens: each
stage's share of every source against the mean of its planned shares there, and each tenth of the ramp's (targets:
0.005 and 0.01, on every rank).

    python -m scripts.bench.mix [--reps 3] [--min-mb 40] [--batches 400] [--accuracy-steps 2000] [--synthetic]
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
SHARE_TARGETS = {"stage": 0.005, "ramp_tenth": 0.01}
RAMP = ((1, 1, 1), (1, 2, 5))  # the schedule's weights: before its ramp, and at its end
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
ACCURACY = """
import sys, orjson
from fwe_cli.loader import resolve_config
from fwe_cli.loader.pipeline.encoding import BatchEncoder
from fwe_cli.loader.stream import DocumentStream
from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer
settings, steps, worlds = orjson.loads(sys.argv[1]), int(sys.argv[2]), orjson.loads(sys.argv[3])
encoder = BatchEncoder(load_tokenizer(settings["tokenizer"]))
readers = []
for world in worlds:
    for rank in range(world):
        stream = DocumentStream(resolve_config(**settings, shard_mod=world, shard_rem=rank))
        stream.source.bind_encoder(lambda: encoder.texts_ids, 2)
        tokens = [[0, 0, 0] for _ in range(steps)]  # by the step each document was chosen for
        for doc in stream:
            if doc.resume.step >= steps:
                break
            tokens[doc.resume.step][doc.resume.child] += len(doc.ids) + 1
        stream.close()
        readers.append({"world": world, "rank": rank, "tokens": tokens})
print(orjson.dumps({"readers": readers}).decode())
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


def schedule(steps: int) -> list[dict]:
    """1:1:1 to a quarter of `steps`, a linear ramp to 1:2:5 to three quarters, then held (ids p0, p1, p2)."""
    return [{"until_step": steps // 4, "weights": dict(zip(("p0", "p1", "p2"), RAMP[0]))},
            {"until_step": 3 * steps // 4, "weights": dict(zip(("p0", "p1", "p2"), RAMP[1])), "ramp": "linear"}]


def planned(step: int, steps: int) -> list[float]:
    """The shares schedule(steps) holds at `step`, worked out here from its numbers."""
    lo, hi = steps // 4, 3 * steps // 4
    start, end = ([w / sum(ws) for w in ws] for ws in RAMP)
    f = 0.0 if step < lo else 1.0 if step >= hi else (step - lo) / (hi - lo)
    return [a + (b - a) * f for a, b in zip(start, end)]


def gap(tokens: list[list[int]], lo: int, hi: int, steps: int) -> float:
    """The largest distance between a source's share of the tokens chosen at steps [lo, hi) and the mean of its
    planned shares there."""
    got = [sum(row[i] for row in tokens[lo:hi]) for i in range(3)]
    plan = [sum(planned(s, steps)[i] for s in range(lo, hi)) / (hi - lo) for i in range(3)]
    return max(abs(g / sum(got) - p) for g, p in zip(got, plan))


def accuracy(readers: list[dict], steps: int) -> dict:
    """Each reader's largest stage gap and largest gap in a tenth of the ramp, and the largest of all."""
    lo, hi = steps // 4, 3 * steps // 4
    rows = []
    for reader in readers:
        stages = [gap(reader["tokens"], a, b, steps) for a, b in ((0, lo), (lo, hi), (hi, steps))]
        tenths = [gap(reader["tokens"], lo + (hi - lo) * k // 10, lo + (hi - lo) * (k + 1) // 10, steps)
                  for k in range(10)]
        rows.append({"world": reader["world"], "rank": reader["rank"], "stage_gap": round(max(stages), 5),
                     "ramp_tenth_gap": round(max(tenths), 5)})
    worst = {what: max(row[f"{what}_gap"] for row in rows) for what in SHARE_TARGETS}
    return {"steps": steps, "readers": rows, "largest": worst, "targets": SHARE_TARGETS,
            "pass": all(worst[what] <= target for what, target in SHARE_TARGETS.items())}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--reps", type=int, default=3, help="interleaved runs of each contender (default 3)")
    parser.add_argument("--min-mb", type=float, default=40.0, help="corpus size in MB (default 40)")
    parser.add_argument("--batches", type=int, default=400, help="batches per run (default 400)")
    parser.add_argument("--accuracy-steps", type=int, default=2000,
                        help="steps the schedule's accuracy is read over, on 1 and on 3 ranks (default 2000; 0: not "
                             "read)")
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
    sources = [{"id": f"p{i}", "local_path": p, "stop": "cycle"} for i, p in enumerate(parts)]  # (a ramp takes more
    mixes = {name: os.path.join(folder, f"{name}.json") for name in ("mix", "scheduled", "accuracy")}  # of some)
    for name, entries, extra in (("mix", [dict(e, weight=1) for e in sources], {}),
                                 ("scheduled", sources, {"schedule": schedule(args.batches)}),
                                 ("accuracy", sources, {"schedule": schedule(args.accuracy_steps)})):
        with open(mixes[name], "wb") as handle:
            handle.write(orjson.dumps({"by": "tokens", "sources": entries, **extra}))
    common = {"env": {}, "tokenizer": gpt2_tokenizer(os.path.join(args.data, "gpt2")), "seq_len": 1024,
              "batch_size": 8}
    settings = {"single": dict(common, local_path=folder + "/part*.jsonl"), "mix": dict(common, mix=mixes["mix"]),
                "scheduled": dict(common, mix=mixes["scheduled"])}

    def run(name: str):
        def one(rep: int) -> dict:
            return harness.run_json([sys.executable, "-c", RUN, orjson.dumps(settings[name]).decode(),
                                     str(args.batches)], name)
        return one

    results = harness.interleaved(args.reps, {name: run(name) for name in settings},
                                  after_rep=lambda rep, r: say(f"rep {rep + 1}/{args.reps} done"))
    rates = {name: spread([r["tokens_per_s"] for r in runs], 1) for name, runs in results.items()}
    ratio = harness.ratio(rates["mix"]["median"], rates["single"]["median"])
    scheduled = harness.ratio(rates["scheduled"]["median"], rates["mix"]["median"])
    shares = None
    if args.accuracy_steps:
        say(f"reading the schedule's accuracy over {args.accuracy_steps} steps on 1 and 3 ranks")
        accuracy_settings = orjson.dumps(dict(common, mix=mixes["accuracy"])).decode()
        read = harness.run_json([sys.executable, "-c", ACCURACY, accuracy_settings,
                                 str(args.accuracy_steps), "[1, 3]"], "accuracy", timeout=3600)
        shares = accuracy(read["readers"], args.accuracy_steps)
    record = {"data": kind, "corpus_mb": args.min_mb, "tokens_per_s": rates, "mix_vs_single": ratio,
              "scheduled_vs_fixed": scheduled, "target": TARGET,
              "pass": ratio is not None and ratio >= TARGET and scheduled is not None and scheduled >= TARGET
              and (shares is None or shares["pass"]),
              "mix_sources": results["mix"][-1]["sources"], "scheduled_sources": results["scheduled"][-1]["sources"],
              "schedule_shares": shares}
    harness.write_result(NAME, args, record, args.data)
    say(f"single {rates['single']['median']:,.0f} tokens/s, mix of 3 {rates['mix']['median']:,.0f} tokens/s: "
        f"{ratio}x (target >= {TARGET}); scheduled {rates['scheduled']['median']:,.0f} tokens/s: {scheduled}x the "
        f"fixed mix (target >= {TARGET})")
    if shares is not None:
        say(f"largest share gap in a stage {shares['largest']['stage']:.4f} (target <= {SHARE_TARGETS['stage']}), in "
            f"a tenth of the ramp {shares['largest']['ramp_tenth']:.4f} (target <= {SHARE_TARGETS['ramp_tenth']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
