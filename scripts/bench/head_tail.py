"""Benchmark (issue #23): the step that crosses from a local bootstrap into its Hub tail (`--local-path DIR --tail
hub`), against the same bootstrap read alone, through a Hub with a round-trip time.

    python -m scripts.bench.head_tail [--reps 3] [--rtt-ms 50] [--gb 0.02] [--mb 40] [--step-ms 0,20]
                                      [--tokenizer gpt2] [--out artifacts/bench]

The test Hub (tests/hubsim, built in a temporary folder: --mb of parquet in 4 files) is served through an RTT proxy
(default 50 ms per exchange, 2 more per new connection). `fwe bootstrap --gb 0.02` of it is made once through the
proxy; then, per rep and consumer step time (--step-ms: the simulated training step between batches, 0 = as fast as
the loader gives them), interleaved:

- local: `--local-path DIR` for the batches its documents fill (the steady local fetch latency);
- head_tail: `--local-path DIR --tail hub` until 30 batches past the boundary (the first tail batch).

Each run is a loader in this process (the native reader reads HF_ENDPOINT when it is used) with a fresh HF_HOME,
the GPT-2 tokenizer from the test Hub, 8 x 1024 batches. Per run: first-batch seconds, every step's fetch latency,
the boundary step. Figures (medians over reps): the steady local p95 (steps 20 on), the p95 over the 20 steps
around the boundary (10 before, 10 from it) and its ratio to the local p95, the worst step in that window against
one round trip plus the tokenize time of one batch (measured here: the median time to encode a batch's documents,
as fwe does, on this machine), the first tail batch's fetch latency, and head_tail's first batch over local's.
Once, the head_tail batches are compared with `--source hub --revision REV` byte for byte.

Claims: window p95 <= 2x local p95; worst boundary step <= RTT + one batch's tokenize time; first batch within
1.25x of local's (noise on a shared machine); batches identical. Exit 0 when the runs completed (the verdict is in
the JSON), 1 when a run failed. Writes artifacts/bench/head_tail-<UTC>.json. Compare figures from one machine only.
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from scripts.bench import harness
from scripts.bench.harness import median, ratio, say
from tests.hubsim.proxy import RttProxy
from tests.hubsim.repos import BuildSpec, build_repos
from tests.hubsim.server import HubServer

NAME = "head_tail"
SEQ_LEN, BATCH = 1024, 8
AFTER_BOUNDARY = 30
WINDOW = 10  # steps before the boundary, and from it, in the boundary window


@contextmanager
def hub_env(url: str, home: Path):
    """os.environ pointing this process's Hub clients at `url` with HF_HOME `home`, restored afterwards."""
    names = {"HF_ENDPOINT": url, "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"), "HF_HUB_OFFLINE": "0"}
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def p95(values: list[float]) -> float | None:
    return float(np.percentile(values, 95)) if values else None


def run_loader(settings: dict, step_s: float, after_head: int | None, limit: int | None, keep: bool = False) -> dict:
    """One loader in this process: fetch latency per step (each next() as the caller sees it), first batch,
    boundary step (and the batches if `keep`). Stops `after_head` batches after the last head batch, or after
    `limit` batches."""
    from fwe_cli.errors import EndOfData
    from fwe_cli.loader import FineWebLoader, resolve_config

    config = resolve_config(env={}, tokenizer=settings.pop("tokenizer"), seq_len=SEQ_LEN, batch_size=BATCH,
                            **settings)
    batches, fetch_s = [], []
    with FineWebLoader(config) as loader:
        while True:
            asked = time.perf_counter()
            try:
                batch = loader.next_batch()
            except EndOfData:
                break
            fetch_s.append(time.perf_counter() - asked)
            steps = len(fetch_s)
            if keep:
                batches.append(np.array(batch))
            last_head = loader.parts.last_step.get("head", 0)
            if after_head is not None and last_head and steps - last_head >= after_head:
                break
            if limit is not None and steps >= limit:
                break
            if step_s:
                time.sleep(step_s)  # the simulated training step: the loader's producer runs meanwhile
        stats = loader.stats()
    return {"first_batch_s": stats["first_batch_s"], "fetch_s": fetch_s, "steps": stats["steps"],
            "parts": stats.get("parts"), "batches": batches}


def shuffle_seed(files: int) -> int:
    """A seed whose first epoch reads a file the bootstrap does not hold (not the first) first."""
    from fwe_cli.loader.sources.units import permutation

    return next(seed for seed in range(1000) if permutation(files, "units", seed, 0)[0] != 0)


