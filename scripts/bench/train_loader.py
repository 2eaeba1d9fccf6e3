"""Benchmark: fwe's torch dataset through torchdata's StatefulDataLoader(num_workers=2) against fwe's own iterator on
the same text, GPT-2 (built offline), seq_len 1024, batch 8 by default.

  (1) fwe       FineWebLoader iterated in the process (its defaults: a tokenizer thread per core)
  (2) dataset   FineWebDataset(config) in StatefulDataLoader(batch_size=None, num_workers=N): each worker a loader
                over its own documents (shard N x 1, worker), the cores split among the workers' tokenizer threads,
                every batch crossing to the main process with the worker's state (snapshot every step, the default)
  (3) plain     the same dataset in torch's own DataLoader: no state crosses, so (2) against (3) is what the state
                costs, and (3) against (1) what the worker processes cost

    python -m scripts.bench.train_loader [--reps 3] [--min-mb 80] [--workers 2] [--out artifacts/bench]

Data: ../shared/fineweb_real/ when present (replicated to --min-mb of JSONL), synthetic records otherwise
(scripts.bench.corpus). Each contender runs in a fresh interpreter, the two interleaved over --reps; the figure is
steady state (scripts.bench.throughput_stages.consume: the batches between 10 % and 90 % of the run, starting after
every tokenizer has switched to its proven fast backend), with end to end and first batch beside it. Both read every
document once: the token counts must match (up to each worker's final partial batch).
Targets (steady tokens/s, medians): dataset >= 0.97 x plain (what the state costs), dataset >= 0.9 x fwe where the
machine allows. Writes artifacts/bench/train_loader-<UTC>.json.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time

import orjson

from scripts.bench import harness
from scripts.bench.corpus import build_corpus, gpt2_tokenizer, warm_page_cache
from scripts.bench.harness import say, spread

NAME = "train_loader"
TARGET = 0.9
TARGET_VS_PLAIN = 0.97
CONTENDERS = ("fwe", "dataset", "plain")


def _config(args):
    from fwe_cli.loader import resolve_config

    return resolve_config(env={}, local_path=args.data, tokenizer=args.tokenizer, seq_len=args.seq_len,
                          batch_size=args.batch, report_docs=0)


def stage_fwe(args) -> dict:
    from fwe_cli.loader import FineWebLoader
    from scripts.bench.throughput_stages import consume, tokenizer_settled

    t_start, cpu0 = time.perf_counter(), _all_cpu_s()
    with FineWebLoader(_config(args)) as loader:
        out = consume(iter(loader), args.seq_len * args.batch, t_start, 0.0,
                      lambda: tokenizer_settled(loader.pipeline.tokenizer))
    out["run_tokens_per_cpu_s"] = out["tokens"] / max(_all_cpu_s() - cpu0, 1e-9)
    return out


def stage_dataset(args, stateful: bool = True) -> dict:
    from torch.utils.data import DataLoader
    from torchdata.stateful_dataloader import StatefulDataLoader

    from fwe_cli.loader import FineWebDataset
    from scripts.bench.throughput_stages import consume, tokenizer_settled

    settled = multiprocessing.Value("i", 0)  # workers whose tokenizer has settled (inherited by the forked workers)

    class Reporting(FineWebDataset):
        """FineWebDataset that tells the bench when its worker's tokenizer has settled."""

        def __iter__(self):
            told = False
            for batch in super().__iter__():
                if not told and tokenizer_settled(self._pass.loader.pipeline.tokenizer):  # this pass's loader
                    with settled.get_lock():
                        settled.value += 1
                    told = True
                yield batch

    t_start, cpu0 = time.perf_counter(), _all_cpu_s()
    loader = (StatefulDataLoader if stateful else DataLoader)(Reporting(_config(args)), batch_size=None,
                                                              num_workers=args.workers)
    out = consume(iter(loader), args.seq_len * args.batch, t_start, 0.0, lambda: settled.value == args.workers)
    del loader  # its workers end and are reaped: their CPU is counted now
    out["workers"] = args.workers
    out["run_tokens_per_cpu_s"] = out["tokens"] / max(_all_cpu_s() - cpu0, 1e-9)
    return out


