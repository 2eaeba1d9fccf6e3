"""`fwe smoke`: time to first batch under a hard timeout; the CI gate."""

import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from fwe_cli.artifacts import artifact_path, write_json
from fwe_cli.cli.errors import EXIT_CODES_HELP, EXIT_FAILED, EXIT_TIMEOUT, exit_code_for, one_line
from fwe_cli.cli.options import ArtifactsDir, JsonFlag, fwe_command
from fwe_cli.cli.output import console, fmt_s, print_json
from fwe_cli.loader.config import resolve_config
from fwe_cli.measure.smoke import run_smoke

HELP = """Pull the first batches under a hard timeout and check them (shape, dtype, id range, separators).

Writes artifacts/smoke/<UTC timestamp>.json; --json prints the same object on stdout.

Examples:

  fwe smoke --source synthetic --tokenizer byte --timeout 60 --json

  fwe smoke --local-path /data/fwe_bootstrap --tokenizer gpt2 --seq-len 2048 --batch 8
"""
EPILOG = EXIT_CODES_HELP
WATCHDOG_GRACE_S = 1.0  # past the timeout, a stuck process is ended from a watchdog thread


def _watchdog(seconds: float, artifact: str, base: dict) -> threading.Timer:
    """Last resort against a hang the loader cannot interrupt (e.g. --no-prefetch on a stalled source)."""

    def fire() -> None:
        record = dict(base, ok=False, error={"type": "HardTimeout", "message": f"no result within {seconds:g} s",
                                             "stage": "unknown (watchdog)"})
        write_json(artifact, record)
        console.print(f"[bold red]error:[/] hard timeout: no result within {seconds:g} s; artifact {artifact}")
        os._exit(EXIT_TIMEOUT)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def _exit(code: int, result: dict) -> None:
    """Exit with `code`; immediately (os._exit) when the producer thread could not be stopped.

    A producer stuck in a native read cannot be joined, and interpreter shutdown then hangs on it and
    aborts: measured against tests/hubsim with the parquet data read stalled and --timeout 5, exit
    came 7 s after the timeout, as SIGABRT ("PyGILState_Release ... finalizing"), once the client's
    10 s read timeout woke pyarrow's I/O thread. Artifact, JSON and message are written by now."""
    if result.get("loader", {}).get("producer_alive"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise typer.Exit(code)


def _summary(result: dict, artifact: str) -> None:
    table = Table(title="fwe smoke", title_justify="left", show_header=False)
    ok = result["ok"]
    table.add_row("result", "[bold green]OK[/]" if ok else "[bold red]FAILED[/]")
    table.add_row("first batch", fmt_s(result["first_batch_s"]))
    table.add_row("batches", f"{result['batches']} x {result['shape']} int32")
    table.add_row("tokens/s", f"{result['tokens_per_s']:,.0f}")
    tok = result["tokenizer"] or {}
    table.add_row("tokenizer", f"{tok.get('name')} ({tok.get('backend')}, vocab {tok.get('vocab_size')})")
    table.add_row("source", ", ".join(f"{k}={v}" for k, v in result["source"].items() if k != "bad_records"))
    bad = result["source"].get("bad_records")
    if bad and bad["count"]:
        table.add_row("bad records", f"[yellow]{bad['count']} skipped[/], first: {bad['examples'][0]}")
    for check in result["checks"]:
        mark = "[green]pass[/]" if check["ok"] else "[red]FAIL[/]"
        table.add_row(f"check {check['name']}", f"{mark} {check['detail']}")
    if result["fallback"]:
        table.add_row("[bold red]FALLBACK[/]", f"synthetic data used: {result['fallback']['reason']}")
    table.add_row("artifact", artifact)
    console.print(table)


@fwe_command()
def smoke(
    timeout: Annotated[float, typer.Option(help="Hard limit in seconds for the first batch and the rest.")] = 60.0,
    batches: Annotated[int, typer.Option(min=1, help="How many batches to pull and check.")] = 3,
    save_batches: Annotated[Optional[Path], typer.Option(help="Save pulled batches to this .npz (diff two nodes/runs).")] = None,
    json_out: JsonFlag = False,
    artifacts_dir: ArtifactsDir = Path("artifacts"),
    loader_flags: dict = None,  # type: ignore[assignment]
) -> None:
    config = resolve_config(loader_timeout=timeout, **loader_flags)
    artifact = artifact_path(str(artifacts_dir), "smoke")
    timer = _watchdog(timeout + WATCHDOG_GRACE_S, artifact, {"config": config.to_dict(), "first_batch_s": None})
    try:
        result, exc = run_smoke(config, batches=batches, save_path=str(save_batches) if save_batches else None)
    finally:
        timer.cancel()
    result["artifact"] = artifact
    write_json(artifact, result)
    _summary(result, artifact)
    if json_out:
        print_json(result)
    if exc is not None:
        console.print(f"[bold red]error:[/] {one_line(exc)}", soft_wrap=True)
        _exit(exit_code_for(exc), result)
    if not result["ok"]:
        _exit(EXIT_FAILED, result)
