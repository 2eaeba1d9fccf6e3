"""Output conventions: data on stdout (JSON: a run's one object, fwe_cli.cli.invocation.Run), humans on stderr (rich)."""

from __future__ import annotations

from rich.console import Console

from fwe_cli.cli.invocation import Run

console = Console(stderr=True, highlight=False)
if not console.is_terminal:  # CI logs: wide enough that tables do not wrap into unreadable columns
    console = Console(stderr=True, highlight=False, width=160)


def report_failure(run: Run, exc: BaseException) -> int:
    """`run` ends on a known failure or outcome: noted for --json's error object, one line on stderr; its exit code
    (fwe_cli.cli.exit_codes, the one table)."""
    from fwe_cli.cli.exit_codes import error_line, exit_code_for

    run.note_error(exc)
    console.print(error_line(exc), soft_wrap=True)
    return exit_code_for(exc)


def holdout_line(split: dict) -> str:
    """A held-out split read by a command ({holdout, holdout_split, documents_kept, documents_removed}), in words."""
    return (f"the {split['holdout_split']} side of --holdout {split['holdout']:g}: this run kept "
            f"{split.get('documents_kept', 0):,} documents and passed over {split.get('documents_removed', 0):,}")


def fmt_s(value: float | None) -> str:
    return "—" if value is None else (f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s")


def fmt_ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} ms"


def warnings_as_lines() -> None:
    """Show warnings (a loud fallback, a call that needed retries, GPT-2 from the packaged vocabulary) as one line
    each on stderr, not Python's two (file:line, then the source line); an FweNotice (not a problem) as a `note:`
    line. Installed by the `fwe` process itself."""
    import warnings

    from rich.markup import escape

    from fwe_cli.errors import FweNotice

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        label = "[dim]note:[/]" if issubclass(category, FweNotice) else "[yellow]warning:[/]"
        console.print(f"{label} {escape(str(message))}", soft_wrap=True)

    warnings.showwarning = show


def report_verify(report: dict, counted: str, json_out: bool, run: Run) -> None:
    """A `--verify` report (bootstrap's parts, tokenize's shards): a `bad:` line per problem and one verdict line
    naming what was checked (`counted`); the report as `run`'s object with --json; VerifyFailed (exit 1) when it is
    not ok."""
    from rich.markup import escape

    from fwe_cli.errors import VerifyFailed

    for problem in report["problems"]:
        console.print(f"[red]bad:[/] {escape(problem['name'])}: {escape(problem['problem'])}", soft_wrap=True)
    status = "[green]OK[/]" if report["ok"] else "[red]FAILED[/]"
    console.print(f"verify {status}: {counted}, complete={report['complete']}, manifest "
                  f"{escape(report['manifest_path'])}", soft_wrap=True)
    if json_out:
        run.print_json(report)
    if not report["ok"]:
        raise VerifyFailed(f"{len(report['problems'])} problem(s) in {report['manifest_path']}"
                           + ("" if report["complete"] else "; not complete"))


def write_failure_artifact(artifact: str, record: dict) -> None:
    """Write a failed run's artifact; when even that cannot be written, one warning line (the run's own error is the
    one to report and exit with, so this never raises)."""
    from rich.markup import escape

    from fwe_cli.artifacts import write_json
    from fwe_cli.cli.exit_codes import one_line
    from fwe_cli.errors import OutputError

    try:
        write_json(artifact, record)
    except OutputError as lost:
        console.print(f"[yellow]warning:[/] no artifact: {escape(one_line(lost))}", soft_wrap=True)
