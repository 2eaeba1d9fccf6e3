"""`fwe smoke`: time to first batch under a hard timeout; the CI gate."""

import os
import threading
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fwe_cli.artifacts import artifact_path, check_output_file, prepare_output_dir, utc_stamp, write_json
from fwe_cli.cli.exit_codes import SMOKE_EXIT_CODES_HELP, exit_code_for, one_line, record_outcome
from fwe_cli.cli.invocation import EarlyStart, Invocation, Run
from fwe_cli.cli.options import FLAG_NAMES, ArtifactsDir, JsonFlag, fwe_command
from fwe_cli.cli.output import console, fmt_s, report_failure
from fwe_cli.cli.regression_gate import Baseline, MaxRegression, print_gate
from fwe_cli.errors import ConfigError, FweError, HardTimeout, OutputError
from fwe_cli.loader.compose.mix_file import SOURCE_WORDS as NAMING_WORDS
from fwe_cli.loader.config import resolve_config
from fwe_cli.loader.variables import env_snapshot
from fwe_cli.loader.limits import check_limit

HELP = """Pull the first batches under a hard timeout and check them (shape, dtype, id range, separators).

Writes artifacts/smoke/<UTC timestamp>.json; --json prints the same object on stdout.

Examples:

  fwe smoke --source synthetic --tokenizer byte --timeout 60 --json

  fwe smoke --local-path /data/fwe_bootstrap --tokenizer gpt2 --seq-len 2048 --batch 8

  fwe smoke --source synthetic --tokenizer byte --baseline baseline/smoke.json --max-regression 20 --json
"""
EPILOG = SMOKE_EXIT_CODES_HELP
# The watchdog fires this long after the loader's own deadline: room for the loader to raise its timeout, close
# (its joins are bounded), and for the command to write the artifact and print the result.
WATCHDOG_GRACE_S = 2.0
WATCHDOG_POLL_S = 0.1


class Watchdog:
    """Last resort against a hang the loader cannot interrupt (e.g. --no-prefetch on a stalled read, which blocks
    the main thread). The loader owns the time limit; this thread only reads the latest moment the loader's call in
    progress returns by (`FineWebLoader.returns_by`: room for a fallback included, then the fallback's own limit)
    and fires WATCHDOG_GRACE_S after it has passed. Firing writes the artifact and ends the run with the timeout
    code (its one result object with --json), which ends the `fwe` process (inside another program, the command's
    call returns with that code once its read does); when the command has ended the run first, its outcome stands and
    the watchdog does nothing. Used as a context manager around the run."""

    def __init__(self, loader, artifact: str, base: dict, run: Run):
        self.loader, self.artifact, self.base, self.run = loader, artifact, base, run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="fwe-watchdog", daemon=True)

    def __enter__(self) -> "Watchdog":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(WATCHDOG_POLL_S):
            by = self.loader.returns_by
            if by is not None and time.perf_counter() > by + WATCHDOG_GRACE_S:
                self._fire()
                return

    def _fire(self) -> None:
        from fwe_cli.artifacts import error_record, provenance, utc_iso

        exc = HardTimeout(f"no result within {WATCHDOG_GRACE_S:g} s after the loader's deadline", stage="unknown (watchdog)")
        code = exit_code_for(exc)
        record = dict(self.base, fallback=self.loader.fallback, ok=False, error=error_record(exc),
                      artifact=self.artifact, **provenance(), finished=utc_iso(), exit_code=code)
        try:
            write_json(self.artifact, record)
            where = f"artifact {self.artifact}"
        except OutputError as failed:  # this thread ends the process: a traceback here would be the last word
            where = one_line(failed)
        if not self.run.finish(code, record):
            return  # the command ended the run as the watchdog fired: its outcome stands, and it ends the process
        console.print(f"[bold red]error:[/] hard timeout: {escape(one_line(exc))}; {escape(where)}", soft_wrap=True)
        if self.run.own_process:
            self.run.end(code)  # the command's thread is stuck: the process ends now
        # inside another program the stuck thread is its caller's: the command ends the run (with this code, its
        # artifact left as written here) once its read returns


# the flags that say where a run's data and tokenizer are, all words (typer need not check them first: the synthetic
# seed, a number, says nothing about where): the source's fields, the tokenizer, and whether the Hub caches are used
SOURCE_WORDS = tuple(name for name in NAMING_WORDS if name != "seed") + ("tokenizer", "hub_cache")


