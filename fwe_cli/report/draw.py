"""Drawing `fwe report`'s pictures with matplotlib, an optional extra (`pip install 'fwe[report]'`): imported only
inside the drawing functions, through matplotlib's object API (no pyplot: no global figure state, no GUI backend).

`render(picture)` returns the PNG bytes of a `fwe_cli.report.plan.Picture` at exactly its size_px: timelines, the
phase waterfall and stage totals are drawn in `draw_runs`, the tune heat map and the regression deltas in
`draw_grids`, a mix's shares against its weights in `draw_mix` (a schedule's over the steps: `draw_schedule`), the
rows' fill by packing in `draw_fill`."""

from __future__ import annotations

import io

from fwe_cli.report.draw_fill import draw_fill
from fwe_cli.report.draw_grids import draw_deltas, draw_heatmap
from fwe_cli.report.draw_mix import draw_mix
from fwe_cli.report.draw_runs import draw_stages, draw_timeline, draw_waterfall
from fwe_cli.report.draw_schedule import draw_schedule
from fwe_cli.report.plan import DPI, Picture

INSTALL = "pip install 'fwe[report]'"
DRAWERS = {"timeline": draw_timeline, "waterfall": draw_waterfall, "stages": draw_stages, "heatmap": draw_heatmap,
           "deltas": draw_deltas, "mix": draw_mix, "fill": draw_fill, "schedule": draw_schedule}


def matplotlib_missing() -> str | None:
    """None when matplotlib can be imported; else the one line saying what to install."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return f"matplotlib is not installed, so no pictures were drawn (report.md has the numbers): {INSTALL}"
    return None


def render(picture: Picture) -> bytes:
    """The picture as PNG bytes, picture.size_px pixels."""
    from matplotlib.figure import Figure

    width, height = picture.size_px
    figure = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    DRAWERS[picture.kind](figure, picture.data)
    figure.suptitle(picture.title, fontsize=12, fontweight="bold")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()
