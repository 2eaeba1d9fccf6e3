"""`fwe doctor`: one screen of what a bug report needs (versions, node, disk, caches, Hub, tokenizer, torch)."""

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.cli.exit_codes import EXIT_USAGE
from fwe_cli.cli.options import ArtifactsDir, JsonFlag, fwe_command
from fwe_cli.cli.invocation import Run
from fwe_cli.cli.output import console

HELP = """Report this node's fwe setup: fwe and dependency versions, cores, memory, free disk where data goes, the
Hugging Face cache for the dataset (listing, head cache, tokenizer), the Hub's reachability and round trip (one
HEAD request; none with HF_HUB_OFFLINE=1), GPT-2 offline, torch/CUDA and pinned memory.

Given a job's shape (--ranks, with --workers and --tokens-per-s), it also says how many requests the job would
send the Hub's resolver, which the Hub limits per 5 minutes (5,000 for a free account): at its start, per epoch and
in the worst 5 minutes, against one request per read before fwe resolved each file once per node.

It reports problems, it does not fail on them: exit 0 unless its own arguments are bad (in --json, `ok` is false
and `problems` lists them). Attach `fwe doctor --json` to a bug report.

Examples:

  fwe doctor

  fwe doctor --ranks 1024 --workers 8 --tokens-per-s 128e6

  fwe doctor --json --local-path /data/fwe_bootstrap --out /data/fwe_bootstrap

  fwe doctor --bucket s3://team-bucket/fineweb-edu --bucket-write    (list, read, write: one line each)
"""
EPILOG = f"Exit codes: 0 reported (problems are listed, not fatal); {EXIT_USAGE} bad usage."


def _opt(kind, *names: str, help: str):
    return Annotated[Optional[kind], typer.Option(*names, help=help, show_default=False)]


def _mark(value) -> str:
    return {True: "[green]yes[/]", False: "[red]no[/]", None: "—"}.get(value, escape(str(value)))


def _table(report: dict) -> Table:
    table = Table(title=f"fwe doctor — fwe {report['fwe']}", title_justify="left", show_header=False)
    host, versions = report["host"], report["versions"]
    table.add_row("python", escape(f"{host['python']} on {host['platform']}"))
    table.add_row("packages", escape(", ".join(f"{k} {v or '—'}" for k, v in versions.items() if k != "fwe")))
    table.add_row("cpus", f"{host['cpus_usable']} usable ({host['cpus_logical']} logical, {host['cpus_physical']} physical)")
    table.add_row("memory", f"{host['ram_available_gb']} GB available of {host['ram_total_gb']} GB")
    for place in report["disk"]:
        free = "—" if place["free_gb"] is None else f"{place['free_gb']} GB free"
        table.add_row(f"disk ({place['role']})", escape(f"{free} at {place['checked_at']}"))
    cache = report["hf_cache"]
    listing = cache["listing"]
    table.add_row("hf cache", escape(cache["hub_cache"]) + ("" if cache["hub_cache_exists"] else " [dim](empty)[/]"))
    table.add_row("listing", "[yellow]not cached[/]" if listing is None else escape(
        f"{cache['dataset']} {cache['name']}/{cache['split']} @ {listing['commit'][:12]}: {listing['files']} files, "
        f"{listing['bytes'] / 1e9:.2f} GB"))
    table.add_row("head cache", f"{cache['head_cache']['entries']} entries")
    tok = cache["tokenizer"]
    table.add_row("tokenizer", escape(tok["spec"]) + (f" cached: {_mark(tok['cached_file'] is not None)}"
                                                      if "cached_file" in tok else ""))
    table.add_row("gpt2 offline", _mark(report["tokenizer"]["gpt2_packaged"]))
    hub = report["hub"]
    if hub["offline"]:
        table.add_row("hub", escape(f"offline ({hub['endpoint']} not contacted)"))
    elif hub["reachable"]:
        table.add_row("hub", escape(f"reachable {hub['endpoint']}, {hub['rtt_ms']} ms, HTTP {hub['status']}"))
    else:
        table.add_row("hub", f"[red]unreachable[/] {escape(hub['detail'])}")
    torch = report["torch"]
    if not torch["installed"] or torch.get("version") is None:
        table.add_row("torch", escape(torch["detail"]))
    else:
        table.add_row("torch", escape(f"{torch['version']} CUDA {torch['cuda_build'] or '—'}") +
                      f", device: {_mark(torch['cuda_available'])}, pinned memory: {_mark(torch['pinned_memory'])}")
    quota = report.get("hub_quota")
    if quota is not None and quota.get("shape") is not None:
        after, before = quota["after"], quota["before"]
        table.add_row("hub resolves", escape(
            f"{after['start']} at the start ({after['start_warm']} warm), {after['per_epoch']} the first epoch "
            f"({quota['epoch_s']:g} s), {after['per_5_min_warm']} in the worst 5 minutes of "
            f"{quota['quota_5_min']['free']} (free); one per read: {before['per_5_min']} — "
            f"{quota['nodes']} nodes, {quota['dataset']['files']} files, {quota['source']}"))
    elif quota is not None:
        table.add_row("hub resolves", escape(quota["detail"]))
    for check in report.get("bucket", {}).get("checks", []):
        table.add_row(f"bucket {check['check']}", ("[green]ok[/] " if check["ok"] else "[red]failed[/] ")
                      + escape(check["detail"]))
    for problem in report["problems"]:
        table.add_row("[yellow]problem[/]", escape(problem))
    return table


