"""`fwe tokenize`: tokenize a local source once into llm.c token shards + manifest; resumable and verifiable."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.artifacts import artifact_path, error_record, prepare_output_dir, provenance, write_json
from fwe_cli.cli.exit_codes import EXIT_INTERRUPTED, TOKENIZE_EXIT_CODES_HELP
from fwe_cli.cli.options import (
    HOLDOUT_HELP,
    HOLDOUT_SPLIT_HELP,
    ArtifactsDir,
    JsonFlag,
    fwe_command,
    storage_option_flag,
)
from fwe_cli.cli.invocation import Run
from fwe_cli.cli.output import console, holdout_line, report_verify, write_failure_artifact
from fwe_cli.cli.progress import StopOnSignal, tokenize_with_progress
from fwe_cli.errors import FweError

HELP = """Tokenize documents once into token shards (llm.c's .bin format), then train at memory speed.

SRC is anything --local-path takes: a bootstrap directory, JSONL/TXT/parquet files, a directory or a glob, or an object store's URL (s3://bucket/prefix, gs://, az://, hf://: --storage-option KEY=VALUE as for the loader); its documents are read in the loader's order. Shards are OUT/fineweb_train_000000.bin, ...: a 1 KiB header (magic 20240520, version, token count), then uint16 tokens (uint32, version 2, for a vocabulary over 65,535), the end-of-text token before every document; a document index NAME.idx.npy beside each; whole documents only, at most --shard-tokens per shard. OUT/manifest.json lists them with sha256, the tokenizer and its vocabulary hash.

Safe to interrupt: a shard is written under a temporary name, fsynced and renamed, then listed in the manifest with where the next one starts. After Ctrl-C, kill -9 or a full disk, re-running the same command continues from the last whole shard and ends byte-identical to an uninterrupted run. Other arguments (tokenizer, source, shard size) against an existing output are refused (--force starts over).

Encodes on every core (threads; the tiktoken fast path only once proven identical). Writes artifacts/tokenize/<UTC timestamp>.json; --json prints the result on stdout.

Across nodes: run the same command as N tasks of a SLURM array (SLURM_ARRAY_TASK_ID/COUNT), under torchrun (RANK/WORLD_SIZE; LOCAL_WORLD_SIZE tasks of a node share its cores) or with --task I --tasks N. The input is split by file: consecutive files of about 16 x --shard-tokens bytes (a span; shards end where spans end, in a single run too) go to one task, contiguous and balanced by bytes. Task I writes OUT/tasks/IIIII-of-NNNNN/, resumable as above; the last task to finish links every task's shards into OUT with one manifest: the shards a single run writes, byte for byte, in its order. `fwe tokenize --merge --out OUT [DIR...]` does that merge by hand.

Examples:

  fwe tokenize /data/fwe_bootstrap --tokenizer gpt2 --out /data/fwe_tokens

  fwe tokenize 'data/*.jsonl' --tokenizer ./tokenizer.json --out toks --shard-tokens 10000000

  fwe tokenize /data/fwe_bootstrap --tokenizer gpt2 --out /data/fwe_eval --holdout 0.01 --holdout-split holdout    (the 1 % held out; --holdout-split train: the rest)

  sbatch --array=0-15 --wrap 'fwe tokenize /data/fwe_bootstrap --tokenizer gpt2 --out /data/fwe_tokens'

  torchrun --nproc-per-node 8 --no-python fwe tokenize /data/fwe_bootstrap --tokenizer gpt2 --out /data/fwe_tokens

  fwe tokenize --merge --out /data/fwe_tokens    (merge OUT/tasks/* into OUT, if the last task did not)

  fwe tokenize --verify --out /data/fwe_tokens    (re-hash every shard and index against the manifest)
"""
EPILOG = TOKENIZE_EXIT_CODES_HELP


def summary(result: dict, artifact: str | None) -> None:
    table = Table(title="fwe tokenize", title_justify="left", show_header=False)
    state = {"interrupted": "[bold yellow]INTERRUPTED (resumable)[/]"}.get(result["outcome"], "[bold green]COMPLETE[/]")
    table.add_row("result", f"{state} — {escape(str(result['outcome']))}")
    table.add_row("output", escape(f"{result['output']} ({result['split']})"))
    tok = result["tokenizer"]
    table.add_row("tokenizer", escape(f"{tok['name']} (vocab {tok['vocab_size']:,}, eot {tok['eot']}, "
                                      f"{result['manifest']['dtype']})"))
    table.add_row("tokens", f"{result['tokens']:,} in {result['shards']} shard(s), {result['documents']:,} docs, "
                            f"{result['bytes'] / 1e9:.3f} GB")
    table.add_row("this run", f"{result['tokens_this_run']:,} tokens in {result['seconds']:.2f} s "
                              f"({result['tokens_per_s'] / 1e6:.2f} M tokens/s)")
    if result["resumed_from_tokens"]:
        table.add_row("resumed", f"from {result['resumed_from_tokens']:,} tokens (the last whole shard)")
    if result.get("holdout"):
        table.add_row("holdout", holdout_line(result["holdout"]))
    bad = result.get("bad_records") or {}
    if bad.get("count"):
        table.add_row("bad records", f"[yellow]{bad['count']} skipped[/] (in manifest)")
    table.add_row("manifest", escape(str(result["manifest_path"])))
    if "merge" in result:
        table.add_row("merge", _merge_line(result["merge"]))
    if artifact:
        table.add_row("artifact", escape(artifact))
    console.print(table)


def _merge_line(merge: dict) -> str:
    """What the task's look at the other tasks found: the merge it made, or the tasks it waits for."""
    if merge["outcome"] == "waiting":
        more = f" (+{merge['waiting_count'] - len(merge['waiting_for'])} more)" \
            if merge["waiting_count"] > len(merge["waiting_for"]) else ""
        return (f"waiting for task(s) {', '.join(map(str, merge['waiting_for']))}{more}: the last to finish merges "
                f"into {escape(merge['output'])}")
    return (f"{escape(merge['outcome'])}: {merge['shards']} shard(s) of {merge['tasks']} task(s) in "
            f"{escape(merge['output'])}")


def _merge(dirs: list[str], out: str, force: bool, artifact: str, context: dict, json_out: bool, run: Run) -> None:
    """`fwe tokenize --merge`: the task outputs `dirs` (none: OUT/tasks/*) into `out`."""
    from fwe_cli.tokens.merge import merge_tokens

    prepare_output_dir(os.path.dirname(artifact))
    try:
        result = merge_tokens(dirs, out, force)
    except FweError as exc:
        write_failure_artifact(artifact, dict(context, ok=False, output=out, error=error_record(exc)))
        raise
    result["artifact"] = artifact
    write_json(artifact, dict(context, **result))
    console.print(f"[bold green]COMPLETE[/] — {_merge_line(result)}: {result['tokens']:,} tokens, "
                  f"{result['files_linked']} file(s) linked, {result['files_copied']} copied; manifest "
                  f"{escape(result['manifest_path'])}", soft_wrap=True)
    if json_out:
        run.print_json(result)


def _verify(out: str, json_out: bool, run: Run) -> None:
    from fwe_cli.tokens.layout import verify_tokens

    report = verify_tokens(out)
    report_verify(report, f"{report['shards_checked']} shards, {report['tokens']:,} tokens", json_out, run)


def _opt(kind, *names: str, help: str):
    return Annotated[Optional[kind], typer.Option(*names, help=help, show_default=False)]


Src = Annotated[Optional[List[str]], typer.Argument(
    help="Bootstrap directory, JSONL/TXT/parquet file, directory or glob (quoted). With --merge: task outputs "
         "(OUT/tasks/IIIII-of-NNNNN); none: every one under OUT/tasks/.", show_default=False)]
Tokenizer = _opt(str, "--tokenizer", help="byte | path/to/tokenizer.json | Hub id (gpt2: works offline). Required.")
Out = _opt(str, "--out", help="Output directory: shards + manifest.json.")
ShardTokens = _opt(int, "--shard-tokens", help="Most tokens per shard (whole documents; a longer document gets a "
                                               "shard of its own). Default 100000000 (llm.c's).")
Threads = _opt(int, "--threads", help="Encoding threads. Default: one per usable core.")
Backend = _opt(str, "--tokenizer-backend", help="auto (tiktoken once proven identical) | tokenizers | tiktoken. "
                                                "Same ids whichever. Default auto.")
BadRecords = _opt(str, "--bad-records", help="Malformed source record: skip (counted in the manifest) | error. "
                                             "Default skip.")
Holdout = Annotated[Optional[str], typer.Option("--holdout", metavar="FRACTION", show_default=False,
                                                help=HOLDOUT_HELP + ".")]
HoldoutSplit = _opt(str, "--holdout-split", help=HOLDOUT_SPLIT_HELP)
StorageOption = storage_option_flag(None)
Force = Annotated[bool, typer.Option("--force", help="Start over: delete this output's own files (never others).")]
Verify = Annotated[bool, typer.Option("--verify", help="Only check --out: re-hash every shard and index.")]
Task = _opt(int, "--task", help="This task's number, 0 <= I < --tasks. Default: SLURM_ARRAY_TASK_ID - "
                                "SLURM_ARRAY_TASK_MIN, else RANK (torchrun), else 0.")
Tasks = _opt(int, "--tasks", help="How many tasks split the input by file (each writes OUT/tasks/IIIII-of-NNNNN/; the "
                                  "last to finish merges). Default: SLURM_ARRAY_TASK_COUNT, else WORLD_SIZE, else 1.")
Merge = Annotated[bool, typer.Option("--merge", help="Only merge task outputs (the DIRs given, else OUT/tasks/*) into "
                                                     "--out: one manifest, the shards linked in a single run's order.")]


@fwe_command(with_loader_options=False)
def tokenize(
    src: Src = None,
    tokenizer: Tokenizer = None,
    out: Out = None,
    shard_tokens: ShardTokens = None,
    threads: Threads = None,
    tokenizer_backend: Backend = None,
    bad_records: BadRecords = None,
    holdout: Holdout = None,
    holdout_split: HoldoutSplit = None,
    storage_option: StorageOption = None,
    task: Task = None,
    tasks: Tasks = None,
    merge: Merge = False,
    force: Force = False,
    verify: Verify = False,
    json_out: JsonFlag = False,
    run: Run = None,  # type: ignore[assignment]
    artifacts_dir: ArtifactsDir = Path("artifacts"),
) -> None:
    if not out:
        raise typer.BadParameter("--out is required (the directory for the shards)", param_hint="--out")
    if verify:
        _verify(out, json_out, run)
        return
    artifact = artifact_path(str(artifacts_dir), "tokenize")
    from fwe_cli.loader.remote.storage_options import redact_argv

    context = {"command": "tokenize", "argv": redact_argv(sys.argv[1:]),
               **provenance(os.path.dirname(os.path.abspath(out)))}
    if merge:
        _merge(src or [], out, force, artifact, context, json_out, run)
        return
    if not src:
        raise typer.BadParameter("SRC is required: a bootstrap directory, JSONL/TXT/parquet files or a glob",
                                 param_hint="SRC")
    if len(src) > 1:
        raise typer.BadParameter(f"give one SRC, got {len(src)} (a glob the shell expanded? quote it: "
                                 "'data/*.jsonl'); --merge takes several task outputs", param_hint="SRC")
    if not tokenizer:
        raise typer.BadParameter("--tokenizer is required (byte, a tokenizer.json, or a Hub id such as gpt2)",
                                 param_hint="--tokenizer")
    from fwe_cli.tokens.run import tokenize_config

    config = tokenize_config(src[0], out, tokenizer, shard_tokens, threads, tokenizer_backend, bad_records, force,
                             task, tasks, holdout=holdout, holdout_split=holdout_split,
                             storage_options=storage_option)
    prepare_output_dir(os.path.dirname(artifact))
    try:
        with StopOnSignal() as stopper:
            result = tokenize_with_progress(config, stopper)
    except FweError as exc:
        write_failure_artifact(artifact, dict(context, ok=False, output=config.out, error=error_record(exc)))
        raise
    except KeyboardInterrupt:
        write_json(artifact, dict(context, ok=False, output=config.out,
                                  error=error_record(KeyboardInterrupt("aborted by a second Ctrl-C"))))
        console.print("[yellow]aborted:[/] re-run the same command to resume from the last whole shard")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    result["artifact"] = artifact
    write_json(artifact, dict(context, **result))
    summary(result, artifact)
    if json_out:
        run.print_json(result)
    if result["outcome"] == "interrupted":
        console.print("[yellow]interrupted:[/] re-run the same command to continue from the last whole shard")
        raise typer.Exit(EXIT_INTERRUPTED)
