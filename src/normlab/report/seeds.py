"""Figures of seeds that end differently: curves where each seed is a thin line and the thick
mean covers only the seeds that trained, and a dot per seed of a study's metric. Stalled
seeds (dotted, ○) and diverged ones (×) are marked where they stopped."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from normlab.report.numbers import num
from normlab.report.style import (
    color,
    figure,
    integer_ticks,
    legend,
    linestyle,
    seed_line,
    spans_decades,
    split_label,
    whole,
)


def stack_seeds(runs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """Align per-seed (x, y) curves on the x values they all share: (x (N,), ys (S, N)).

    Runs that log at different steps are cut to the common steps, so the band compares
    like with like; a run that diverged early therefore shortens the mean line.
    """
    if not runs:
        return np.zeros(0), np.zeros((0, 0))
    common = set(runs[0][0])
    for x, _ in runs[1:]:
        common &= set(x)
    xs = np.array(sorted(common), dtype=float)
    ys = np.full((len(runs), xs.size), np.nan)
    for i, (x, y) in enumerate(runs):
        lookup = dict(zip(x, y))
        ys[i] = [lookup[v] for v in xs]
    return xs, ys


@dataclass
class Trace:
    """One seed's curve and how it ended: "ok", "stalled" (trained far less than the other
    seeds of its group) or "diverged" (stopped at its last point)."""

    x: Sequence[float]
    y: Sequence[float]
    fate: str = "ok"


FATE_KEY = {"diverged": "× diverged: where the run stopped", "stalled": "○ stalled seed (dotted; not in the mean)"}
# where every line is one run (a run page, a comparison) there is no seed and no mean to speak of
RUN_FATE_KEY = {**FATE_KEY, "stalled": "○ stalled: not below the unigram loss"}


def seed_curves(groups: Mapping[str, Sequence[Trace]], xlabel: str, ylabel: str, title: str,
                logy: bool | None = None, logx: bool = False) -> Any:
    """Per group: every seed a thin solid line, the mean over its "ok" seeds a thick one in
    the group's line style (drawn first, on the steps those seeds share); a group of one
    seed is just its line.

    Diverged seeds end in ×, stalled seeds are dotted and end in ○, "running" seeds (no
    summary yet) are plain seed lines; none of them enters the mean, so the thick line is an
    outcome runs had. A group with no "ok" seed has no mean line. Where every group is one run
    nothing is averaged: a stalled run keeps its own line style (it names the run) and only
    its end is marked, and the legend speaks of runs, not seeds.
    """
    fig, ax = figure()
    fates: set[str] = set()
    values: list[float] = []
    seeds = any(len([t for t in ts if len(t.x)]) > 1 for ts in groups.values())
    for label, traces in groups.items():
        traces = [t for t in traces if len(t.x)]
        if not traces:
            continue
        head, rest = split_label(label)
        c, ls = color(head), linestyle(rest)
        ok = [t for t in traces if t.fate == "ok"]  # "running" seeds (no summary yet) are drawn, not averaged
        named = False
        if ok:
            x, ys = stack_seeds([(list(t.x), list(t.y)) for t in ok])
            ax.plot(x, np.nanmean(ys, axis=0) if ys.size else ys, color=c, linestyle=ls, label=label, zorder=3)
            named = True
        for t in traces:
            values.extend(float(v) for v in t.y)
            if len(traces) == 1 and (t.fate != "stalled" or not seeds):
                if not named:
                    ax.plot(t.x, t.y, color=c, linestyle=ls, label=label, zorder=3)
                    named = True
            elif t.fate == "stalled":
                ax.plot(t.x, t.y, color=c, linestyle=":", linewidth=1.3, alpha=0.9, zorder=2,
                        label="_seed" if named else label)
                named = True
            else:  # seed lines are solid: the line style belongs to the setting's mean
                line = seed_line(ax, t.x, t.y, c)
                if not named:
                    line.set_label(label)
                    named = True
            if t.fate in FATE_KEY:
                fates.add(t.fate)
                ax.plot([t.x[-1]], [t.y[-1]], linestyle="none", zorder=4, color=c, markersize=9,
                        **({"marker": "X", "markeredgecolor": "black", "markeredgewidth": 0.6}
                           if t.fate == "diverged" else {"marker": "o", "markerfacecolor": "white"}))
    _fate_key(ax, fates, FATE_KEY if seeds else RUN_FATE_KEY)
    if logy if logy is not None else spans_decades(values):
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    elif whole([v for ts in groups.values() for t in ts for v in t.x]):
        integer_ticks(ax.xaxis)  # steps: no tick at step 2.5 of a short run
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if len(groups) > 1 or fates:  # one unmarked line needs no legend: the title names it
        legend(ax)
    return fig


def _fate_key(ax: Any, fates: set[str], words: Mapping[str, str]) -> None:
    """Legend entries explaining the end markers that appear in this figure."""
    for fate in sorted(fates):
        ax.plot([], [], linestyle="none", color="grey", markersize=8, label=words[fate],
                **({"marker": "X"} if fate == "diverged" else {"marker": "o", "markerfacecolor": "white"}))


def seed_dots(groups: Mapping[str, Sequence[tuple[float, str]]], xlabel: str, title: str) -> Any:
    """One row per group, one dot per seed (value, fate), a bar at the mean of its "ok" seeds.

    Horizontal, so long group labels stay readable; the best group (lowest mean) is on top.
    Stalled seeds are hollow; diverged seeds (no value) are × at the right edge.
    """
    order = sorted(groups, key=lambda g: _mean_ok(groups[g]))
    fig, ax = figure(height=max(2.4, 0.9 + 0.55 * len(order)))
    finite = [v for g in order for v, f in groups[g] if f != "diverged" and math.isfinite(v)]
    hi = max(finite) if finite else 1.0
    span = (hi - min(finite)) if len(finite) > 1 else 1.0
    fates: set[str] = set()
    for i, label in enumerate(reversed(order)):
        head, _ = split_label(label)
        c = color(head)
        pts = list(groups[label])
        jitter = np.linspace(-0.12, 0.12, len(pts)) if len(pts) > 1 else [0.0]
        for (v, fate), dy in zip(pts, jitter):
            if fate == "diverged" or not math.isfinite(v):
                fates.add("diverged")
                ax.plot([hi + 0.08 * span], [i + dy], marker="X", color=c, markersize=9, linestyle="none",
                        markeredgecolor="black", markeredgewidth=0.6, clip_on=False)
            else:
                if fate == "stalled":
                    fates.add("stalled")
                ax.plot([v], [i + dy], marker="o", color=c, markersize=7, linestyle="none", alpha=0.9,
                        markerfacecolor="white" if fate == "stalled" else c)
        m = _mean_ok(pts)
        if math.isfinite(m):
            ax.plot([m, m], [i - 0.3, i + 0.3], color=c, linewidth=3, solid_capstyle="butt")
            ax.annotate(num(m), (m, i + 0.32), ha="center", va="bottom", fontsize=10.5, color=c)
    if finite:
        ax.set_xlim(min(finite) - 0.08 * span, hi + 0.14 * span)
    ax.set_yticks(range(len(order)), list(reversed(order)))
    ax.set_ylim(-0.6, len(order) - 0.4)
    ax.grid(axis="y", visible=False)
    for fate in sorted(fates):
        ax.plot([], [], linestyle="none", color="grey", markersize=8, label=FATE_KEY[fate].replace(
            "dotted; ", "hollow; ").replace("where the run stopped", "no final value"),
            **({"marker": "X"} if fate == "diverged" else {"marker": "o", "markerfacecolor": "white"}))
    ax.plot([], [], color="grey", linewidth=3, label="mean over the other seeds" if fates else "mean over seeds")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=1)  # never over a dot
    ax.set(xlabel=xlabel, title=title)
    return fig


def _mean_ok(pts: Sequence[tuple[float, str]]) -> float:
    v = [x for x, f in pts if f == "ok" and math.isfinite(x)]
    return float(np.mean(v)) if v else math.inf
