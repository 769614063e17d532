"""The frontier figures of a stability map: each placement's critical learning rate (where half
its seeds train by the horizon; ``normlab.study.frontier``) against depth, one line per
warm-up, and (a study with a width axis) against width, one line per parametrisation, each
point with its 95% interval.

A censored point (every lr trains, or none does) sits at the lr it lies beyond, drawn as a
hollow triangle with an arrow pointing to where the critical lr is (up: above the largest lr
tried; down: below the smallest). An interval side that nothing bounds ends in an arrow at
the edge of the tested range. The lr axis is logarithmic and spans the lrs the study tried,
shaded outside them; depths are ticked as whole numbers.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from normlab.report.numbers import num
from normlab.report.style import figure

# Paul Tol's "bright" blue and red: no warm-up and warm-up, distinct for colour-blind readers
WARMUP_COLOURS = ("#4477AA", "#EE6677", "#228833", "#CCBB44")


def frontier_figure(lines: Sequence[Any], lrs: Sequence[float], horizon: int, title: str) -> Any:
    """``lines``: ``study.frontier.Line`` of one horizon; ``lrs``: every lr the study tried."""
    placements = list(dict.fromkeys(x.placement for x in lines))
    ncols = min(3, max(len(placements), 1))
    nrows = max(1, math.ceil(len(placements) / ncols))
    fig, axes = figure(ncols=ncols, nrows=nrows, width=6.4 / min(ncols, 2) if ncols > 1 else 5.2, height=3.4)
    axes = list(axes) if ncols * nrows > 1 else [axes]
    lo_lr, hi_lr = min(lrs), max(lrs)
    ymin, ymax = lo_lr / 2.5, hi_lr * 2.5
    depths = sorted({x.depth for x in lines if x.depth is not None})
    warmups = sorted({x.warmup for x in lines if x.warmup is not None})
    step = 0.06 * (max(depths) - min(depths) if len(depths) > 1 else 2)  # the warm-ups' offset at one depth
    for ax, pl in zip(axes, placements):
        for i, wu in enumerate(warmups):
            c = WARMUP_COLOURS[i % len(WARMUP_COLOURS)]
            mine = sorted((x for x in lines if x.placement == pl and x.warmup == wu), key=lambda x: x.depth or 0)
            xs, ys = [], []
            for line in mine:
                d = (line.depth or 0) + (i - (len(warmups) - 1) / 2) * step  # side by side, not on top
                _point(ax, d, line.frontier, c, 0.4 * step, ymin, ymax)
                f = line.frontier
                xs.append(d)
                ys.append(f.lr if f.lr is not None else f.bound)
            ax.plot(xs, ys, color=c, lw=1.2, alpha=0.6, ls="-", label=f"warm-up {num(wu)}")
        ax.axhspan(ymin, lo_lr, color="#EEEEEE", zorder=0)
        ax.axhspan(hi_lr, ymax, color="#EEEEEE", zorder=0)
        ax.set_yscale("log")
        ax.set_ylim(ymin, ymax)
        ax.set_xticks(depths, [num(d) for d in depths])
        if depths:
            ax.set_xlim(min(depths) - 4 * step, max(depths) + 4 * step)
        ax.set(title=pl, xlabel="depth L (blocks)")
        ax.set_ylabel("critical lr" if axes.index(ax) % ncols == 0 else "")
    for ax in axes[len(placements):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels() if placements else ([], [])
    fig.legend(handles, labels, loc="outside lower center", ncol=max(len(labels), 1), frameon=False)
    fig.suptitle(f"{title} (by step {horizon})")
    return fig


def width_figure(lines: Sequence[Any], lrs: Sequence[float], horizon: int, title: str) -> Any:
    """Critical lr against width (log2 axis), one panel per placement, one line per
    parametrisation x depth x warm-up: where muP should hold the critical lr flat and SP let
    it fall. ``lines``: ``study.frontier.Line`` of one horizon with a width."""
    lines = [x for x in lines if x.width is not None]
    placements = list(dict.fromkeys(x.placement for x in lines))
    ncols = min(3, max(len(placements), 1))
    nrows = max(1, math.ceil(len(placements) / ncols))
    fig, axes = figure(ncols=ncols, nrows=nrows, width=6.4 / min(ncols, 2) if ncols > 1 else 5.2, height=3.4)
    axes = list(axes) if ncols * nrows > 1 else [axes]
    ymin, ymax = min(lrs) / 2.5, max(lrs) * 2.5
    widths = sorted({x.width for x in lines})
    kinds = list(dict.fromkeys((x.param, x.depth, x.warmup) for x in lines))
    for ax, pl in zip(axes, placements):
        for i, (par, depth, wu) in enumerate(kinds):
            c = WARMUP_COLOURS[i % len(WARMUP_COLOURS)]
            mine = sorted((x for x in lines if x.placement == pl and (x.param, x.depth, x.warmup) == (par, depth, wu)),
                          key=lambda x: x.width)
            xs, ys = [], []
            for line in mine:
                w = line.width * 2 ** ((i - (len(kinds) - 1) / 2) * 0.06)  # side by side on the log axis
                _point(ax, w, line.frontier, c, 0.04 * w, ymin, ymax)
                f = line.frontier
                xs.append(w)
                ys.append(f.lr if f.lr is not None else f.bound)
            label = ", ".join(b for b in (par or "", f"L={depth}", f"warm-up {num(wu)}") if b)
            ax.plot(xs, ys, color=c, lw=1.2, alpha=0.6, label=label)
        ax.axhspan(ymin, min(lrs), color="#EEEEEE", zorder=0)
        ax.axhspan(max(lrs), ymax, color="#EEEEEE", zorder=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(ymin, ymax)
        ax.set_xticks(widths, [num(w) for w in widths])
        ax.set(title=pl, xlabel="width d_model")
        ax.set_ylabel("critical lr" if axes.index(ax) % ncols == 0 else "")
    for ax in axes[len(placements):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels() if placements else ([], [])
    fig.legend(handles, labels, loc="outside lower center", ncol=max(min(len(labels), 3), 1), frameon=False)
    fig.suptitle(f"{title} (by step {horizon})")
    return fig


def _point(ax: Any, x: float, f: Any, c: str, cap: float, ymin: float, ymax: float) -> None:
    """One critical lr: a dot with its interval, or a censored triangle with its arrow."""
    arrow = {"arrowstyle": "-|>", "color": c, "lw": 1.4, "mutation_scale": 12}
    if f.censored in ("above", "below"):
        up = f.censored == "above"
        ax.plot([x], [f.bound], marker="^" if up else "v", ms=8, mfc="white", mec=c, mew=1.6, ls="none")
        ax.annotate("", xy=(x, ymax if up else ymin), xytext=(x, f.bound), arrowprops=arrow)
        return
    if f.lr is None:
        return
    lo = f.lo if f.lo is not None else ymin
    hi = f.hi if f.hi is not None else ymax
    ax.plot([x, x], [max(lo, ymin), min(hi, ymax)], color=c, lw=1.6)
    for end, open_end, edge in ((f.lo, f.lo is None, ymin), (f.hi, f.hi is None, ymax)):
        if open_end:  # nothing bounds this side: an arrow to the edge
            ax.annotate("", xy=(x, edge), xytext=(x, f.lr), arrowprops={**arrow, "lw": 1.0})
        else:
            ax.plot([x - cap, x + cap], [end, end], color=c, lw=1.4)
    ax.plot([x], [min(max(f.lr, ymin), ymax)], marker="o", ms=6, color=c, ls="none")


__all__ = ["WARMUP_COLOURS", "frontier_figure", "width_figure"]
