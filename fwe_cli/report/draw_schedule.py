"""Drawing a scheduled mix's planned against its delivered weights over the steps (matplotlib imported only inside,
through `fwe_cli.report.draw.render`): per source, in its colour, the weights in force as a line and the share of
the tokens it delivered as broad pale bars over the steps they were delivered in; each stage's start marked."""

from __future__ import annotations

from fwe_cli.report.draw_mix import short_name
from fwe_cli.report.draw_style import colours, legend_below
from fwe_cli.report.schedule_shares import ScheduleShares


def draw_schedule(figure, data: ScheduleShares) -> None:
    axis = figure.subplots()
    palette = colours(len(data.sources))
    for i, (name, colour) in enumerate(zip(data.sources, palette)):
        axis.plot([step for step, _ in data.planned], [shares[i] for _, shares in data.planned], color=colour,
                  lw=1.8, label=f"{short_name(name)}: planned")
        spans = [(lo, hi, shares[i]) for lo, hi, shares in data.delivered if shares[i] is not None]
        for n, (lo, hi, share) in enumerate(spans):
            axis.hlines(share, lo, hi, color=colour, lw=5, alpha=0.35,
                        label=f"{short_name(name)}: delivered" if n == 0 else None)
    for row in data.rows:
        axis.axvline(row.steps[0], color="grey", ls=":", lw=0.8)
        axis.text(row.steps[0], 1.02, f" stage {row.stage}", fontsize=7, color="dimgrey", va="bottom")
    axis.set_ylim(0, 1.08)
    axis.yaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
    axis.set_xlabel("step")
    axis.set_ylabel("share of the tokens")
    axis.grid(True, alpha=0.3)
    gap = data.gap_text()
    axis.set_title(f"over {data.over}" + (gap and f"; largest gap in a stage {gap}"), fontsize=9)
    legend_below(figure, axis, columns=2)
