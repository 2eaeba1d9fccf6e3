"""Drawing how full the rows came of the tokens read (matplotlib imported only inside, through
`fwe_cli.report.draw.render`): per run, trial or process, one bar of the tokens read split into those that reached
a row and those cropped at a row's end, labelled with its packing and the cropped share."""

from __future__ import annotations

from fwe_cli.report.draw_style import legend_below
from fwe_cli.report.row_fill import RowFill


def fill_label(row) -> str:
    return f"{row.label} ({row.pack})" if row.pack else row.label


def draw_fill(figure, fill: RowFill) -> None:
    """One bar per row: the share of the tokens read placed in rows, then the share cropped."""
    axis = figure.subplots()
    ys = list(range(len(fill.rows)))
    cropped = [row.cropped_share or 0.0 for row in fill.rows]
    axis.barh(ys, [1.0 - c for c in cropped], color="tab:blue", label="in rows")
    axis.barh(ys, cropped, left=[1.0 - c for c in cropped], color="tab:red", label="cropped at a row's end")
    for y, row, share in zip(ys, fill.rows, cropped):
        axis.text(1.01, y, f"{share:.1%} cropped ({row.cropped_documents:,} documents)", va="center", fontsize=8)
    axis.set_yticks(ys, [fill_label(row) for row in fill.rows])
    axis.invert_yaxis()
    axis.set_xlim(0, 1.45)
    axis.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    axis.xaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
    axis.set_xlabel("share of the tokens read")
    axis.grid(True, axis="x", alpha=0.3)
    legend_below(figure, axis)
