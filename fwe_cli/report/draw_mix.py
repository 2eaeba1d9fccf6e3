"""Drawing a mix's realized shares against its weights (matplotlib imported only inside, through
`fwe_cli.report.draw.render`): per source, its weight beside its share of the tokens and of the documents read,
each bar labelled with its percentage; the share the weights are of drawn solid, the other pale and hatched."""

from __future__ import annotations

from fwe_cli.report.draw_style import legend_below
from fwe_cli.report.mix_shares import MixShares, share_text

LABEL_CHARS = 48  # a longer source name is shortened in its middle (report.md has it whole)
BARS = (("weight", "dimgrey"), ("tokens", "tab:blue"), ("documents", "tab:orange"))


def short_name(name: str, width: int = LABEL_CHARS) -> str:
    """`name`, or its start and end around an ellipsis when longer than `width` (a path's file name stays)."""
    if len(name) <= width:
        return name
    keep = width - 1
    return name[:keep // 3] + "…" + name[len(name) - (keep - keep // 3):]


def draw_mix(figure, mix: MixShares) -> None:
    """One row per source, three bars each: its weight, its realized share of tokens, of documents."""
    axis = figure.subplots()
    height = 0.26
    values = {"weight": [s.weight for s in mix.sources], "tokens": [s.token_share for s in mix.sources],
              "documents": [s.document_share for s in mix.sources]}
    reach = max([v for row in values.values() for v in row if v is not None] + [0.01])
    for offset, (what, colour) in enumerate(BARS):
        weak = mix.by is not None and what not in ("weight", mix.by)  # not what the weights are shares of
        label = "weight" if what == "weight" else f"share of {what} read" + (
            " (what the weights are shares of)" if what == mix.by else "")
        ys = [y + (offset - 1) * height for y in range(len(mix.sources))]
        shares = values[what]
        axis.barh(ys, [v or 0.0 for v in shares], height=height * 0.9, color=colour, alpha=0.4 if weak else 1.0,
                  hatch="//" if weak else None, label=label)
        for y, value in zip(ys, shares):
            axis.text((value or 0.0) + reach * 0.01, y, share_text(value), va="center", fontsize=8)
    axis.set_yticks(range(len(mix.sources)), [short_name(s.source) for s in mix.sources])
    axis.invert_yaxis()
    axis.set_xlim(0, reach * 1.18)
    axis.xaxis.set_major_formatter(lambda value, _: f"{value:.0%}")
    axis.set_xlabel("share")
    axis.grid(True, axis="x", alpha=0.3)
    gap = mix.largest_gap
    of = (f"weights are shares of {mix.by}" if mix.by else
          "weights are shares of tokens or of documents (the lines do not say which)")
    axis.set_title(f"over {mix.over}\n{of}" + ("" if gap is None else f"; largest gap {gap * 100:.2f} points"),
                   fontsize=9)
    legend_below(figure, axis)
