"""Loader flags shared by every command, declared once and added to each command's signature.

Every flag defaults to None ("not given") so `resolve_config` can apply flag > NSA_FWE_* variable > default.
"""

import copy
import functools
import inspect
import os
import typing
from pathlib import Path
from typing import Annotated, Callable, Optional

import typer

from fwe_cli.cli.exit_codes import exit_code_for, internal_error_line
from fwe_cli.cli.invocation import Invocation, Run, current
from fwe_cli.cli.output import console, report_failure
from fwe_cli.errors import FweError, InternalError

PANEL = "Loader"


def _opt(*names: str, help: str, **kw) -> typer.models.OptionInfo:
    return typer.Option(*names, help=help, rich_help_panel=PANEL, show_default=False, **kw)


# the source flags that fwe bootstrap and fwe tokenize declare too (--holdout is read as text: the split's own check
# names what was typed, as for NSA_FWE_HOLDOUT)
SPLIT_HELP = "Hub split. Default train. (A held-out set of any source: --holdout, --holdout-split.)"
HOLDOUT_HELP = ("Hold out this fraction of the documents (0 <= F < 1) as an evaluation set, each chosen by a stable "
                "hash of its id (of its text where it has none): the same set on every machine, for any shard, "
                "shuffle, file order or resume. Default: none")
HOLDOUT_SPLIT_HELP = ("train | holdout: with --holdout, read the documents not held out (train) or the held-out ones "
                      "(holdout). Default train.")

STORAGE_OPTION_HELP = ("An option of the object store's filesystem for an s3:// gs:// az:// hf:// URL (s3fs, gcsfs, "
                       "adlfs: anon=true, endpoint_url=URL, client_kwargs.region_name=R; repeat it), as datasets' "
                       "storage_options; credentials come from where their tools read them (AWS_*, "
                       "GOOGLE_APPLICATION_CREDENTIALS, ...); a secret's value is recorded as <redacted>")


def storage_option_flag(panel: str) -> object:
    """--storage-option for a command that declares its own source flags (bootstrap, tokenize)."""
    return Annotated[Optional[list[str]], typer.Option("--storage-option", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP
                                                       + ".", rich_help_panel=panel, show_default=False)]