def start_early(words: dict, early: EarlyStart) -> None:
    """Called by the `fwe` process as soon as a smoke's words are read (fwe_cli.cli.app.FweApp), before typer
    checks them and the run imports the loader (~0.1 s in a fresh process): the run's first requests start now, so
    that their round trips overlap that work: the source's (Source.start_early: the Hub listing's, which a warm start
    waits for) and, for a run that reads the Hub, its tokenizer's download when it is not cached. The config comes
    from resolve_config as the run's will, from the words that say where the data is; words that do not resolve
    start nothing (the run reports them). `early` keeps how many Hub requests came before, for the run's count."""
    from fwe_cli.loader.remote.hub_env import requests_sent
    from fwe_cli.loader.sources.registry import source_class
    from fwe_cli.loader.tokenization.names import hub_repo

    try:
        config = resolve_config(flag_names=FLAG_NAMES, **{name: words.get(name) for name in SOURCE_WORDS})
    except FweError:
        return
    source = source_class(config.source)
    early.requests_from = requests_sent()  # the run's requests: from here on, counted in its artifact
    if config.source.uses_hub():  # the HTTP client, readied before the threads below start, each with its first request
        from fwe_cli.loader.remote.http import prepare

        prepare()
    repo = hub_repo(config.tokenizer) if config.tokenizer else None
    if config.source.uses_hub() and config.hub_cache and repo is not None:  # --no-cache revalidates: its load asks itself
        from fwe_cli.loader.flow.in_background import import_in_background
        from fwe_cli.loader.tokenization.hub_fetch import start_fetch

        if start_fetch(repo, "tokenizer.json"):  # first: a cold source starts importing pyarrow (and numpy) next
            import_in_background("tokenizers")  # its parser, imported while the download and the listing wait
    source.start_early(config.source, config.read_options())


def rank_path(path: Path, rank: int, flag: str = "--save-batches") -> Path:
    """`flag`'s path with `{rank}` replaced by `rank` (the shard's rem); any other brace is a usage error."""
    text = str(path).replace("{rank}", str(rank))
    if "{" in text or "}" in text:
        raise ConfigError(f"{flag} takes only {{rank}} as a placeholder (the shard's rem), got {str(path)!r}")
    return Path(text)


def _summary(result: dict, artifact: str) -> None:
    table = Table(title="fwe smoke", title_justify="left", show_header=False)
    ok = result["ok"]
    table.add_row("result", "[bold green]OK[/]" if ok else "[bold red]FAILED[/]")
    table.add_row("first batch", fmt_s(result["first_batch_s"]))
    table.add_row("batches", escape(f"{result['batches']} x {result['shape']} int32"))
    table.add_row("tokens/s", f"{result['tokens_per_s']:,.0f}")
    tok = result["tokenizer"] or {}
    table.add_row("tokenizer", escape(f"{tok.get('name')} ({tok.get('backend')}, vocab {tok.get('vocab_size')})"))
    table.add_row("source", escape(", ".join(f"{k}={v}" for k, v in result["source"].items()
                                             if k not in ("bad_records", "sources", "children"))))
    if len(result["loader"].get("sources") or ()) > 1:  # a mix: each source's share
        for entry in result["loader"]["sources"]:
            table.add_row("  mix source", escape(f"{entry['source']}: weight {entry['weight']:g}, "
                                                f"{entry['documents']:,} documents, {entry['tokens'] or 0:,} tokens"))
    bad = result["source"].get("bad_records")
    if bad and bad["count"]:
        table.add_row("bad records", f"[yellow]{bad['count']} skipped[/], first: {escape(str(bad['examples'][0]))}")
    for check in result["checks"]:
        mark = "[green]pass[/]" if check["ok"] else "[red]FAIL[/]"
        table.add_row(f"check {check['name']}", f"{mark} {escape(check['detail'])}")
    if result["fallback"]:
        table.add_row("[bold red]FALLBACK[/]", f"synthetic data used: {escape(result['fallback']['reason'])}")
    table.add_row("artifact", escape(artifact))
    console.print(table)


