"""Benchmark: `fwe tokenize` split across tasks (processes), tokens/s per core at 1, 2 and all cores.

The corpus is FineWeb-like JSONL (../shared/fineweb_real replicated when present, synthetic records otherwise;
scripts.bench.corpus) cut into --files files, tokenized with GPT-2 (the tokenizer.json built offline). Per rep,
interleaved, for P in 1, 2 and every usable core (deduplicated):
  tasks_P     P processes `python -m fwe_cli tokenize CORPUS --task i --tasks P --threads 1` started together, as a
              SLURM array or torchrun would start them: one core each, the last one merging into OUT
  threads_all (once per rep, for comparison) one process, one task, --threads = every core
Wall time runs from the first spawn to the last exit (interpreters, tokenizer loads and the merge included);
tokens/s = the merged output's tokens / wall, per core = that / cores used. Each task's own tokens/s (its encode
loop only, from its --json) is listed too. Every merged output must hold the 1-task run's shards, sha256 for sha256
(`same_shards`). Figures: medians over --reps with every run listed; scaling efficiency = per-core tokens/s at P
over per-core at 1.

    python -m scripts.bench.tokenize_scale [--mb 64] [--files 32] [--reps 3] [--shard-tokens 100000] [--synthetic]

Writes artifacts/bench/tokenize_scale-<UTC>.json; a summary goes to stderr.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

import orjson

from scripts.bench import harness
from scripts.bench.corpus import build_corpus, gpt2_tokenizer
from scripts.bench.harness import median, say, spread

NAME = "tokenize_scale"


def split_corpus(corpus: str, directory: str, files: int) -> list[str]:
    """`corpus` cut at line ends into `files` JSONL files of about equal size under `directory` (reused)."""
    names = [os.path.join(directory, f"part-{n:04d}.jsonl") for n in range(files)]
    if all(os.path.isfile(n) for n in names):
        return names
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    size, target = os.path.getsize(corpus), 0
    with open(corpus, "rb") as source:
        for number, name in enumerate(names):
            target += size // files if number < files - 1 else size
            with open(name, "wb") as part:
                while source.tell() < target and (line := source.readline()):
                    part.write(line)
    return names


def run_tasks(src: str, out: str, tokenizer: str, shard_tokens: int, tasks: int, threads: int) -> dict:
    """`tasks` tokenize processes started together into `out` (fresh): wall seconds, each task's result, merged."""
    shutil.rmtree(out, ignore_errors=True)
    base = [sys.executable, "-m", "fwe_cli", "tokenize", src, "--tokenizer", tokenizer, "--out", out,
            "--shard-tokens", str(shard_tokens), "--threads", str(threads), "--json",
            "--artifacts-dir", os.path.join(out + ".artifacts")]
    split = [] if tasks == 1 else ["--task", "{task}", "--tasks", str(tasks)]
    started = time.perf_counter()
    procs = [subprocess.Popen([a.format(task=t) for a in base + split], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=harness.child_env(), cwd=harness.REPO_ROOT)
             for t in range(tasks)]
    outputs = [p.communicate(timeout=3600) for p in procs]
    wall = time.perf_counter() - started
    for proc, (_stdout, stderr) in zip(procs, outputs):
        if proc.returncode != 0:
            raise SystemExit(f"a tokenize task failed (exit {proc.returncode}): "
                             f"{(stderr.strip().splitlines() or [''])[-1]}")
    results = [orjson.loads(stdout) for stdout, _stderr in outputs]
    manifest = orjson.loads(open(os.path.join(out, "manifest.json"), "rb").read())
    return {"wall_s": wall, "tokens": manifest["totals"]["tokens"],
            "shards": [s["sha256"] for s in manifest["shards"]],
            "task_tokens_per_s": [r["tokens_per_s"] for r in results]}


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--mb", type=float, default=64.0, help="corpus size (MB of JSONL)")
    parser.add_argument("--files", type=int, default=32, help="files the corpus is cut into (the unit of the split)")
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--shard-tokens", type=int, default=100_000, help="tokens per shard (spans: 16 x that, in "
                                                                          "bytes; keep it under a file's size)")
    parser.add_argument("--synthetic", action="store_true", help="synthetic records even if real text is present")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "fwe_bench_tokenize_scale"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    from fwe_cli.hostinfo import usable_cores

    os.environ.update(HF_HUB_OFFLINE="1")
    cores = usable_cores()
    corpus, kind = build_corpus(args.work, args.mb, args.synthetic)
    src = os.path.join(args.work, f"split_{os.path.basename(corpus)[:-6]}_{args.files}")
    split_corpus(corpus, src, args.files)
    tokenizer = gpt2_tokenizer(os.path.join(args.work, "gpt2"))
    levels = sorted({1, min(2, cores), cores})
    contenders = {f"tasks_{p}": (p, 1) for p in levels}
    if cores > 1:
        contenders["threads_all"] = (1, cores)
    say(f"corpus: {src} ({kind}), {args.files} files; {cores} usable cores; contenders {', '.join(contenders)}")
    runs = harness.interleaved(args.reps, {
        name: (lambda rep, name=name, tasks=tasks, threads=threads: run_tasks(
            src, os.path.join(args.work, f"out_{name}"), tokenizer, args.shard_tokens, tasks, threads))
        for name, (tasks, threads) in contenders.items()},
        after_rep=lambda rep, done: say(f"rep {rep + 1}/{args.reps}: " + ", ".join(
            f"{name} {done[name][-1]['wall_s']:.1f} s" for name in contenders)))
    reference = runs["tasks_1"][0]["shards"]
    figures = {}
    for name, (tasks, threads) in contenders.items():
        used = tasks * threads
        rates = [r["tokens"] / r["wall_s"] for r in runs[name]]
        figures[name] = {"processes": tasks, "threads_each": threads, "cores_used": used,
                         "wall_s": spread([r["wall_s"] for r in runs[name]], 3),
                         "tokens_per_s": round(median(rates)), "tokens_per_s_per_core": round(median(rates) / used),
                         "task_tokens_per_s": [r["task_tokens_per_s"] for r in runs[name]],
                         "same_shards": all(r["shards"] == reference for r in runs[name]),
                         "shards": len(reference), "tokens": runs[name][0]["tokens"]}
    one = figures["tasks_1"]["tokens_per_s_per_core"]
    for entry in figures.values():
        entry["scaling_efficiency"] = round(entry["tokens_per_s_per_core"] / one, 3) if one else None
    harness.write_result(NAME, args, {
        "corpus": {"path": src, "kind": kind, "files": args.files, "bytes": os.path.getsize(corpus)},
        "cores": cores, "tokenizer": "gpt2 (tokenizer.json built offline)", "shard_tokens": args.shard_tokens,
        "contenders": figures, "all_same_shards": all(f["same_shards"] for f in figures.values())}, args.work)
    for name, entry in figures.items():
        say(f"{name:>12}: {entry['tokens_per_s'] / 1e6:6.2f} M tokens/s on {entry['cores_used']} core(s), "
            f"{entry['tokens_per_s_per_core'] / 1e6:.2f} M per core (x{entry['scaling_efficiency']} of one), "
            f"wall {entry['wall_s']['median']:.2f} s, same shards: {entry['same_shards']}")
    return 0 if all(f["same_shards"] for f in figures.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
