"""`fwe report`: pictures (PNG) and a Markdown summary of what fwe measured, or of a training job's heartbeats."""

import os
from pathlib import Path
from typing import Annotated, List, Optional

import typer
from rich.markup import escape

from fwe_cli.artifacts import utc_stamp
from fwe_cli.cli.exit_codes import EXIT_INTERNAL, EXIT_OUTPUT, EXIT_USAGE
from fwe_cli.cli.options import ArtifactsDir, JsonFlag, fwe_command
from fwe_cli.cli.invocation import Run
from fwe_cli.cli.output import console

HELP = "\n\n".join([
    "Draw what fwe measured: PNG pictures and a Markdown summary (report.md) for people and CI.",
    "Each ARTIFACT is recognised by its content:",
    "- a fwe measure summary (artifacts/measure/<UTC>/summary.json, or its folder): the cold/warm first batch as a "
    "waterfall of phases; per run the wait in next() step by step against the simulated training step (--step-ms), "
    "with the warmup boundary, queue fill and the wait split by producer stage when the heartbeat carries them; the "
    "regression gate's deltas when it ran with --baseline.",
    "- a fwe tune summary (artifacts/tune/<UTC>/summary.json): the doc batch x Q heat map of the objective's median, "
    "the recommendation framed and starred (one map per tokenizer-thread count swept).",
    "- a fwe smoke artifact (artifacts/smoke/<UTC>.json) gated with --baseline: each metric's change against the "
    "bound.",
    "- heartbeat files of a training job (a directory of heartbeat_rank*.jsonl, any number of ranks, or one file): the"
    " same timeline with every rank overlaid, the training step estimated from the heartbeat timestamps, and the "
    "waits by producer stage per rank.",
    "Pictures need matplotlib, an optional extra: pip install 'fwe\\[report]'. Without it report.md is still written "
    "(it carries every figure as a table), one warning line says what to install, and the exit code stays 0.",
    "Writes OUT/report.md and OUT/<n>-<kind>-<what>.png (n: the input's place on the command line) into --out "
    "(default artifacts/report/<UTC>/); --json prints {files, inputs, warnings}. In GitHub Actions, append the "
    "summary to the job's page with: cat OUT/report.md >> \"$GITHUB_STEP_SUMMARY\" (the tables show there; upload OUT"
    " with actions/upload-artifact for the pictures, which report.md links beside it).",
    "Examples:",
    "  fwe report artifacts/measure/20261125T120741_985Z/summary.json --out report/",
    "  fwe report artifacts/tune/20261125T120757_415Z/ artifacts/smoke/20261125T120753_933Z.json",
    "  fwe report /shared/logs/run42/ --out report/ && cat report/report.md >> \"$GITHUB_STEP_SUMMARY\"",
])
EPILOG = (f"Exit codes: 0 written (also without matplotlib: report.md only, one warning); {EXIT_USAGE} bad usage or "
          f"an input that is missing, empty or not an artifact fwe knows; {EXIT_OUTPUT} --out cannot be written; "
          f"{EXIT_INTERNAL} internal error (a bug).")


@fwe_command(with_loader_options=False)
def report(
    artifacts: Annotated[List[str], typer.Argument(
        metavar="ARTIFACT", show_default=False,
        help="fwe measure/tune summary.json (or its folder), fwe smoke artifact, heartbeat file or directory.")],
    out: Annotated[Optional[Path], typer.Option(
        "--out", show_default=False,
        help="Folder for report.md and the PNGs. Default artifacts/report/<UTC>/.")] = None,
    json_out: JsonFlag = False,
    run: Run = None,  # type: ignore[assignment]
    artifacts_dir: ArtifactsDir = Path("artifacts"),
) -> None:
    from fwe_cli.report.build import build_report

    out_dir = str(out) if out is not None else os.path.join(str(artifacts_dir), "report", utc_stamp())
    result = build_report(list(artifacts), out_dir)
    for warning in result["warnings"]:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
    if json_out:
        run.print_json(dict(result, ok=True, error=None))
        return
    pictures = len(result["files"]) - 1
    console.print(f"report: {escape(result['report'])} ({pictures} picture{'s' if pictures != 1 else ''} beside it) "
                  f"from {len(result['inputs'])} input{'s' if len(result['inputs']) != 1 else ''}", soft_wrap=True)


report.__doc__ = HELP
