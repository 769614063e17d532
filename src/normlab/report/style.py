"""One figure style for every plot of the lab: Agg backend, one colour per series, labelled
axes, integer ticks where the data are whole numbers, and ``save`` writing PNG + SVG side by side.

Colours come from one palette keyed by the model's registries: the i-th registered
placement takes the i-th colour (the layouts count back from the last registered slot), so
"post" is the same colour in every panel of every page and a newly registered placement gets
its own colour without anyone editing a list here. Other series (a checkpoint's name, "baseline", "train") take a colour
from the palette's tail, chosen by a hash of the name so separate pages agree. In multi-trial
figures the rest of a label ("post warmup_steps=50": the other scientific axes) sets the line
style.
"""

from __future__ import annotations

import colorsys
import contextlib
import math
import re
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from normlab.model.catalogue import LAYOUTS, PLACEMENTS
from normlab.report.numbers import apply_ticks

# Registered series first (post, pre, sandwich, ... in registry order: the first two keep the
# Okabe-Ito vermillion and blue every published figure used; the layouts count back from slot
# 16), then the tail for other names. Yellow is left out: it does not show on white.
PALETTE = ["#D55E00", "#0072B2", "#009E73", "#CC79A7", "#E69F00", "#882255", "#44AA99", "#999999",
           "#332288", "#3B3B3B", "#7F3C8D", "#E73F74", "#AA4499", "#56B4E9", "#117733", "#8C6D31",
           # the tail: series that are not registry names
           "#000000", "#6699CC", "#661100", "#DDAA33", "#5D3A9B", "#994455", "#0B6E4F", "#B07AA1"]
N_REGISTERED = 16  # palette slots reserved for registry names, in registry order
RC = {
    "figure.figsize": (6.4, 4.0), "figure.dpi": 100, "savefig.dpi": 110,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    # two figures side by side at 1366 px show a 6.4 in figure at 0.9 of its size: 10.5 pt reads as 9.4 pt
    "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 10.5, "legend.frameon": False,
    "xtick.labelsize": 10.5, "ytick.labelsize": 10.5, "lines.linewidth": 2.0,
    "svg.fonttype": "none", "svg.hashsalt": "normlab",  # deterministic SVG ids
}


def plt() -> Any:
    """pyplot on the Agg backend (files only, no display), imported on first use."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as pyplot

    return pyplot


def series_names() -> list[str]:
    """The registered series, in registry order: every placement, then the layouts (Mix-LN).

    Read from the model's catalogue (which imports torch, once per process) so the palette
    never lags the registry."""
    return [*_registered()[0], *_registered()[1]]


def _registered() -> tuple[list[str], list[str]]:
    names = PLACEMENTS.names()
    return names, [n for n in LAYOUTS.names() if n not in names]


def registered_colours() -> dict[str, str]:
    """{registered series: colour}: placements from the palette's start in registry order,
    layouts from the end of the registered slots backwards, so registering one more of
    either never moves the other's colours; past the slots, generated colours."""
    placements, layouts = _registered()
    # Layouts keep their slots at the end; placements past the free slots take generated
    # colours by their own index, so neither kind moves when the other grows.
    free = N_REGISTERED - len(layouts)
    out = {n: PALETTE[i] if i < free else _generated(i) for i, n in enumerate(placements)}
    out.update({n: PALETTE[N_REGISTERED - 1 - j] if j < N_REGISTERED else _generated(N_REGISTERED + 1000 + j)
                for j, n in enumerate(layouts)})
    return out


def _generated(i: int) -> str:
    """A further colour once the palette is used up (golden-angle hues, mid lightness)."""
    r, g, b = colorsys.hls_to_rgb((0.13 + i * 0.618034) % 1.0, 0.42, 0.65)
    return f"#{round(r * 255):02X}{round(g * 255):02X}{round(b * 255):02X}"


def color(name: str, _others: dict[str, str] = {}) -> str:  # noqa: B006 - deliberate memo
    """The colour of a series: a registered placement or layout by its place in the registry,
    any other name by a hash of it into the palette's tail (probing on to the next free
    colour when two names of one process would share one)."""
    registered = registered_colours()
    if name in registered:
        return registered[name]
    if name not in _others:
        tail = PALETTE[N_REGISTERED:]
        used = set(_others.values())
        start = zlib.crc32(name.encode("utf-8")) % len(tail)
        free = [tail[(start + k) % len(tail)] for k in range(len(tail)) if tail[(start + k) % len(tail)] not in used]
        _others[name] = free[0] if free else _generated(len(registered) + len(_others))
    return _others[name]


# ":" (dotted) is not among them: it marks a stalled seed (report/seeds.py), which must not
# look like the mean of some setting. Eight, so that eight runs of one placement (a comparison
# of its norms) each have a line of their own; past them ``_dash`` makes more.
LINESTYLES: list[Any] = ["-", "--", "-.", (0, (6, 1.5, 1, 1.5, 1, 1.5)), (0, (10, 3)), (0, (10, 2, 2, 2)),
                         (0, (14, 2, 1, 2, 1, 2, 1, 2)), (0, (5, 5))]
_ASSIGNED: dict[str, Any] = {}  # rest -> line style, while ``distinct_styles`` holds a page's labels


