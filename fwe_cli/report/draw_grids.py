"""Drawing the tune heat map and the regression deltas (matplotlib imported only inside these functions, through
`fwe_cli.report.draw.render`)."""

from __future__ import annotations

from fwe_cli.report.draw_style import legend_below
from fwe_cli.report.figures import Deltas, Heatmap, cell_shade, cell_text, format_metric

WITHIN_NOISE = "#cfe8cf"  # pale green: every cell within noise of the best, the best among them


def draw_heatmap(figure, heatmap: Heatmap) -> None:
    """The doc batch x Q grid coloured by how much worse than the best each setting is: every cell within noise of
    the best one colour (WITHIN_NOISE), the others from pale to dark red up to the scale's reach (in stall points,
    or % of the best tokens/s, on the colour bar), each cell labelled, the recommended one framed and starred."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap, to_rgba
    from matplotlib.patches import Patch, Rectangle

    axis = figure.subplots()
    rows, cols = range(len(heatmap.doc_batches)), range(len(heatmap.queue_depths))
    shades = [[cell_shade(heatmap, row, col) for col in cols] for row in rows]
    values = np.ma.masked_invalid(np.array([[np.nan if s is None else s * heatmap.reach for s in line]
                                            for line in shades], dtype=float))
    reach, floor = heatmap.reach or 1.0, heatmap.floor or 0.0
    band = min(1.0, floor / reach)  # the part of the scale below the floor: noise, one colour
    ramp = colormaps["OrRd"]
    cmap = ListedColormap([to_rgba(WITHIN_NOISE) if x < band else ramp(0.25 + 0.75 * (x - band) / (1 - band or 1))
                           for x in np.linspace(0, 1, 256)]).with_extremes(bad="lightgrey")
    image = axis.imshow(values, cmap=cmap, aspect="auto", vmin=0.0, vmax=reach)
    for row in rows:
        for col in cols:
            dark = (shades[row][col] or 0.0) > 0.6  # white on the far end of the scale
            axis.text(col, row, cell_text(heatmap, row, col), ha="center", va="center", fontsize=9,
                      color="white" if dark else "black",
                      fontweight="bold" if heatmap.marked == (row, col) else "normal")
    if heatmap.marked is not None:
        row, col = heatmap.marked
        axis.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=3.5,
                                 label=f"recommended: doc batch {heatmap.doc_batches[row]}, "
                                       f"Q {heatmap.queue_depths[col]}"))
        axis.plot(col - 0.36, row - 0.3, marker="*", markersize=16, color="black", linestyle="none")
    swatch = () if heatmap.reach is None else (Patch(color=WITHIN_NOISE, label="within noise of the best"),)
    legend_below(figure, axis, columns=2, extra=swatch)
    axis.set_xticks(cols, [f"Q={q}" for q in heatmap.queue_depths])
    axis.set_yticks(rows, [str(d) for d in heatmap.doc_batches])
    axis.set_xlabel("queue depth Q (batches prefetched)")
    axis.set_ylabel("doc batch (documents per encode call)")
    if heatmap.reach is None:  # nothing ran ok: no scale to show
        return
    bar = figure.colorbar(image, ax=axis)
    bar.set_label(f"stall points worse than the best (under {floor:g}: noise)" if heatmap.unit == "points"
                  else f"% fewer {heatmap.label} than the best (under {floor:g} %: noise)")
    bar.ax.axhline(floor, color="black", linewidth=1)


def draw_deltas(figure, deltas: Deltas) -> None:
    """Each metric's change against the baseline as 'worse by %' (right = worse, whatever the metric's
    direction), the bound as a dashed line, red where it regressed."""
    axis = figure.subplots()
    bounds = sorted({bar.bound_pct for bar in deltas.bars})
    finite = [abs(bar.worse_pct) for bar in deltas.bars if bar.worse_pct is not None]
    reach = max(finite + [b * 1.5 for b in bounds] + [5.0])
    for y, bar in enumerate(deltas.bars):
        over = bar.worse_pct is None or bar.worse_pct > bar.bound_pct
        colour = "tab:green" if not over else ("tab:orange" if bar.passed else "tab:red")
        width = reach * 1.1 if bar.worse_pct is None else bar.worse_pct
        axis.barh(y, width, color=colour, height=0.55, hatch="//" if bar.worse_pct is None else None)
        worse = "baseline 0" if bar.worse_pct is None else f"{bar.worse_pct:+.1f} %"
        verdict = "REGRESSED" if not bar.passed else ("pass (noise)" if over else "pass")
        # on the side of zero the bar leaves free
        right = bar.worse_pct is not None and bar.worse_pct < 0
        axis.text(reach * 0.02 if right else -reach * 0.02, y, f"{worse}  {verdict}\n"
                  f"{format_metric(bar.metric, bar.baseline)} → {format_metric(bar.metric, bar.current)}",
                  va="center", ha="left" if right else "right", fontsize=8)
    for i, bound in enumerate(bounds):
        axis.axvline(bound, color="tab:red", linestyle="--", linewidth=1.5,
                     label=f"bound: {bound:g} % worse" if i == 0 else None)
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_yticks(range(len(deltas.bars)), [bar.metric for bar in deltas.bars])
    axis.invert_yaxis()
    axis.set_ylim(len(deltas.bars) - 0.4, -0.6)
    axis.set_xlim(-reach * 1.2, reach * 1.3)
    axis.set_xlabel("change against the baseline, % (right = worse: slower first batch or p95, fewer tokens/s)")
    legend_below(figure, axis)
    axis.grid(True, axis="x", alpha=0.3)
    axis.set_title(("PASS" if deltas.passed else "REGRESSED") + (f" against {deltas.baseline}" if deltas.baseline
                                                                  else ""), fontsize=9)