def unreachable_endpoint() -> str:
    """An endpoint on 127.0.0.1 that refuses connections (a port bound, then let go)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def time_to_failure(tokenizer: str, head: Path) -> dict:
    """The bootstrap read with --tail hub and the Hub unreachable (the tokenizer is cached): seconds from the last
    head batch handed over to the error, and the error's name and line."""
    from fwe_cli.errors import FweError
    from fwe_cli.loader import FineWebLoader, resolve_config

    config = resolve_config(env={}, tokenizer=tokenizer, seq_len=SEQ_LEN, batch_size=BATCH, local_path=str(head),
                            tail="hub")
    last = time.perf_counter()
    with FineWebLoader(config) as loader:
        try:
            for _ in loader:
                last = time.perf_counter()
        except FweError as exc:
            return {"error": type(exc).__name__, "line": str(exc), "head_batches": loader.stats()["steps"],
                    "boundary_to_error_s": round(time.perf_counter() - last, 3)}
    return {"error": None, "line": None, "head_batches": loader.stats()["steps"], "boundary_to_error_s": None}


def tokenize_batch_s(head: Path, tokenizer: str) -> float:
    """Median seconds to encode the documents that fill one batch (the bootstrap's first ones), fwe's tokenizer."""
    import orjson

    from fwe_cli.loader.tokenization.doc_tokenizer import load_tokenizer

    encoder = load_tokenizer(tokenizer, "auto")
    texts, tokens = [], 0
    with open(head / "part-00000.jsonl", "rb") as part:
        for line in part:
            texts.append(orjson.loads(line)["text"])
            tokens += len(texts[-1]) // 4
            if tokens >= SEQ_LEN * BATCH:
                break
    times = []
    for _ in range(7):
        started = time.perf_counter()
        encoder.encode_docs(texts)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def summarise(local: list[dict], head_tail: list[dict], rtt_s: float, tokenize_s: float) -> dict:
    local_p95 = [p95(r["fetch_s"][20:]) for r in local]
    windows, worst, tail_first = [], [], []
    for run in head_tail:
        boundary = run["parts"]["boundary"]["step"]  # 1-based: fetch_s[boundary - 1] is the first tail batch
        window = run["fetch_s"][max(0, boundary - 1 - WINDOW):boundary - 1 + WINDOW]
        windows.append(p95(window))
        worst.append(max(window))
        tail_first.append(run["fetch_s"][boundary - 1])
    record = {
        "local_p95_ms": harness.spread([v * 1e3 for v in local_p95], 4),
        "window_p95_ms": harness.spread([v * 1e3 for v in windows], 4),
        "window_worst_ms": harness.spread([v * 1e3 for v in worst], 4),
        "first_tail_batch_ms": harness.spread([v * 1e3 for v in tail_first], 4),
        "first_batch_s": {"local": median(r["first_batch_s"] for r in local),
                          "head_tail": median(r["first_batch_s"] for r in head_tail)},
        "boundary_step": median(r["parts"]["boundary"]["step"] for r in head_tail),
        "allowed_worst_ms": round((rtt_s + tokenize_s) * 1e3, 3),
    }
    record["window_over_local_p95"] = ratio(median(windows), median(local_p95))
    record["first_batch_ratio"] = ratio(record["first_batch_s"]["head_tail"], record["first_batch_s"]["local"])
    record["claims"] = {
        "window_p95_le_2x_local": record["window_over_local_p95"] is not None and record["window_over_local_p95"] <= 2,
        "worst_boundary_step_le_rtt_plus_tokenize": median(worst) <= rtt_s + tokenize_s,
        "first_batch_within_1_25x_local": record["first_batch_ratio"] is not None and record["first_batch_ratio"] <= 1.25,
    }
    return record


