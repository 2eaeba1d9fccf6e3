"""`fwe tokenize`: tokenize a local source once into llm.c token shards + manifest; resumable and verifiable."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.artifacts import artifact_path, error_record, prepare_output_dir, provenance, write_json
from fwe_cli.cli.exit_codes import EXIT_INTERRUPTED, TOKENIZE_EXIT_CODES_HELP
from fwe_cli.cli.options import ArtifactsDir, JsonFlag, fwe_command
from fwe_cli.cli.output import console, print_json, report_verify, write_failure_artifact
from fwe_cli.cli.progress import StopOnSignal, tokenize_with_progress
from fwe_cli.errors import FweError

HELP = """Tokenize documents once into token shards (llm.c's .bin format), then train at memory speed.

SRC is anything --local-path takes: a bootstrap directory, JSONL/TXT/parquet files, a directory or a glob; its documents are read in the loader's order. Shards are OUT/fineweb_train_000000.bin, ...: a 1 KiB header (magic 20240520, version, token count), then uint16 tokens (uint32, version 2, for a vocabulary over 65,535), the end-of-text token before every document; a document index NAME.idx.npy beside each; whole documents only, at most --shard-tokens per shard. OUT/manifest.json lists them with sha256, the tokenizer and its vocabulary hash.

Safe to interrupt: a shard is written under a temporary name, fsynced and renamed, then listed in the manifest with where the next one starts. After Ctrl-C, kill -9 or a full disk, re-running the same command continues from the last whole shard and ends byte-identical to an uninterrupted run. Other arguments (tokenizer, source, shard size) against an existing output are refused (--force starts over).

Encodes on every core (threads; the tiktoken fast path only once proven identical). Writes artifacts/tokenize/<UTC timestamp>.json; --json prints the result on stdout.

Examples:

  fwe tokenize /data/fwe_bootstrap --tokenizer gpt2 --out /data/fwe_tokens

  fwe tokenize 'data/*.jsonl' --tokenizer ./tokenizer.json --out toks --shard-tokens 10000000

  fwe tokenize --verify --out /data/fwe_tokens    (re-hash every shard and index against the manifest)
"""
EPILOG = TOKENIZE_EXIT_CODES_HELP


def summary(result: dict, artifact: str | None) -> None:
    table = Table(title="fwe tokenize", title_justify="left", show_header=False)
    state = {"interrupted": "[bold yellow]INTERRUPTED (resumable)[/]"}.get(result["outcome"], "[bold green]COMPLETE[/]")
    table.add_row("result", f"{state} — {escape(str(result['outcome']))}")
    table.add_row("output", escape(str(result["output"])))
    tok = result["tokenizer"]
    table.add_row("tokenizer", escape(f"{tok['name']} (vocab {tok['vocab_size']:,}, eot {tok['eot']}, "
                                      f"{result['manifest']['dtype']})"))
    table.add_row("tokens", f"{result['tokens']:,} in {result['shards']} shard(s), {result['documents']:,} docs, "
                            f"{result['bytes'] / 1e9:.3f} GB")
    table.add_row("this run", f"{result['tokens_this_run']:,} tokens in {result['seconds']:.2f} s "
                              f"({result['tokens_per_s'] / 1e6:.2f} M tokens/s)")
    if result["resumed_from_tokens"]:
        table.add_row("resumed", f"from {result['resumed_from_tokens']:,} tokens (the last whole shard)")
    bad = result.get("bad_records") or {}
    if bad.get("count"):
        table.add_row("bad records", f"[yellow]{bad['count']} skipped[/] (in manifest)")
    table.add_row("manifest", escape(str(result["manifest_path"])))
    if artifact:
        table.add_row("artifact", escape(artifact))
    console.print(table)


def _verify(out: str, json_out: bool) -> None:
    from fwe_cli.tokens.layout import verify_tokens

    report = verify_tokens(out)
    report_verify(report, f"{report['shards_checked']} shards, {report['tokens']:,} tokens", json_out)


def _opt(kind, *names: str, help: str):
    return Annotated[Optional[kind], typer.Option(*names, help=help, show_default=False)]


Src = Annotated[Optional[str], typer.Argument(help="Bootstrap directory, JSONL/TXT/parquet file, directory or glob.",
                                              show_default=False)]
Tokenizer = _opt(str, "--tokenizer", help="byte | path/to/tokenizer.json | Hub id (gpt2: works offline). Required.")
Out = _opt(str, "--out", help="Output directory: shards + manifest.json.")
ShardTokens = _opt(int, "--shard-tokens", help="Most tokens per shard (whole documents; a longer document gets a "
                                               "shard of its own). Default 100000000 (llm.c's).")
Threads = _opt(int, "--threads", help="Encoding threads. Default: one per usable core.")
Backend = _opt(str, "--tokenizer-backend", help="auto (tiktoken once proven identical) | tokenizers | tiktoken. "
                                                "Same ids whichever. Default auto.")
BadRecords = _opt(str, "--bad-records", help="Malformed source record: skip (counted in the manifest) | error. "
                                             "Default skip.")
Force = Annotated[bool, typer.Option("--force", help="Start over: delete this output's own files (never others).")]
Verify = Annotated[bool, typer.Option("--verify", help="Only check --out: re-hash every shard and index.")]


@fwe_command(with_loader_options=False)
def tokenize(
    src: Src = None,
    tokenizer: Tokenizer = None,
    out: Out = None,
    shard_tokens: ShardTokens = None,
    threads: Threads = None,
    tokenizer_backend: Backend = None,
    bad_records: BadRecords = None,
    force: Force = False,
    verify: Verify = False,
    json_out: JsonFlag = False,
    artifacts_dir: ArtifactsDir = Path("artifacts"),
) -> None:
    if not out:
        raise typer.BadParameter("--out is required (the directory for the shards)", param_hint="--out")
    if verify:
        _verify(out, json_out)
        return
    if not src:
        raise typer.BadParameter("SRC is required: a bootstrap directory, JSONL/TXT/parquet files or a glob",
                                 param_hint="SRC")
    if not tokenizer:
        raise typer.BadParameter("--tokenizer is required (byte, a tokenizer.json, or a Hub id such as gpt2)",
                                 param_hint="--tokenizer")
    from fwe_cli.tokens.run import tokenize_config

    config = tokenize_config(src, out, tokenizer, shard_tokens, threads, tokenizer_backend, bad_records, force)
    artifact = artifact_path(str(artifacts_dir), "tokenize")
    prepare_output_dir(os.path.dirname(artifact))
    context = {"command": "tokenize", "argv": sys.argv[1:], **provenance(os.path.dirname(os.path.abspath(out)))}
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
        print_json(result)
    if result["outcome"] == "interrupted":
        console.print("[yellow]interrupted:[/] re-run the same command to continue from the last whole shard")
        raise typer.Exit(EXIT_INTERRUPTED)
