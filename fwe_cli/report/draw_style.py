"""What `fwe report`'s pictures share: colours, a log axis labelled in plain numbers, the legend under the figure.
matplotlib is imported inside each function (an optional extra)."""

from __future__ import annotations


def colours(count: int, few: str = "tab10") -> list:
    """Distinct colours: from `few` while it has enough, else tab20 (whose neighbours are alike: pairs of one hue).
    Stages use Dark2, so a stage's bar never takes the colour of the timeline drawn above it."""
    from matplotlib import colormaps

    cmap = colormaps[few] if count <= colormaps[few].N else colormaps["tab20"]
    return [cmap(i % cmap.N) for i in range(count)]


def plain_log_axis(axis) -> None:
    """A log y axis labelled 0.01, 0.1, 1, 10 rather than powers of ten."""
    from matplotlib.ticker import FuncFormatter

    axis.set_yscale("log")
    axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


def legend_below(figure, *axes, columns: int = 3, extra: tuple = ()) -> None:
    """The axes' legend entries under the figure, where they hide no data; `extra`: more labelled artists (a colour
    swatch drawn nowhere else)."""
    handles, labels = list(extra), [artist.get_label() for artist in extra]
    for axis in axes:
        more, names = axis.get_legend_handles_labels()
        handles += more
        labels += names
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncol=min(columns, len(handles)), fontsize=8,
                      frameon=False)