def _warnings(result: dict) -> None:
    """With --json (no table): what the table would warn about, one `warning:` line each."""
    bad = result["source"].get("bad_records")
    if bad and bad["count"]:
        console.print(f"[yellow]warning:[/] bad records: {bad['count']} skipped, first: "
                      f"{escape(str(bad['examples'][0]))}", soft_wrap=True)
    if result["fallback"]:
        console.print(f"[yellow]warning:[/] FALLBACK: synthetic data used: {escape(result['fallback']['reason'])}",
                      soft_wrap=True)


@fwe_command()
def smoke(
    timeout: Annotated[float, typer.Option(help="Hard limit in seconds for the first batch and the rest.")] = 60.0,
    batches: Annotated[int, typer.Option(min=1, help="How many batches to pull and check.")] = 3,
    save_batches: Annotated[Optional[Path], typer.Option(help="Save pulled batches to this .npz (diff two nodes/runs); {rank} in it becomes the shard's rem (out_{rank}.npz under torchrun).")] = None,
    save_state: Annotated[Optional[Path], typer.Option(help="After the last batch, write the loader's resume state (JSON) here ({rank} as in --save-batches); after a failure, the state after the last batch handed over (e.g. --tail hub with the Hub down: resume once it is back).")] = None,
    resume_state: Annotated[Optional[Path], typer.Option(help="Start right after the batches of a state written by --save-state (same settings; {rank} as in --save-batches). A glob ('ckpt/state_*.json') naming every rank's state resumes them at this run's world size: each rank takes its share of what they left.")] = None,
    baseline: Baseline = None,
    max_regression: MaxRegression = None,
    json_out: JsonFlag = False,
    invocation: Invocation = None,  # type: ignore[assignment]
    artifacts_dir: ArtifactsDir = Path("artifacts"),
    loader_flags: dict = None,  # type: ignore[assignment]
) -> None:
    from fwe_cli.measure.gate import open_gate
    from fwe_cli.measure.smoke import SmokeRun, read_resume_state

    config = resolve_config(loader_timeout=timeout, flag_names=FLAG_NAMES, **loader_flags)
    check_limit("batches", batches, "--batches")
    gate = open_gate("smoke", None if baseline is None else str(baseline), max_regression, config.to_json(),
                     flags=FLAG_NAMES)  # a bad baseline fails before the run
    if save_batches is not None:
        save_batches = rank_path(save_batches, config.shard.rem)
    if save_state is not None:
        save_state = rank_path(save_state, config.shard.rem, "--save-state")
    if resume_state is not None:
        resume_state = rank_path(resume_state, config.shard.rem, "--resume-state")
    # outputs that cannot be written fail now (exit 8), not after the run; the heartbeat directory is checked by
    # the loader as it starts, before its first read
    # ranks started together share a millisecond: with several shards, each names its artifact after its rem
    rank_tag = f"_rank{config.shard.rem}" if config.shard.mod > 1 else ""
    artifact = artifact_path(str(artifacts_dir), "smoke", utc_stamp() + rank_tag)
    prepare_output_dir(os.path.dirname(artifact))
    if save_batches is not None:
        check_output_file(str(save_batches), "save batches to")
    if save_state is not None:
        check_output_file(str(save_state), "save the loader state to")
    resume = read_resume_state(str(resume_state)) if resume_state is not None else None
    early = invocation.early
    run = SmokeRun(config, resume, requests_from=early.requests_from if early is not None else None)
    base = {"config": config.to_json(), "env": env_snapshot(), "first_batch_s": None, "fallback": None,
            "started": run.started}
    with Watchdog(run.loader, artifact, base, invocation.run):
        result, failure = run.finish(batches, save_path=str(save_batches) if save_batches else None,
                                     save_state=str(save_state) if save_state else None)
    if invocation.run.code is not None:  # the watchdog ended the run while this thread was stuck (inside another
        invocation.run.end(invocation.run.code)  # program): its artifact and its object stand
    result["artifact"] = artifact  # the artifact is the --json object
    regression = gate.judge(result)
    outcome = failure or regression  # a smoke that failed by itself keeps its own code and error
    code = record_outcome(result, outcome)
    write_json(artifact, result)
    if json_out:  # the object carries it all; stderr keeps warnings and errors
        invocation.run.print_json(result)
        _warnings(result)
    else:
        _summary(result, artifact)
    print_gate(result, regression, table=not json_out)
    if outcome is not None:
        report_failure(invocation.run, outcome)
    invocation.run.end(code)  # in the `fwe` process without interpreter shutdown, even with a producer stuck in a read
