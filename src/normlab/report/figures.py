"""Figure builders: plain arrays in, a matplotlib Figure out (saving is the caller's job).

Every builder draws the exact input values (each seed a thin line, the mean over seeds a
thick one, drawn first) so tests can read them back from the artists. Seeds are rows:
``ys`` has shape (S, N). Curves whose seeds stop at different steps, or stall, come as
``Trace`` lists (``seed_curves``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from normlab.diagnostics.sensitivity import sensitivity
from normlab.report.numbers import num, signed
from normlab.report.seeds import FATE_KEY, Trace, seed_curves, seed_dots, stack_seeds
from normlab.report.style import (
    band,
    color,
    figure,
    integer_ticks,
    legend,
    linestyle,
    spans_decades,
    split_label,
    whole,
)

Series = tuple[np.ndarray, np.ndarray]  # x (N,), ys (S, N)


def curves(groups: Mapping[str, Series], xlabel: str, ylabel: str, title: str,
           logy: bool | None = None, logx: bool = False) -> Any:
    """One mean line (+ seed band) per group label, e.g. loss against step per placement."""
    fig, ax = figure()
    for label, (x, ys) in groups.items():
        if len(x):
            band(ax, np.asarray(x, float), ys, label)
    allv = np.concatenate([np.ravel(ys) for _, ys in groups.values()]) if groups else np.zeros(0)
    if logy if logy is not None else spans_decades(allv):
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    elif whole([v for x, _ in groups.values() for v in np.ravel(x)]):
        integer_ticks(ax.xaxis)  # layers, depths and steps: no tick at 1.5
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    legend(ax)
    return fig


def layer_profile(groups: Mapping[str, Series], ylabel: str, title: str,
                  logy: bool | None = None, xlabel: str = "layer index l (1 = next to the embedding)") -> Any:
    """A per-layer statistic (x = layer index), one line per placement; Xiong et al. 2020 Fig. 3."""
    fig = curves(groups, xlabel, ylabel, title, logy=logy)
    ax = fig.axes[0]
    for line in ax.get_lines():
        line.set_marker("o")
        line.set_markersize(3)
    return fig


def loglog_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of log y against log x and its standard error."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    n = lx.size
    if n < 2:
        return math.nan, math.nan
    a, b = np.polyfit(lx, ly, 1)
    if n < 3:
        return float(a), math.nan
    resid = ly - (a * lx + b)
    se = math.sqrt(float(resid @ resid) / (n - 2) / float(((lx - lx.mean()) ** 2).sum()))
    return float(a), se


def depth_scaling(groups: Mapping[str, Series], ylabel: str, title: str,
                  fits: Mapping[str, tuple[float, float]] | None = None,
                  legends: Mapping[str, str] | None = None) -> tuple[Any, dict[str, tuple[float, float]]]:
    """log-log plot of a quantity against depth L with the fitted slope in each legend entry.

    Returns (figure, {label: (slope, stderr)}); the fit is over the seed-mean values. ``fits``
    (optional) puts other slopes in the legend, e.g. the probe's own fit pooled over seeds,
    and ``legends`` whole legend texts (the claims' effects with their intervals), so the
    figure shows the numbers the page's answer or table quotes.
    """
    fig, ax = figure()
    slopes: dict[str, tuple[float, float]] = {}
    for label, (x, ys) in groups.items():
        mean = np.nanmean(np.atleast_2d(ys), axis=0)
        slopes[label] = loglog_slope(np.asarray(x, float), mean)
        s, se = (fits or {}).get(label, slopes[label])
        text = (legends or {}).get(label, f"{label}: slope {signed(s)} ± {num(se, 2)}")
        head, rest = split_label(label)  # "p1: post": post's colour, p1's line style
        band(ax, np.asarray(x, float), ys, text, c=color(head), marker="o", linestyle=linestyle(rest))
    depth_axis(ax, [v for x, _ in groups.values() for v in np.asarray(x, float)])
    ax.set_yscale("log")
    ax.set(ylabel=ylabel, title=title)
    if groups:
        legend(ax, outside=True)  # lines fan out over the whole plot: no corner is free for sure
    return fig, slopes


def depth_axis(ax: Any, depths: Sequence[float]) -> None:
    """x = depth L on a log2 axis, ticked at the measured depths (2, 4, 8, 16, not 2^1..2^4)."""
    ds = sorted({float(d) for d in depths if d > 0})
    ax.set_xscale("log", base=2)
    ax.minorticks_off()
    if ds:
        ax.set_xticks(ds, [num(d) for d in ds])
    ax.set_xlabel("depth L (blocks, log scale)")


def heatmap(matrix: np.ndarray, xs: Sequence[float], layers: Sequence[int], label: str, title: str,
            xlabel: str = "training step", ylabel: str = "layer") -> Any:
    """A per-layer statistic (rows = layers, bottom = layer 1) against step; log colours if needed."""
    fig, ax = figure(height=3.6)
    _heat(fig, ax, matrix, xs, layers, label, title, xlabel, ylabel)
    return fig


def _heat(fig: Any, ax: Any, matrix: np.ndarray, xs: Sequence[float], layers: Sequence[Any], label: str,
          title: str, xlabel: str, ylabel: str) -> None:
    from matplotlib.colors import LogNorm

    m = np.asarray(matrix, dtype=float)  # (n_layers, n_steps)
    finite = m[np.isfinite(m)]
    norm = LogNorm() if spans_decades(m, 1.0) and finite.size and finite.min() > 0 else None
    im = ax.imshow(m, aspect="auto", origin="lower", interpolation="nearest", norm=norm, cmap="viridis",
                   extent=(-0.5, m.shape[1] - 0.5, -0.5, m.shape[0] - 0.5))
    ticks = np.linspace(0, m.shape[1] - 1, min(6, m.shape[1])).round().astype(int)
    ax.set_xticks(ticks, [num(xs[i], compact=True) for i in ticks])
    ax.set_yticks(range(len(layers)), [str(v) for v in layers])
    ax.grid(False)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    fig.colorbar(im, ax=ax, label=label)


def layer_growth(matrix: np.ndarray, steps: Sequence[float], layers: Sequence[Any], label: str, title: str,
                 lines: int = 8) -> Any:
    """A per-layer statistic as Peri-LN (Kim et al. 2025, Fig. 1) draws hidden-state variance:
    x = layer, one line per training step (at most ``lines``, evenly spread, the first and the
    last included) coloured by step; ``get_lines()[k]`` is the k-th chosen column at its exact values."""
    import matplotlib
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    m = np.asarray(matrix, dtype=float)  # (n_layers, n_steps)
    cols = sorted(set(np.linspace(0, m.shape[1] - 1, min(lines, m.shape[1])).round().astype(int).tolist()))
    fig, ax = figure()
    cmap, norm = matplotlib.colormaps["viridis"], Normalize(vmin=float(steps[0]), vmax=float(max(steps[-1], steps[0] + 1)))
    x = np.arange(m.shape[0])
    for j in cols:
        ax.plot(x, m[:, j], marker="o", markersize=3, color=cmap(norm(float(steps[j]))), label=f"step {num(steps[j])}")
    if spans_decades(m[:, cols], 1.0) and np.all(m[:, cols][np.isfinite(m[:, cols])] > 0):
        ax.set_yscale("log")
    every = max(1, len(x) // 12)  # deep models: a readable tick every few layers
    ax.set_xticks(x[::every], [str(v) for v in list(layers)[::every]])
    ax.set(xlabel="layer (x0 = embedding output)", ylabel=label, title=title)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="training step")
    return fig


def layer_step(matrix: np.ndarray, steps: Sequence[float], layers: Sequence[Any], chosen: Sequence[int],
               label: str, title: str, ylabel: str = "layer", names: Sequence[str] | None = None) -> Any:
    """A per-layer statistic over a checkpoint series: left, the layer x step heat map (one
    column per checkpoint, in step order); right, the rows ``chosen`` (indices into ``layers``)
    as lines against step, drawn at the exact values (``get_lines()[k]`` is ``chosen[k]``),
    labelled ``names[i]`` (default '<ylabel> <layer>')."""
    m = np.asarray(matrix, dtype=float)
    fig, (left, right) = figure(ncols=2, width=5.0, height=3.6)
    _heat(fig, left, m, steps, layers, label, "per layer (columns: checkpoints)", "training step", ylabel)
    x = np.asarray(steps, dtype=float)
    for i in chosen:
        lab = names[i] if names is not None else f"{ylabel} {layers[i]}"
        right.plot(x, m[i], marker="o", markersize=3, label=lab, color=color(lab))
    vals = m[list(chosen)]
    if spans_decades(vals) and np.all(vals[np.isfinite(vals)] > 0):
        right.set_yscale("log")
    if len(x) <= 8:
        right.set_xticks(x, [num(v, compact=True) for v in x])  # a tick at each checkpoint
    elif whole(x):
        integer_ticks(right.xaxis)
    right.set(xlabel="training step", ylabel=label, title="chosen layers against step")
    # the heat map's colour bar carries the same label just left of this panel: this panel's
    # values and label go on its right edge, so the two labels never stand side by side
    right.yaxis.tick_right()
    right.yaxis.set_label_position("right")
    right.spines["right"].set_visible(True)
    right.spines["left"].set_visible(False)
    legend(right)
    fig.suptitle(title)
    return fig


def stability_map(cells: Mapping[str, Mapping[tuple[float, float], tuple[float, bool]]],
                  title: str = "stability map: final validation loss") -> Any:
    """lr x warm-up grid per placement, coloured by final loss; diverged cells greyed with an x.

    ``cells[placement][(lr, warmup)] = (final_loss, diverged)``. Panels share one colour
    scale so placements compare directly.
    """
    names = list(cells)
    fig, axes = figure(ncols=max(1, len(names)), width=3.6, height=3.4)
    axes = np.atleast_1d(axes)
    finite = [v for c in cells.values() for v, dv in c.values() if not dv and np.isfinite(v)]
    vmin, vmax = (min(finite), max(finite)) if finite else (0.0, 1.0)
    im = None
    for ax, name in zip(axes, names):
        lrs = sorted({k[0] for k in cells[name]})
        wus = sorted({k[1] for k in cells[name]})
        m = np.full((len(wus), len(lrs)), np.nan)
        for (lr, wu), (v, dv) in cells[name].items():
            if not dv:
                m[wus.index(wu), lrs.index(lr)] = v
        ax.set_facecolor("#d0d0d0")  # NaN cells (diverged or missing) show the background
        im = ax.imshow(m, origin="lower", cmap="viridis_r", vmin=vmin, vmax=vmax, aspect="auto")
        for (lr, wu), (v, dv) in cells[name].items():
            i, j = wus.index(wu), lrs.index(lr)
            ax.text(j, i, "×" if dv else num(v, 3), ha="center", va="center", fontsize=10,
                    color="#b00000" if dv else "white")
        ax.set_xticks(range(len(lrs)), [num(v) for v in lrs], rotation=45)
        ax.set_yticks(range(len(wus)), [num(v) for v in wus])
        ax.grid(False)
        ax.set(xlabel="peak learning rate", ylabel="warm-up steps", title=name)
    if im is not None:
        fig.colorbar(im, ax=list(axes), label="final val loss (× = diverged)")
    fig.suptitle(title)
    return fig


def lr_curves(groups: Mapping[str, Series], init_loss: float,
              title: str = "LR sensitivity: final loss against learning rate") -> tuple[Any, dict[str, float]]:
    """Final loss against lr (log x), one line per placement/qk_norm; sensitivity in the legend."""
    fig, ax = figure()
    sens: dict[str, float] = {}
    for label, (x, ys) in groups.items():
        mean = np.nanmean(np.atleast_2d(ys), axis=0)
        sens[label] = sensitivity(mean, init_loss)  # Wortsman et al. 2023 (diagnostics/sensitivity.py)
        head, rest = split_label(label)  # "pre+qk_layernorm": Pre-LN's colour, its own line style
        band(ax, np.asarray(x, float), ys, f"{label}: sensitivity {num(sens[label], 3)}", c=color(head), marker="o",
             linestyle=linestyle(rest))
    ax.axhline(init_loss, color="grey", linestyle=":", linewidth=1, label=f"loss at init {num(init_loss, 3)}")
    ax.set_xscale("log")
    ax.set(xlabel="peak learning rate (log scale)", ylabel="final val loss (nats/token)", title=title)
    legend(ax, outside=True)
    return fig, sens


def similarity_matrix(dist: np.ndarray, title: str = "angular distance between layer outputs") -> Any:
    """arccos(cos(x_i, x_j)) / pi for every pair of layers (0 = same direction)."""
    d = np.asarray(dist, dtype=float)
    fig, ax = figure(width=4.8, height=4.2)
    im = ax.imshow(d, origin="lower", cmap="magma", vmin=0.0, vmax=max(0.5, float(np.nanmax(d))))
    ax.grid(False)
    ticks = range(d.shape[0])
    ax.set_xticks(ticks, [str(i) for i in ticks])
    ax.set_yticks(ticks, [str(i) for i in ticks])
    ax.set(xlabel="layer output j (0 = embedding)", ylabel="layer output i", title=title)
    fig.colorbar(im, ax=ax, label="arccos(cos)/π")
    return fig


def deletion_bars(layers: Sequence[int], delta: Sequence[float],
                  title: str = "layer deletion: loss increase when one block is skipped") -> Any:
    """Bar per layer: validation loss with block l skipped minus the full model's loss."""
    fig, ax = figure()
    ax.bar([str(v) for v in layers], np.asarray(delta, dtype=float), color=color("deletion"))
    if spans_decades(delta):
        ax.set_yscale("log")
    ax.set(xlabel="deleted layer", ylabel="Δ val loss (nats/token)", title=title)
    return fig


def bars(labels: Sequence[str], values: Sequence[float], errors: Sequence[float] | None,
         ylabel: str, title: str) -> Any:
    """Plain bar chart with optional error bars (summary of trials)."""
    fig, ax = figure()
    ax.bar(list(labels), np.asarray(values, dtype=float), yerr=None if errors is None else np.asarray(errors),
           color=[color(split_label(s)[0]) for s in labels], capsize=3)
    ax.set(ylabel=ylabel, title=title)
    ax.tick_params(axis="x", rotation=30)
    return fig


__all__ = ["FATE_KEY", "Trace", "seed_curves", "seed_dots", "stack_seeds", "curves", "layer_profile", "loglog_slope",
           "depth_scaling", "depth_axis", "heatmap", "layer_growth", "stability_map", "lr_curves",
           "similarity_matrix", "deletion_bars", "bars"]