LOADER_OPTIONS: dict[str, tuple[object, object]] = {
    "source": (Optional[str], _opt("--source", help="hub | local | synthetic. Default hub; --local-path implies local.")),
    "local_path": (Optional[str], _opt("--local-path", help="JSONL/TXT/parquet file, directory, glob, or bootstrap dir; or an object store's URL: s3://bucket/prefix, gs://, az://, hf://datasets/... (see runbooks/object-stores.md).")),
    "storage_options": (Optional[list[str]], _opt("--storage-option", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP + " (env NSA_FWE_STORAGE_OPTIONS, space apart).")),
    "mix": (Optional[str], _opt("--mix", help="A JSON or TOML file naming several sources with weights (shares of tokens, or of documents); their documents are mixed in that ratio, exactly and deterministically (env NSA_FWE_MIX). See runbooks/mix.md.")),
    "tail": (Optional[str], _opt("--tail", help="hub: with --local-path BOOTSTRAP_DIR (a bootstrap of the Hub), continue from the Hub at the first document it did not copy, same revision: the Hub's stream, its head read from disk (env NSA_FWE_TAIL). Default: none.")),
    "grow": (Optional[bool], _opt("--grow", help="With --tail hub: append the Hub documents read after the bootstrap to it as new parts (crash-safe, under its lock), so the next job starts local for longer (env NSA_FWE_GROW=1).")),
    "dataset": (Optional[str], _opt("--dataset", help="Hub dataset repo. Default HuggingFaceFW/fineweb-edu.")),
    "name": (Optional[str], _opt("--name", help="Hub dataset config. Default sample-10BT.")),
    "split": (Optional[str], _opt("--split", help=SPLIT_HELP)),
    "holdout": (Optional[str], _opt("--holdout", metavar="FRACTION", help=HOLDOUT_HELP + " (env NSA_FWE_HOLDOUT).")),
    "holdout_split": (Optional[str], _opt("--holdout-split", help=HOLDOUT_SPLIT_HELP)),
    "revision": (Optional[str], _opt("--revision", help="Hub branch, tag or commit sha to read. Default main; the artifact records the commit.")),
    "hub_reader": (Optional[str], _opt("--hub-reader", help="native (huggingface_hub + pyarrow range reads) | datasets (datasets streaming, the reference). Default native.")),
    "where": (Optional[str], _opt("--where", help="Keep only the rows that pass: comparisons of the source's columns (JSONL fields) with numbers, quoted strings or true/false, joined by `and`: \"int_score >= 3 and language_score > 0.9\". Hub and parquet: row groups whose statistics rule every row out are not read. Not for TXT. Default: every row.")),
    "hub_cache": (Optional[bool], _opt("--cache/--no-cache", help="Reuse the cached Hub listing, first row groups and tokenizer.json (a warm start makes at most one request); --no-cache asks the Hub for all. Default on.")),
    "tokenizer": (Optional[str], _opt("--tokenizer", help="byte | path/to/tokenizer.json | Hub id (gpt2). Default byte.")),
    "seq_len": (Optional[int], _opt("--seq-len", help="Tokens per row. Default 1024.")),
    "batch_size": (Optional[int], _opt("--batch", help="Rows per batch. Default 1.")),
    "doc_batch": (Optional[int], _opt("--doc-batch", help="Docs per encode_batch call (env NSA_FWE_DOC_BATCH). Default 64.")),
    "queue_depth": (Optional[int], _opt("--q", help="Prefetch queue depth in batches (env NSA_FWE_Q). Default 8.")),
    "prefetch": (Optional[bool], _opt("--prefetch/--no-prefetch", help="Background producer thread (env NSA_FWE_PREFETCH). Default on.")),
    "warmup_batches": (Optional[int], _opt("--warmup-batches", help="Batches to queue before step 1 (env NSA_FWE_WARMUP_BATCHES). Default 0.")),
    "warmup_timeout": (Optional[float], _opt("--warmup-timeout", help="Max warmup wait, s (env NSA_FWE_WARMUP_TIMEOUT). Default 30.")),
    "report_docs": (Optional[int], _opt("--report-docs", help="Progress heartbeat every N docs, 0 off (env NSA_FWE_REPORT_DOCS). Default 1000.")),
    "tokenizer_threads": (Optional[int], _opt("--tokenizer-threads", help="Parallel tokenize threads, 0 = per core (env NSA_FWE_TOKENIZER_THREADS).")),
    "tokenizer_backend": (Optional[str], _opt("--tokenizer-backend", help="auto (tiktoken once proven identical) | tokenizers | tiktoken. Default auto.")),
    "shard_mod": (Optional[int], _opt("--shard-mod", help="Number of shards: doc i goes to shard i % mod. Default: WORLD_SIZE (torchrun), else SLURM_NTASKS, else 1.")),
    "shard_rem": (Optional[int], _opt("--shard-rem", help="This shard, 0 <= rem < mod. Default: RANK (torchrun), else SLURM_PROCID, else 0.")),
    "seed": (Optional[int], _opt("--seed", help="Synthetic source seed. Default 0.")),
    "shuffle_seed": (Optional[int], _opt("--shuffle-seed", help="Shuffle with this seed: file order per epoch, documents in windows of --shuffle-window; same seed, same order on any Q/doc batch/threads/rank count. Default off.")),
    "shuffle_window": (Optional[int], _opt("--shuffle-window", help="Documents per shuffle window (held in memory). Default 10000.")),
    "epochs": (Optional[int], _opt("--epochs", help="Passes over the data. Default 1.")),
    "bad_records": (Optional[str], _opt("--bad-records", help="Malformed local record: skip (count, report) | error. Default skip.")),
    "allow_partial": (Optional[bool], _opt("--allow-partial", help="Read an incomplete bootstrap directory.")),
    "verify_parts": (Optional[bool], _opt("--verify-parts", help="Before reading a bootstrap, compare each part's sha256 with its manifest (sizes are always compared).")),
    "synthetic_on_fail": (Optional[bool], _opt("--synthetic-on-fail", help="If the first batch fails, fall back LOUDLY to synthetic data.")),
    "labels": (Optional[bool], _opt("--labels", help="Batches of input and next-token labels, int32 [B, T] each, from windows of B*T+1 tokens overlapping by one: no token lost.")),
    "boundaries": (Optional[bool], _opt("--boundaries", help="Batches carry document boundaries: per-token positions within the document, and per-row cu_seqlens (varlen attention).")),
    "bos": (Optional[bool], _opt("--bos", help="The tokenizer's BOS (else end-of-text) before each document instead of end-of-text after it: llm.c's layout (GPT-2: 50256).")),
    "pack": (Optional[str], _opt("--pack", metavar="NAME", help="How rows are filled: stream cuts the token stream wherever a row ends; greedy starts every row at a document and crops the one that does not fit; best-fit starts every row at a document and fills it from a buffer of --pack-buffer documents, cropping about half what greedy crops (env NSA_FWE_PACK). Crops are counted in --json and heartbeat. Default stream.")),
    "pack_buffer": (Optional[int], _opt("--pack-buffer", metavar="N", help="best-fit: documents held to choose each row's from; more crops less, and a resume re-reads 2 to 5 x N documents. Default 1000.")),
    "align_rows": (Optional[bool], _opt("--align-rows", help="The same as --pack greedy (its older name).")),
    "as_torch": (Optional[bool], _opt("--torch", help="Yield torch tensors (pinned memory when CUDA is available).")),
    "heartbeat_dir": (Optional[str], _opt("--heartbeat-dir", help="Write heartbeat_rank{rank}.jsonl telemetry here.")),
    "rank": (Optional[int], _opt("--rank", help="Rank for heartbeat lines. Default: the shard's rem when taken from RANK or SLURM_PROCID, else 0.")),
}

