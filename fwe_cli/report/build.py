"""`fwe report`'s run: read the inputs, plan their pictures, draw them when matplotlib is installed, write report.md.

    from fwe_cli.report.build import build_report
    result = build_report(["artifacts/measure/<UTC>/summary.json", "logs/"], "report/")

Bad input raises InputError before anything is written; an output folder that cannot be written, OutputError.
Without matplotlib the Markdown is still written and the result's first warning says what to install."""

from __future__ import annotations

import os

from fwe_cli.artifacts import prepare_output_dir, utc_iso, write_output
from fwe_cli.report.inputs import read_inputs

REPORT_FILE = "report.md"


def build_report(paths: list[str], out_dir: str) -> dict:
    """Write the pictures and report.md of `paths` into `out_dir`; the result: {out, report, files (every file
    written, report.md last), inputs [{path, kind, pictures}], warnings}."""
    from fwe_cli import __version__
    from fwe_cli.report.draw import matplotlib_missing, render
    from fwe_cli.report.markdown import render_markdown
    from fwe_cli.report.plan import plan_sections

    inputs = read_inputs(paths)
    prepare_output_dir(out_dir, "write the report to")
    sections = plan_sections(inputs)
    warnings = [warning for inp in inputs for warning in inp.warnings]
    missing = matplotlib_missing()
    files, drawn = [], set()
    if missing is None:
        for picture in (p for section in sections for p in section.pictures):
            files.append(write_output(os.path.join(out_dir, picture.file), render(picture)))
            drawn.add(picture.file)
    notes = [f"Made by fwe {__version__} at {utc_iso()} from {len(inputs)} input(s); pictures are the PNG files "
             "beside this file."]
    if missing is not None:
        notes.append(f"No pictures: {missing}.")
    markdown = render_markdown(sections, drawn, notes, warnings)
    report = write_output(os.path.join(out_dir, REPORT_FILE), markdown.encode("utf-8"))
    files.append(report)
    return {"out": out_dir, "report": report, "files": files,
            "inputs": [{"path": s.input.path, "kind": s.input.kind,
                        "pictures": [os.path.join(out_dir, p.file) for p in s.pictures if p.file in drawn]}
                       for s in sections],
            "warnings": ([missing] if missing else []) + warnings}