@fwe_command(with_loader_options=False)
def doctor(
    dataset: _opt(str, "--dataset", help="Hub dataset repo. Default HuggingFaceFW/fineweb-edu.") = None,
    name: _opt(str, "--name", help="Hub dataset config. Default sample-10BT.") = None,
    split: _opt(str, "--split", help="Hub split. Default train.") = None,
    revision: _opt(str, "--revision", help="Hub branch, tag or commit sha. Default main.") = None,
    tokenizer: Annotated[str, typer.Option(help="Tokenizer whose cache to check: byte | path | Hub id.")] = "gpt2",
    local_path: _opt(str, "--local-path", help="Where local data is read from (free disk reported).") = None,
    out: _opt(str, "--out", help="Where a bootstrap would write (free disk reported).") = None,
    bucket: _opt(str, "--bucket", help="An object store's URL (s3://bucket/prefix, gs://, az://, hf://) whose access "
                                       "is checked: list, read (and write with --bucket-write), one line each.") = None,
    bucket_write: Annotated[bool, typer.Option("--bucket-write", help="With --bucket: also put and remove a small "
                                                                     "probe object there.")] = False,
    hub_timeout: Annotated[float, typer.Option("--hub-timeout", min=0.1, max=60,
                                               help="Seconds the Hub's HEAD may take.")] = 3.0,
    ranks: Annotated[Optional[int], typer.Option("--ranks", min=1, show_default=False,
                                                 help="A job's ranks: say how many Hub resolves it sends.")] = None,
    workers: Annotated[int, typer.Option("--workers", min=0, help="DataLoader workers per rank (with --ranks).")] = 0,
    tokens_per_s: Annotated[float, typer.Option("--tokens-per-s", min=1.0,
                                                help="The job's tokens per second, all ranks (with --ranks).")] = 1e6,
    ranks_per_node: Annotated[int, typer.Option("--ranks-per-node", min=1,
                                                help="Ranks sharing a node's cache (with --ranks).")] = 8,
    shuffle: Annotated[bool, typer.Option("--shuffle",
                                          help="The job shuffles (--shuffle-seed; with --ranks).")] = False,
    json_out: JsonFlag = False,
    run: Run = None,  # type: ignore[assignment]
    artifacts_dir: ArtifactsDir = Path("artifacts"),
) -> None:
    from fwe_cli.loader.config import LoaderConfig
    from fwe_cli.measure.node_report import run_doctor

    defaults = LoaderConfig().source.options  # the Hub stream a run reads by default
    paths = {"artifacts": str(artifacts_dir)}
    paths.update({role: path for role, path in (("local-path", local_path), ("out", out)) if path})
    job = None if ranks is None else {"ranks": ranks, "workers": workers, "tokens_per_s": tokens_per_s,
                                      "ranks_per_node": ranks_per_node, "shuffle": shuffle}
    report = run_doctor(dataset=dataset or defaults.dataset, name=name or defaults.name, split=split or defaults.split,
                        revision=revision, tokenizer=tokenizer, paths=paths, timeout=hub_timeout, job=job,
                        bucket=bucket, bucket_write=bucket_write)
    console.print(_table(report))
    if json_out:
        run.print_json(report)
