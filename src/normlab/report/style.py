"""One figure style for every plot of the lab: Agg backend, fixed colours per placement,
labelled axes, and ``save`` writing PNG + SVG side by side.

Colours are keyed by placement name so that "post" is the same colour in every figure
of every page; unknown names take the next colour of a fixed cycle. In multi-trial figures
the rest of a label ("post warmup_steps=50": the other scientific axes) sets the line style.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

# Okabe-Ito palette: distinguishable for colour-blind readers and in greyscale print.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
PLACEMENT_COLORS = {
    "pre": "#0072B2", "post": "#D55E00", "sandwich": "#009E73", "pre_post": "#CC79A7",
    "post_branch": "#E69F00", "deepnorm": "#882255", "resi_dual": "#7F3C8D", "mix": "#8C6D31",
    "admin": "#3B3B3B", "lns": "#11A579", "none": "#999999", "ngpt": "#E73F74",
}
RC = {
    "figure.figsize": (6.4, 4.0), "figure.dpi": 100, "savefig.dpi": 110,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 9.5, "legend.frameon": False,
    "xtick.labelsize": 10, "ytick.labelsize": 10, "lines.linewidth": 2.0,
    "svg.fonttype": "none", "svg.hashsalt": "normlab",  # deterministic SVG ids
}


def plt() -> Any:
    """pyplot on the Agg backend (files only, no display), imported on first use."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as pyplot

    return pyplot


def color(name: str, _seen: dict[str, str] = {}) -> str:  # noqa: B006 - deliberate memo
    """The colour of a placement (or any series label), stable for the whole process."""
    if name in PLACEMENT_COLORS:
        return PLACEMENT_COLORS[name]
    if name not in _seen:
        _seen[name] = PALETTE[len(_seen) % len(PALETTE)]
    return _seen[name]


# ":" (dotted) is not among them: it marks a stalled seed (report/seeds.py), which must not
# look like the mean of some setting.
LINESTYLES = ["-", "--", "-.", (0, (6, 1.5, 1, 1.5, 1, 1.5))]


def split_label(label: str) -> tuple[str, str]:
    """('post', 'warmup_steps=50') from 'post warmup_steps=50': the placement picks the colour,
    the rest (the other scientific axes) picks the line style."""
    head, _, rest = label.partition(" ")
    head = head.rstrip(":")
    return (head, rest) if head in PLACEMENT_COLORS else (label, "")


def linestyle(rest: str, _seen: dict[str, Any] = {}) -> Any:  # noqa: B006 - deliberate memo
    """Line style of the non-placement part of a label: '' is solid; others take the next style
    in first-seen order, stable for the whole process (so every figure of a page agrees)."""
    if not rest:
        return "-"
    if rest not in _seen:
        _seen[rest] = LINESTYLES[len(_seen) % len(LINESTYLES)]
    return _seen[rest]


def legend(ax: Any) -> None:
    """Legend inside the axes for up to four entries; more go below the axes in columns (the
    figure grows taller so the plot keeps its size), never over the data."""
    n = len(ax.get_legend_handles_labels()[1])
    if n > 4 and len(ax.figure.axes) == 1:
        fig = ax.figure
        ncol = 2 if n <= 10 else 3
        w, h = fig.get_size_inches()
        fig.set_size_inches(w, h + 0.24 * math.ceil(n / ncol) + 0.2)
        fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=ncol)
    elif n:
        ax.legend()


def figure(ncols: int = 1, nrows: int = 1, width: float = 6.4, height: float = 4.0) -> tuple[Any, Any]:
    """A new (fig, axes) in the lab style; axes is a flat array when there are several."""
    p = plt()
    with p.rc_context(RC):
        fig, axes = p.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    fig.set_layout_engine("constrained")
    flat = axes.ravel()
    return fig, (flat[0] if flat.size == 1 else flat)


def spans_decades(values: Sequence[float] | np.ndarray, decades: float = 1.5) -> bool:
    """True when positive data spans more than ``decades`` orders of magnitude (use log axis)."""
    v = np.asarray([x for x in np.ravel(values) if np.isfinite(x) and x > 0], dtype=float)
    return v.size > 1 and float(np.log10(v.max() / v.min())) > decades


def band(ax: Any, x: np.ndarray, ys: np.ndarray, label: str, c: str | None = None,
         kind: str = "seeds", **kw: Any) -> Any:
    """Mean line over seeds (rows of ``ys``, shape (S, N)) with every seed as a thin line.

    Returns the mean Line2D, drawn first, whose xy data is exactly (x, mean over seeds).
    ``kind`` "minmax" or "std" draws a shaded band instead of the seed lines (many seeds).
    With one seed there is nothing to spread: just the line.
    """
    ys = np.atleast_2d(np.asarray(ys, dtype=float))
    mean = np.nanmean(ys, axis=0) if ys.size else np.zeros(0)
    head, rest = split_label(label)
    kw.setdefault("linestyle", linestyle(rest))
    (line,) = ax.plot(x, mean, label=label, color=c or color(head), zorder=3, **kw)
    if ys.shape[0] > 1:
        if kind == "seeds":
            for row in ys:
                seed_line(ax, x, row, line.get_color())
        else:
            sd = np.nanstd(ys, axis=0)
            lo, hi = (mean - sd, mean + sd) if kind == "std" else (np.nanmin(ys, axis=0), np.nanmax(ys, axis=0))
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.18, linewidth=0)
    return line


def seed_line(ax: Any, x: Any, y: Any, c: str, ls: str = "-") -> Any:
    """One seed: a thin, light line under the mean (no legend entry: the mean's colour names it)."""
    (line,) = ax.plot(x, y, color=c, linestyle=ls, linewidth=0.8, alpha=0.45, zorder=2, label="_seed")
    return line


def finish(fig: Any) -> None:
    """Last touches before saving: tick labels of linear axes in the page's number style."""
    from normlab.report.numbers import apply_ticks

    for ax in fig.axes:  # colour bars too: their axes are ordinary axes
        apply_ticks(ax)


def save(fig: Any, out_dir: Path, name: str) -> Path:
    """Write ``name.png`` and ``name.svg`` under ``out_dir``; return the PNG path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / f"{name}.png"
    finish(fig)
    with plt().rc_context(RC):
        fig.savefig(png)
        # The layout is settled by the first save; the SVG reuses it instead of solving the
        # constrained layout again (a third of a figure's drawing time).
        fig.set_layout_engine("none")
        fig.savefig(out_dir / f"{name}.svg", metadata={"Date": None})
    return png


def close(fig: Any) -> None:
    plt().close(fig)
