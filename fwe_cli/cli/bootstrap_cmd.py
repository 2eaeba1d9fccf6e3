"""`fwe bootstrap`: stage N GB of FineWeb-Edu as local JSONL parts + manifest; resumable and verifiable."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.artifacts import artifact_path, error_record, prepare_output_dir, provenance, write_json
from fwe_cli.bootstrap.config import DEFAULT_CHECKPOINT_MB, DEFAULT_FILE_MB, bootstrap_config
from fwe_cli.cli.exit_codes import BOOTSTRAP_EXIT_CODES_HELP, EXIT_INTERRUPTED
from fwe_cli.cli.invocation import Run
from fwe_cli.cli.options import (
    HOLDOUT_HELP,
    HOLDOUT_SPLIT_HELP,
    SPLIT_HELP,
    ArtifactsDir,
    JsonFlag,
    fwe_command,
    storage_option_flag,
)
from fwe_cli.cli.output import console, holdout_line, report_verify, write_failure_artifact
from fwe_cli.cli.progress import BootstrapProgress, StopOnSignal, tokenize_with_progress
from fwe_cli.errors import FweError

HELP = """Copy N GB of FineWeb-Edu to local disk once (JSONL parts + manifest.json), then train from disk.

Safe to interrupt: parts are written under temporary names, fsynced and renamed. After Ctrl-C, kill -9 or a full disk, re-running the same command continues where it stopped and ends byte-identical to an uninterrupted run. Other arguments against an existing output are refused (--force starts over).

Train from it with --local-path OUT (an incomplete bootstrap is refused unless --allow-partial). Without --out, OUT is data/fwe_bootstrap under the current directory. Writes artifacts/bootstrap/<UTC timestamp>.json; --json prints the result on stdout.

Examples:

  fwe bootstrap --gb 5    (into ./data/fwe_bootstrap)

  fwe bootstrap --gb 5 --out /data/fwe_bootstrap

  fwe bootstrap --gb 5 --out /data/fwe_bootstrap.jsonl    (one file, manifest beside it)

  fwe bootstrap --gb 5 --out /data/fwe --shard-mod 4 --shard-rem $NODE_RANK

  sbatch --array=0-3 --wrap 'fwe bootstrap --gb 5 --out /data/fwe'    (node index from SLURM_ARRAY_TASK_ID/COUNT)