def parser():
    parser = harness.bench_parser(NAME, __doc__)
    parser.add_argument("--reps", type=int, default=3, help="Interleaved repetitions (default 3).")
    parser.add_argument("--rtt-ms", type=float, default=50.0, help="Round-trip time the proxy adds (default 50).")
    parser.add_argument("--gb", type=float, default=0.02, help="Size of the bootstrap (default 0.02).")
    parser.add_argument("--mb", type=float, default=40.0, help="Parquet MB of the test Hub dataset (default 40).")
    parser.add_argument("--step-ms", default="0,20", help="Consumer step times to run, comma-separated (default 0,20).")
    parser.add_argument("--tokenizer", default="gpt2", help="Tokenizer (default gpt2, from the test Hub).")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = harness.parse(parser(), argv)
    steps = [float(s) / 1e3 for s in args.step_ms.split(",") if s.strip()]
    rtt_s = args.rtt_ms / 1e3
    from fwe_cli.bootstrap.config import bootstrap_config
    from fwe_cli.bootstrap.run import run_bootstrap

    with tempfile.TemporaryDirectory(prefix="bench-head-tail-") as tmp:
        work = Path(tmp)
        say(f"building {args.mb} MB of test Hub data ...")
        build_repos(work / "hub", BuildSpec(mb=args.mb, shards=4))
        homes = iter(range(10_000))
        with HubServer(work / "hub") as server, RttProxy(("127.0.0.1", server.port), rtt_s) as proxy:
            head = work / "boot"
            with hub_env(proxy.url, work / f"home{next(homes)}"):
                made = run_bootstrap(bootstrap_config(out=str(head), gb=args.gb, source="hub"))
            revision = made["manifest"]["revision"]
            say(f"bootstrap: {made['documents']} documents, {made['bytes'] / 1e6:.1f} MB, revision {revision[:12]}")
            with hub_env(proxy.url, work / f"home{next(homes)}"):
                tokenize_s = tokenize_batch_s(head, args.tokenizer)
            by_step = {}
            for step_s in steps:
                def local(rep: int, step_s=step_s) -> dict:
                    with hub_env(proxy.url, work / f"home{next(homes)}"):
                        return run_loader({"tokenizer": args.tokenizer, "local_path": str(head)}, step_s, None, None)

                def head_tail(rep: int, step_s=step_s) -> dict:
                    with hub_env(proxy.url, work / f"home{next(homes)}"):
                        return run_loader({"tokenizer": args.tokenizer, "local_path": str(head), "tail": "hub"},
                                          step_s, AFTER_BOUNDARY, None)

                runs = harness.interleaved(args.reps, {"local": local, "head_tail": head_tail},
                                           after_rep=lambda rep, r: say(f"step {step_s * 1e3:g} ms: rep {rep + 1} done"))
                by_step[f"{step_s * 1e3:g}"] = summarise(runs["local"], runs["head_tail"], rtt_s, tokenize_s)
                say(f"step {step_s * 1e3:g} ms: {by_step[f'{step_s * 1e3:g}']}")
            identical = {}
            for label, extra in (("no_shard", {}), ("reader_0_of_3", {"shard_mod": 3, "shard_rem": 0}),
                                 ("shuffled", {"shuffle_seed": shuffle_seed(4), "shuffle_window": 256})):
                with hub_env(proxy.url, work / f"home{next(homes)}"):
                    joined = run_loader({"tokenizer": args.tokenizer, "local_path": str(head), "tail": "hub", **extra},
                                        0, AFTER_BOUNDARY, None, keep=True)
                    hub = run_loader({"tokenizer": args.tokenizer, "source": "hub", "revision": revision, **extra}, 0,
                                     None, len(joined["batches"]), keep=True)
                identical[label] = {"batches": len(joined["batches"]), "head_batches": joined["parts"]["head_batches"],
                                    "identical": len(joined["batches"]) == len(hub["batches"]) and all(
                                        np.array_equal(a, b) for a, b in zip(joined["batches"], hub["batches"]))}
                say(f"head+tail == --source hub ({label}): {identical[label]}")
            with hub_env(unreachable_endpoint(), work / f"home{next(homes)}"):
                unreachable = time_to_failure(args.tokenizer, head)
            say(f"Hub unreachable at the boundary: {unreachable}")
    harness.write_result(NAME, args, {
        "kind": "head_tail_bench", "rtt_ms": args.rtt_ms, "bootstrap": {"gb": args.gb, "documents": made["documents"],
                                                                       "bytes": made["bytes"]},
        "batch": [BATCH, SEQ_LEN], "tokenize_batch_ms": round(tokenize_s * 1e3, 3), "by_step_ms": by_step,
        "identical_to_hub": identical, "unreachable": unreachable,
        "claims": {"identical_to_hub": all(v["identical"] for v in identical.values()),
                   "unreachable_exits_within_10_s": unreachable["error"] == "TailUnreachable"
                                                    and unreachable["boundary_to_error_s"] <= 10,
                   **{f"step_{k}_ms_{name}": ok for k, v in by_step.items() for name, ok in v["claims"].items()}},
    })
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
