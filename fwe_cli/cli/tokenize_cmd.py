"""`fwe tokenize`: tokenize a local source once into llm.c token shards + manifest; resumable and verifiable."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.artifacts import artifact_path, error_record, prepare_output_dir, provenance, write_json
from fwe_cli.cli.bootstrap_cmd import _StopOnSignal
from fwe_cli.cli.exit_codes import EXIT_INTERRUPTED, TOKENIZE_EXIT_CODES_HELP
from fwe_cli.cli.options import ArtifactsDir, JsonFlag, fwe_command
from fwe_cli.cli.output import console, print_json, report_verify, write_failure_artifact
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
PLAIN_EVERY_S = 5.0


class TokensReporter:
    """Progress on stderr: a rich bar over the source's bytes on a terminal, a plain line every few seconds
    otherwise."""

    def __init__(self, live: bool, label: str = "tokenize"):
        self.live, self.label = live, label
        self.progress = self.task = None
        self.last_line = 0.0

    def __enter__(self) -> "TokensReporter":
        if self.live:
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(TextColumn(self.label), BarColumn(), DownloadColumn(),
                                     TextColumn("{task.fields[tokens]:,} tokens, {task.fields[shards]} shards"),
                                     TimeRemainingColumn(), console=console, transient=False)
            self.progress.start()
        return self

    def __call__(self, info: dict) -> None:
        if self.progress is not None:
            if self.task is None:
                self.task = self.progress.add_task(self.label, total=info["source_bytes"], tokens=0, shards=0)
            self.progress.update(self.task, completed=info["source_bytes_done"], tokens=info["tokens"],
                                 shards=info["shards"])
            return
        now = time.monotonic()
        if now - self.last_line < PLAIN_EVERY_S and self.last_line:
            return
        self.last_line = now
        share = info["source_bytes_done"] / info["source_bytes"] if info["source_bytes"] else 0.0
        console.print(f"{self.label}: {info['tokens']:,} tokens in {info['shards']} shards, {info['documents']:,} "
                      f"docs, ~{100 * min(1.0, share):.1f}% of the source, {info['tokens_per_s'] / 1e6:.2f} M "
                      "tokens/s", soft_wrap=True)

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


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


def run_with_progress(config, stopper, label: str = "tokenize") -> dict:
    """run_tokenize with progress on stderr and `stopper` (a _StopOnSignal) polled after every document batch."""
    from fwe_cli.tokens.run import run_tokenize  # the core loads when a command runs, not for --help

    with TokensReporter(live=console.is_terminal, label=label) as reporter:
        return run_tokenize(config, on_progress=reporter, should_stop=stopper.stop.is_set)


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


def tokenize_config(src, out, tokenizer, shard_tokens=None, threads=None, backend=None, bad_records=None,
                    force=False):
    from fwe_cli.tokens.run import DEFAULT_SHARD_TOKENS, TokenizeConfig

    return TokenizeConfig(src=src, out=out, tokenizer=tokenizer, force=force,
                          shard_tokens=DEFAULT_SHARD_TOKENS if shard_tokens is None else shard_tokens,
                          threads=threads or 0, backend=backend or "auto", bad_records=bad_records or "skip")


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
    config = tokenize_config(src, out, tokenizer, shard_tokens, threads, tokenizer_backend, bad_records, force)
    artifact = artifact_path(str(artifacts_dir), "tokenize")
    prepare_output_dir(os.path.dirname(artifact))
    context = {"command": "tokenize", "argv": sys.argv[1:], **provenance(os.path.dirname(os.path.abspath(out)))}
    try:
        with _StopOnSignal() as stopper:
            result = run_with_progress(config, stopper)
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