From the Hub, the parquet files are downloaded (over several connections, sha256-checked against the Hub's listing; a --gb smaller than a file reads only the row groups it needs) and each row group converted as soon as it has arrived; the JSONL is byte-identical to --hub-reader datasets (streaming through `datasets`). Nodes split the Hub source by FILE: node r of N downloads only files i with i % N == r. With --hub-reader datasets and the other sources they split by DOCUMENT (every node reads every row and keeps doc i with i % N == r), as the loader's --shard-mod/--shard-rem do.

  fwe bootstrap --verify --out /data/fwe_bootstrap    (re-hash every part against the manifest)

  fwe bootstrap --gb 0.1 --out /data/fwe_eval --hub-reader datasets --holdout 0.01 --holdout-split holdout    (an evaluation set: the documents every run with --holdout 0.01 leaves out)

  fwe bootstrap --gb 5 --out /data/fwe --tokenize gpt2    (then token shards in /data/fwe/tokens/, as `fwe tokenize`)

  fwe bootstrap --gb 50 --out s3://team-bucket/fineweb-edu    (staged in data/fwe_staging/, then uploaded: parallel multipart uploads, verified, manifest last; a re-run resumes without re-sending finished pieces)

  fwe bootstrap --gb 5 --source s3://team-bucket/fineweb-edu --out /data/fwe    (a bucket staged on this disk)

With --tokenize T, once the text is staged it is tokenized into OUT/tokens/ (OUT.tokens/ beside a single .jsonl): llm.c token shards + manifest, resumable the same way (see `fwe tokenize --help`, runbooks/tokens.md).
"""
EPILOG = BOOTSTRAP_EXIT_CODES_HELP
PANEL = "Source"


def _summary(result: dict, artifact: str) -> None:
    table = Table(title="fwe bootstrap", title_justify="left", show_header=False)
    state = {"interrupted": "[bold yellow]INTERRUPTED (resumable)[/]"}.get(result["outcome"], "[bold green]COMPLETE[/]")
    table.add_row("result", f"{state} — {escape(str(result['outcome']))}")
    table.add_row("output", escape(str(result["output"])))
    table.add_row("staged", f"{result['bytes'] / 1e9:.3f} GB of {result['target_bytes'] / 1e9:.3f} GB target, "
                            f"{result['documents']:,} docs in {result['files']} part file(s)")
    table.add_row("this run", f"{result['bytes_this_run'] / 1e9:.3f} GB in {result['seconds']:.2f} s "
                              f"({result['mb_per_s']:.1f} MB/s)")
    if result["resumed_from_bytes"]:
        table.add_row("resumed", f"from {result['resumed_from_bytes'] / 1e9:.3f} GB; {result['replayed_records']} "
                                 f"records confirmed on disk, {result['discarded_bytes']} torn bytes rewritten")
    bad = result.get("bad_records") or {}
    if bad.get("count"):
        table.add_row("bad records", f"[yellow]{bad['count']} skipped[/] (in manifest), first: {escape(str(bad['examples'][0]))}")
    if result.get("holdout"):
        table.add_row("holdout", holdout_line(result["holdout"]))
    if result.get("source_exhausted"):
        table.add_row("[yellow]note[/]", "the source ended before the target size")
    table.add_row("manifest", escape(str(result["manifest_path"])))
    table.add_row("artifact", escape(artifact))
    if result["outcome"] != "interrupted":  # with --tokenize, the shards: the text would be tokenized again
        trained = result["tokens"]["output"] if "tokens" in result else result["output"]
        table.add_row("next", f"train from it: --local-path {escape(str(trained))}")
    console.print(table)


def _context(config) -> dict:
    """What the artifact records besides the result: the command line, host (free disk of --out) and versions."""
    from fwe_cli.loader.files.bootstrap_format import Layout

    from fwe_cli.loader.remote.storage_options import redact_argv

    directory = Layout.for_out(config.out).directory
    return {"command": "bootstrap", "argv": redact_argv(sys.argv[1:]), **provenance(directory)}


def _verify(out: str, json_out: bool, run: Run) -> None:
    from fwe_cli.loader.files.bootstrap_format import (
        verify_bootstrap,  # the core loads when a command runs, not for --help
    )

    report = verify_bootstrap(out)
    report_verify(report, f"{report['files_checked']} files, {report['bytes'] / 1e9:.3f} GB", json_out, run)


def _opt(kind, *names: str, help: str, panel: str | None = None):
    """An optional flag (None = not given, so the library default applies)."""
    return Annotated[Optional[kind], typer.Option(*names, help=help, rich_help_panel=panel, show_default=False)]


Gb = _opt(float, "--gb", help="GB (10^9 bytes) of JSONL to stage; fractions work (0.002).")
DEFAULT_OUT = os.path.join("data", "fwe_bootstrap")
Out = _opt(str, "--out", help="Output directory (parts + manifest.json), or a path ending in .jsonl for one file. "
                              f"Default {DEFAULT_OUT} (under the current directory).")
Source = _opt(str, "--source", panel=PANEL, help="hub | local | synthetic, or a bucket URL (s3://b/prefix: read as "
                                                 "--local-path). Default hub; --local-path implies local.")
LocalPath = _opt(str, "--local-path", panel=PANEL, help="Local JSONL/TXT/parquet file, directory, glob, or bootstrap dir.")
Dataset = _opt(str, "--dataset", panel=PANEL, help="Hub dataset repo. Default HuggingFaceFW/fineweb-edu.")
Name = _opt(str, "--name", panel=PANEL, help="Hub dataset config. Default sample-10BT.")
Split = _opt(str, "--split", panel=PANEL, help=SPLIT_HELP)
Holdout = Annotated[Optional[str], typer.Option("--holdout", metavar="FRACTION", rich_help_panel=PANEL, show_default=False,
                                                help=HOLDOUT_HELP + ". Needs --hub-reader datasets for the Hub.")]
HoldoutSplit = _opt(str, "--holdout-split", panel=PANEL, help=HOLDOUT_SPLIT_HELP)
Seed = _opt(int, "--seed", panel=PANEL, help="Synthetic source seed. Default 0.")
StorageOption = storage_option_flag(PANEL)
Where = _opt(str, "--where", panel=PANEL,
             help="Copy only the records that pass: comparisons of the source's columns (JSONL fields) joined by "
                  "`and`, e.g. \"int_score >= 3\". Local JSONL/parquet, synthetic, --hub-reader datasets; not TXT, "
                  "not the native Hub reader (it copies whole files).")
ShardMod = _opt(int, "--shard-mod", panel=PANEL,
                help="Split the source over N nodes. Hub (native reader): parquet file i goes to node i % N, each node "
                     "downloads only its files; other sources and --hub-reader datasets: document i goes to node "
                     "i % N (the loader's rule). Default: SLURM_ARRAY_TASK_COUNT in a SLURM array, else 1.")
ShardRem = _opt(int, "--shard-rem", panel=PANEL, help="This node, 0 <= rem < mod. --gb is per node. Default: "
                                                     "SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN in a SLURM array.")
HubReader = _opt(str, "--hub-reader", panel=PANEL,
                 help="native: download the parquet files and convert them on all cores (default) | datasets: "
                      "stream through the `datasets` library (same JSONL; splits nodes by document).")
Workers = _opt(int, "--workers", panel=PANEL, help="Native Hub reader: conversion processes. Default: threads of "
                                                   "this process.")
Downloads = _opt(int, "--downloads", panel=PANEL,
                 help="Native Hub reader: files downloading or waiting for conversion beside the one being "
                      "converted. Default 2.")
BadRecordPolicy = _opt(str, "--bad-records", panel=PANEL,
                       help="Malformed source record: skip (counted in the manifest) | error. Default skip.")
Fields = _opt(str, "--fields", help="text: {text, id} per line | all: every field (local JSONL lines copied as is). "
                                    "Default text.")
FileMb = _opt(float, "--file-mb", help=f"Roll to a new part file every N MB. Default {DEFAULT_FILE_MB}.")
CheckpointMb = _opt(float, "--checkpoint-mb", help="fsync + save a resume point every N MB; kill -9 redoes at most "
                                                   f"this. Default {DEFAULT_CHECKPOINT_MB}.")
Tokenize = _opt(str, "--tokenize", panel="Tokens", help="Then tokenize the staged text with this tokenizer (byte | "
                "tokenizer.json | Hub id, e.g. gpt2) into OUT/tokens/: llm.c token shards (fwe tokenize).")
ShardTokens = _opt(int, "--shard-tokens", panel="Tokens", help="With --tokenize: most tokens per shard. Default "
                                                               "100000000.")
Force = Annotated[bool, typer.Option("--force", help="Start over: delete this output's own files (never others), "
                                                     "even if its arguments differ.")]
Verify = Annotated[bool, typer.Option("--verify", help=f"Only check --out (default {DEFAULT_OUT}): re-hash every "
                                                       "listed file against the manifest.")]


@fwe_command(with_loader_options=False)
def bootstrap(
    gb: Gb = None,
    out: Out = None,
    source: Source = None,
    local_path: LocalPath = None,
    dataset: Dataset = None,
    name: Name = None,
    split: Split = None,
    holdout: Holdout = None,
    holdout_split: HoldoutSplit = None,
    seed: Seed = None,
    storage_option: StorageOption = None,
    where: Where = None,
    shard_mod: ShardMod = None,
    shard_rem: ShardRem = None,
    hub_reader: HubReader = None,
    workers: Workers = None,
    downloads: Downloads = None,
    bad_records: BadRecordPolicy = None,
    fields: Fields = None,
    file_mb: FileMb = None,
    checkpoint_mb: CheckpointMb = None,
    tokenize: Tokenize = None,
    shard_tokens: ShardTokens = None,
    force: Force = False,
    verify: Verify = False,
    json_out: JsonFlag = False,
    run: Run = None,  # type: ignore[assignment]
    artifacts_dir: ArtifactsDir = Path("artifacts"),
) -> None:
    if out is None:
        out = DEFAULT_OUT
    if not out:
        raise typer.BadParameter("--out must name a directory or a path ending in .jsonl", param_hint="--out")
    if verify:
        _verify(out, json_out, run)
        return
    if gb is None:
        raise typer.BadParameter("--gb is required: how many GB to stage (e.g. 5, or 0.01 for a try-out)",
                                 param_hint="--gb")
    bucket, out = _bucket_out(out)
    if bucket is not None and tokenize is not None:
        raise typer.BadParameter(f"--out {bucket}: token shards are not uploaded to a bucket; bootstrap into it, then "
                                 "run fwe tokenize on a local copy", param_hint="--tokenize")
    config = bootstrap_config(out=out, gb=gb, file_mb=file_mb, checkpoint_mb=checkpoint_mb, source=source,
                              local_path=local_path, dataset=dataset, name=name, split=split, seed=seed, where=where,
                              holdout=holdout, holdout_split=holdout_split,
                              shard_mod=shard_mod, shard_rem=shard_rem, hub_reader=hub_reader, workers=workers,
                              downloads=downloads, bad_records=bad_records, fields=fields, force=force,
                              storage_options=tuple(storage_option or ()))
    tokens_config = _tokens_config(config, tokenize, shard_tokens, force)
    artifact = artifact_path(str(artifacts_dir), "bootstrap")
    prepare_output_dir(os.path.dirname(artifact))  # before hours of copying, not after
    try:
        with StopOnSignal() as stopper, BootstrapProgress() as reporter:
            if bucket is None:
                from fwe_cli.bootstrap.run import run_bootstrap

                result = run_bootstrap(config, on_progress=reporter, should_stop=stopper.stop.is_set)
            else:  # each part uploaded as soon as it is staged, the manifest last
                from fwe_cli.bootstrap.bucket import bootstrap_into

                console.print(f"staging in {escape(config.out)}, uploading to {escape(bucket)}", soft_wrap=True)
                result = bootstrap_into(config, bucket, reporter, stopper.stop.is_set)
        if tokens_config is not None and result["outcome"] != "interrupted":
            tokens = tokenize_with_progress(tokens_config, stopper)
            result["tokens"] = {k: v for k, v in tokens.items() if k != "manifest"}
            result["outcome"] = "interrupted" if tokens["outcome"] == "interrupted" else result["outcome"]
    except FweError as exc:
        write_failure_artifact(artifact, dict(_context(config), ok=False, output=config.out, error=error_record(exc)))
        raise
    except KeyboardInterrupt:  # the second Ctrl-C: no new resume point, the last checkpoint stands
        aborted = KeyboardInterrupt("aborted by a second Ctrl-C")
        write_json(artifact, dict(_context(config), ok=False, output=config.out, error=error_record(aborted)))
        console.print("[yellow]aborted:[/] re-run the same command to resume from the last checkpoint")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    result["artifact"] = artifact
    write_json(artifact, dict(_context(config), **result))
    _summary(result, artifact)
    if "tokens" in result:
        console.print(f"tokens: {result['tokens']['tokens']:,} in {result['tokens']['shards']} shard(s) at "
                      f"{escape(result['tokens']['output'])} ({result['tokens']['outcome']})", soft_wrap=True)
    if json_out:
        run.print_json(result)
    if result["outcome"] == "interrupted":
        console.print("[yellow]interrupted:[/] resume point saved; re-run the same command to continue")
        raise typer.Exit(EXIT_INTERRUPTED)


def _bucket_out(out: str) -> tuple[str | None, str]:
    """(the bucket URL, the local folder it is staged in) for --out s3://..., else (None, out)."""
    from fwe_cli.bootstrap.config import staging_for
    from fwe_cli.loader.remote.object_store import is_url

    if not is_url(out):
        return None, out
    if out.endswith(".jsonl"):
        raise typer.BadParameter(f"--out {out}: a bucket holds a directory bootstrap (parts + manifest.json); drop "
                                 "the .jsonl ending", param_hint="--out")
    return out, staging_for(out)


def _tokens_config(config, tokenizer: str | None, shard_tokens: int | None, force: bool):
    """`fwe tokenize OUT --out OUT/tokens` for --tokenize (OUT.tokens beside a single-file bootstrap); None without.
    One task: a bootstrap split across nodes gives each node its own OUT, whose text that node tokenizes whole."""
    if tokenizer is None:
        if shard_tokens is not None:
            raise typer.BadParameter("--shard-tokens needs --tokenize", param_hint="--shard-tokens")
        return None
    from fwe_cli.tokens.run import tokenize_config

    out = config.out + ".tokens" if config.out.endswith(".jsonl") else os.path.join(config.out, "tokens")
    return tokenize_config(config.out, out, tokenizer, shard_tokens, force=force, task=0, tasks=1)