def _all_cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (a DataLoader's workers, once it is gone)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


STAGES = {"fwe": stage_fwe, "dataset": stage_dataset, "plain": lambda args: stage_dataset(args, stateful=False)}


def run_stage(stage: str, args) -> dict:
    """One contender in a fresh interpreter: its JSON line (steady figures, CPU from the process and its workers)."""
    cmd = [sys.executable, "-m", "scripts.bench.train_loader", "--stage", stage, "--data", args.data,
           "--tokenizer", args.tokenizer, "--seq-len", str(args.seq_len), "--batch", str(args.batch),
           "--workers", str(args.workers)]
    return harness.run_json(cmd, stage, timeout=args.stage_timeout)


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--reps", type=int, default=3, help="interleaved runs of each contender (default 3)")
    parser.add_argument("--min-mb", type=float, default=80.0, help="JSONL size to replicate the text to (default 80)")
    parser.add_argument("--synthetic", action="store_true", help="use synthetic text even when real text is present")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--stage-timeout", type=float, default=600.0, help="seconds one contender's run may take")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "fwe_bench_data"))
    parser.add_argument("--stage", choices=sorted(STAGES), help=argparse.SUPPRESS)  # a child: one contender's run
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    child = "--stage" in (sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv) if child else harness.parse(parser(), argv)
    if args.stage:  # the child: one run, one JSON line on stdout
        sys.stdout.write(orjson.dumps(STAGES[args.stage](args)).decode() + "\n")
        return 0
    data, kind = build_corpus(args.data_dir, args.min_mb, args.synthetic)
    args.data, args.tokenizer = data, gpt2_tokenizer(os.path.join(args.data_dir, "gpt2"))
    warm_page_cache(data)
    say(f"data: {data} ({os.path.getsize(data) / 1e6:.1f} MB, {kind})")
    load_before = os.getloadavg()

    def after_rep(rep: int, done: dict) -> None:
        fwe, dataset, plain = (done[name][rep] for name in CONTENDERS)
        say(f"rep {rep + 1}: fwe {fwe['steady_tokens_per_s'] / 1e6:.2f} M tokens/s, dataset "
            f"{dataset['steady_tokens_per_s'] / 1e6:.2f} M tokens/s ({args.workers} workers), in torch's DataLoader "
            f"{plain['steady_tokens_per_s'] / 1e6:.2f} M, loadavg {os.getloadavg()[0]:.1f}")

    done = harness.interleaved(args.reps, {name: (lambda rep, name=name: run_stage(name, args)) for name in CONTENDERS},
                               after_rep=after_rep)
    report = summarize(done, args.workers)
    report.update(data=kind, data_file=data, data_mb=os.path.getsize(data) / 1e6, seq_len=args.seq_len,
                  batch_size=args.batch, tokenizer="gpt2 (fwe_cli.loader.tokenization.gpt2_vocab)", runs=done,
                  loadavg_before=load_before, loadavg_after=os.getloadavg())
    path = harness.write_result(NAME, args, report, args.data_dir)
    summary = report["summary"]
    say(f"steady tokens/s: fwe {summary['fwe_tokens_per_s']['median'] / 1e6:.2f} M, dataset "
        f"{summary['dataset_tokens_per_s']['median'] / 1e6:.2f} M; dataset/fwe {report['acceptance']['ratio']}, "
        f"in torch's DataLoader {report['plain_dataloader_vs_fwe']} (target {TARGET}, per rep "
        f"{summary['ratio_per_rep']['all']}); StatefulDataLoader / DataLoader {report['stateful_vs_plain']} (target "
        f"{TARGET_VS_PLAIN}, per rep {summary['vs_plain_per_rep']['all']}; per CPU-second of whole runs "
        f"{report['stateful_vs_plain_per_cpu_s']})  ->  {path}")
    return 0


def summarize(done: dict, workers: int) -> dict:
    """Medians of each contender's figures, the ratio of the steady medians (the acceptance figure) and per rep."""
    fwe, dataset = done["fwe"], done["dataset"]

    def figures(runs: list[dict], key: str) -> dict:
        return spread([r[key] for r in runs], 1)

    summary = {f"{name}_{label}": figures(runs, key) for name, runs in done.items()
               for label, key in (("tokens_per_s", "steady_tokens_per_s"),
                                  ("end_to_end_tokens_per_s", "end_to_end_tokens_per_s"),
                                  ("first_batch_s", "first_batch_s"))}
    summary["ratio_per_rep"] = spread([d["steady_tokens_per_s"] / f["steady_tokens_per_s"]
                                       for f, d in zip(fwe, dataset)], 3)
    summary["vs_plain_per_rep"] = spread([d["steady_tokens_per_s"] / p["steady_tokens_per_s"]
                                          for p, d in zip(done["plain"], dataset)], 3)
    summary["after_settling"] = all(r["steady_window"]["after_settling"] for runs in done.values() for r in runs)
    ratio = harness.ratio(summary["dataset_tokens_per_s"]["median"], summary["fwe_tokens_per_s"]["median"])
    tokens = {name: sorted({r["tokens"] for r in runs}) for name, runs in done.items()}
    plain = harness.ratio(summary["plain_tokens_per_s"]["median"], summary["fwe_tokens_per_s"]["median"])
    state = harness.ratio(summary["dataset_tokens_per_s"]["median"], summary["plain_tokens_per_s"]["median"])
    for name, runs in done.items():  # whole runs' tokens per CPU-second, the workers' included: less noisy
        summary[f"{name}_run_tokens_per_cpu_s"] = figures(runs, "run_tokens_per_cpu_s")
    per_cpu = harness.ratio(summary["dataset_run_tokens_per_cpu_s"]["median"],
                            summary["plain_run_tokens_per_cpu_s"]["median"])
    return {"summary": summary, "workers": workers, "tokens": tokens, "plain_dataloader_vs_fwe": plain,
            "stateful_vs_plain": state, "stateful_vs_plain_per_cpu_s": per_cpu,
            "acceptance": {"ratio": ratio, "target": TARGET, "ok": ratio is not None and ratio >= TARGET,
                           "vs_plain": {"ratio": state, "target": TARGET_VS_PLAIN,
                                        "ok": state is not None and state >= TARGET_VS_PLAIN}}}


if __name__ == "__main__":
    raise SystemExit(main())