_PREFIX = re.compile(r"^[^ :]+: ")  # "s1: pre lr=0.001" (comparison pages) -> "pre lr=0.001"
_HEAD = re.compile(r"[ /+,(]")       # "pre/xavier", "post+qk_layernorm", "pre (run)": "pre"
_FIELD = re.compile(r"(?:^|[ ,(])(?:model\.)?placement=([A-Za-z0-9_]+)")


def split_label(label: str) -> tuple[str, str]:
    """(series, rest) of a legend label: the registered name that picks the colour and the
    rest that picks the line style. 'post warmup_steps=50' -> ('post', 'warmup_steps=50'),
    's1: pre' -> ('pre', 's1:'), 'placement=pre, optim.lr=1e-3' -> ('pre', 'optim.lr=1e-3');
    a label naming no registered series is its own series: ('gpt2', '')."""
    names = series_names()
    prefix = _PREFIX.match(label)
    body = label[prefix.end():] if prefix else label
    head = _HEAD.split(body, maxsplit=1)[0].rstrip(":")
    if head in names:
        rest = body[len(head):].strip(" ,")
    elif (m := _FIELD.search(body)) and m[1] in names:
        head, rest = m[1], (body[:m.start()] + body[m.end():]).strip(" ,")
    elif prefix and prefix[0][:-2] in names:  # "post: slope -0.5": the prefix is the series
        return prefix[0][:-2], body
    else:
        return label, ""
    rest = " ".join(x for x in (prefix[0].strip() if prefix else "", rest) if x)
    return head, rest


def integer_ticks(axis: Any) -> None:
    """Whole-number ticks on a layer, depth or step axis (no tick at layer 1.5)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def whole(values: Sequence[float] | np.ndarray) -> bool:
    """True when every finite value is a whole number (layers, steps, depths, tokens)."""
    v = np.asarray([x for x in np.ravel(np.asarray(values, dtype=float)) if np.isfinite(x)])
    return v.size > 0 and bool(np.all(v == np.round(v)))


def linestyle(rest: str, _seen: dict[str, Any] = {}) -> Any:  # noqa: B006 - deliberate memo
    """Line style of the non-placement part of a label: '' is solid; others take the style
    ``distinct_styles`` gave them, else the next style in first-seen order, stable for the whole
    process (so every figure of a page agrees)."""
    if not rest:
        return "-"
    if rest in _ASSIGNED:
        return _ASSIGNED[rest]
    if rest not in _seen:
        _seen[rest] = LINESTYLES[len(_seen) % len(LINESTYLES)]
    return _seen[rest]


def _dash(i: int) -> Any:
    """The i-th line style: ``LINESTYLES``, then dash-dots of growing dash length."""
    return LINESTYLES[i] if i < len(LINESTYLES) else (0, (4 + 2 * (i - len(LINESTYLES)), 2, 1, 2))


@contextlib.contextmanager
def distinct_styles(labels: Iterable[str]) -> Iterator[None]:
    """Within the block, no two of ``labels`` that share a colour (a series) share a line style.

    The rest of a label keeps picking the style (one rest, one style, whatever its series), but
    the rests of one series take distinct ones, in the order given: the first-seen memo alone
    cycles through the styles, so the fifth run of a placement drew like its first, and a
    label's rest drew as solid as the series' bare label. A page holds its labels around all
    of its figures, so that they agree."""
    styles: dict[str, int] = {}  # rest -> index of its style
    taken: dict[str, set[int]] = {}  # series -> indices of the styles its labels use
    split = [split_label(lab) for lab in dict.fromkeys(labels)]
    for head, rest in split:
        if not rest:
            taken.setdefault(head, set()).add(0)  # a bare series label is solid
    for rest in dict.fromkeys(r for _, r in split if r):
        heads = {h for h, r in split if r == rest}
        used = set().union(*(taken.get(h, set()) for h in heads))
        styles[rest] = i = next(k for k in range(len(used) + 1) if k not in used)
        for h in heads:
            taken.setdefault(h, set()).add(i)
    before = dict(_ASSIGNED)
    _ASSIGNED.update({rest: _dash(i) for rest, i in styles.items()})
    try:
        yield
    finally:
        _ASSIGNED.clear()
        _ASSIGNED.update(before)


def legend(ax: Any, outside: bool | None = None, ncol: int | None = None) -> None:
    """Legend inside the axes for up to four short entries; more, longer ones, or ``outside``
    go below the axes in columns (the figure grows taller so the plot keeps its size), never
    over the data."""
    handles, labels = ax.get_legend_handles_labels()
    n = len(labels)
    if outside is None:
        outside = n > 4 or max((len(t) for t in labels), default=0) > 32
    if ax.get_legend() is not None:  # called again after more lines were added: one legend
        ax.get_legend().remove()
    fig = ax.figure
    if outside and n and len(fig.axes) == 1:
        # two columns hold about 32 characters each at 10.5 pt on a 6.4 in figure (a 40-character
        # label in two columns ran off both sides), three about 20
        longest = max(len(t) for t in labels)
        ncol = ncol or (1 if n == 1 or longest > 32 else 2 if n <= 10 or longest > 20 else 3)
        w, h = fig.get_size_inches()
        grown = getattr(fig, "_normlab_legend_rows", 0)
        rows = math.ceil(n / ncol)
        fig.set_size_inches(w, h + 0.24 * (rows - grown) + (0.2 if not grown else 0.0))
        fig._normlab_legend_rows = rows
        for old in list(fig.legends):
            old.remove()
        fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False)
    elif n:
        ax.legend(frameon=False)  # the style's rc is not active here: say it again


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