# setting -> the flag that sets it, so a value out of range is reported under the name the user typed; every
# command's --timeout is the loader's per-batch timeout
# (inside Annotated, typer keeps an Option's first name in `default`)
FLAG_NAMES: dict[str, str] = {name: (option.param_decls or (option.default,))[0].split("/")[0]  # type: ignore[attr-defined]
                              for name, (_, option) in LOADER_OPTIONS.items()}
FLAG_NAMES["loader_timeout"] = "--timeout"


# what fwe_command hands a command that declares a parameter of this name (none of them is a flag): its run's outcome
# (fwe_cli.cli.invocation.Run: --json's object, how the run ends), or the whole invocation (its early start too)
GIVEN: dict[str, Callable[[Invocation], object]] = {"run": lambda invocation: invocation.run,
                                                    "invocation": lambda invocation: invocation}
CONTEXT = "fwe_context"  # the parameter through which typer hands the wrapper click's context (where the run is)


def fwe_command(with_loader_options: bool = True, hidden: tuple[str, ...] = ()) -> Callable:
    """Decorate a command: add the loader flags (collected into `loader_flags`; those named in `hidden` are still
    accepted but left out of this command's --help), hand it its `run` or `invocation` when it declares one, and map
    FweError to a one-line message and its exit code."""

    def decorate(func: Callable) -> Callable:
        hints = typing.get_type_hints(func, include_extras=True)  # a module's postponed annotations, resolved
        sig = inspect.signature(func)
        sig = sig.replace(parameters=[p.replace(annotation=hints.get(p.name, p.annotation))
                                      for p in sig.parameters.values()])
        given = [name for name in GIVEN if name in sig.parameters]

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            invocation = current(kwargs.pop(CONTEXT))
            kwargs.update({name: GIVEN[name](invocation) for name in given})
            if with_loader_options:
                kwargs["loader_flags"] = {name: kwargs.pop(name) for name in LOADER_OPTIONS}
            run = invocation.run
            try:
                return func(*args, **kwargs)
            except FweError as exc:  # a failure or an outcome: its line, its code, the error object of --json
                raise typer.Exit(report_failure(run, exc)) from None
            except (typer.Exit, typer.Abort, typer.TyperException):  # typer's own exits and usage errors
                raise
            except KeyboardInterrupt as exc:  # bootstrap handles its own (it saves a resume point first)
                run.note_error(KeyboardInterrupt("interrupted"))
                console.print("[bold red]interrupted[/]", soft_wrap=True)
                raise typer.Exit(exit_code_for(exc)) from None
            except Exception as exc:  # a bug: one line and its own exit code, not a traceback in the user's log
                bug = InternalError(internal_error_line(exc))
                run.note_error(bug)
                if os.environ.get("FWE_TRACEBACK", "").strip() not in ("", "0"):
                    raise
                raise typer.Exit(report_failure(run, bug)) from None

        params = [p for p in sig.parameters.values() if p.name not in ("loader_flags", *given)]
        if with_loader_options:
            for name, (annotation, option) in LOADER_OPTIONS.items():
                if name in hidden:
                    option = copy.copy(option)  # the shared option object stays visible for the other commands
                    option.hidden = True
                params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                                default=None, annotation=Annotated[annotation, option]))
        params.append(inspect.Parameter(CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))
        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as one JSON object on stdout.")]
ArtifactsDir = Annotated[Path, typer.Option("--artifacts-dir", help="Where artifacts are written.")]

# The knobs of a measured run (fwe_cli.measure.plan.RunPlan), shared by `fwe measure` and `fwe tune`; each command
# keeps its own default in its signature.
Steps = Annotated[int, typer.Option(min=1, help="Steady-state steps measured per run, after its first batch.")]
StepMs = Annotated[float, typer.Option(min=0, help="Simulated training step (ms) after each batch; stall is measured against it. Default 100 (about one step of a GPT-2-small-sized model at batch 8 x 1024 on one GPU): give your training log's step time. 0 = the loader alone (raw tokens/s, no stall figure).")]
Repeats = Annotated[int, typer.Option(min=1, help="Repetitions: of the cold/warm sequence (measure, each with a fresh cache) or of every setting's trial (tune, interleaved round by round).")]
Targets = Annotated[Optional[str], typer.Option(help="KPI targets NAME=VALUE, comma list: cold_first_batch_s=10,warm_first_batch_s=5,fetch_p95_ms=100 (the defaults); tune's pick must meet fetch_p95_ms.")]
Timeout = Annotated[float, typer.Option(help="Loader timeout per batch inside a run, s (first batch included).")]
RunTimeout = Annotated[float, typer.Option(help="Hard limit for one run (a subprocess), s; over it the run counts as failed.")]
