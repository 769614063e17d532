"""The answer to a study's own question: the values of one axis contrasted within each setting
of the other axes, with the numbers (mean ± sample std over seeds, the difference and its 95%
Welch interval over seeds, as the claims weigh it).

For ``pre-vs-post``: "warm-up 0: Pre-LN m ± s vs Post-LN m ± s (4 seeds each): Pre-LN lower
by d nats/token, 95% interval [lo, hi]", for each warm-up; then, as notes, the other axis
within each placement (does Post-LN need warm-up?).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Sequence

import numpy as np

from normlab.report.numbers import num, pm
from normlab.stats.effects import MIN_SEEDS, welch

Point = tuple[float, str]  # (metric value, fate: ok / stalled / diverged)
MAX_CELLS = 4  # settings of the other axes spelled out in the answer; the rest go to the notes


def _key(params: dict[str, Any], axis: str) -> str | None:
    return next((k for k in params if k == axis or k.endswith("." + axis.split(".")[-1])), None)


def value_name(axis: str, v: Any) -> str:
    """'Pre-LN' for placement pre, 'warm-up 490', 'lr 1e-3', 'z_loss 1e-4'."""
    short = axis.split(".")[-1]
    if short == "placement":
        return f"{str(v).capitalize()}-LN" if v in ("pre", "post") else str(v)
    word = {"warmup_steps": "warm-up", "n_layer": "depth", "qk_norm": "qk_norm"}.get(short, short)
    return f"{word} {num(v)}"


def side(pts: Sequence[Point]) -> tuple[list[float], int]:
    """(finite values of seeds that did not diverge, number of diverged seeds)."""
    vals = [v for v, f in pts if f != "diverged" and math.isfinite(v)]
    return vals, len(pts) - len(vals)


def summary(name: str, pts: Sequence[Point]) -> str:
    vals, bad = side(pts)
    sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
    text = f"{name} {pm(float(np.mean(vals)), sd)}" if vals else f"{name} –"
    return text + (f" ({bad} of {len(pts)} seeds diverged)" if bad else "")


def compare_two(a: str, pa: Sequence[Point], b: str, pb: Sequence[Point], unit: str) -> str:
    """'A m ± s vs B m ± s (n seeds each): A lower by d unit, 95% interval [lo, hi]' (b - a)."""

    va, _ = side(pa)
    vb, _ = side(pb)
    if not va or not vb:
        return f"{summary(a, pa)} vs {summary(b, pb)}: no difference to weigh"
    ns = f"{len(va)} seeds each" if len(va) == len(vb) else f"{len(va)} and {len(vb)} seeds"
    head = f"{summary(a, pa)} vs {summary(b, pb)} ({ns})"
    e = welch(vb, va)  # b - a: positive when a is lower
    assert e.estimate is not None
    lower, gap = (a, e.estimate) if e.estimate > 0 else (b, -e.estimate)
    text = f"{head}: {lower} lower by {num(gap, 3)} {unit}"
    if e.lo is None or e.hi is None or e.n_min < MIN_SEEDS:
        return text + f" (fewer than {MIN_SEEDS} seeds a side: not weighed against seed noise)"
    lo, hi = (e.lo, e.hi) if lower == a else (-e.hi, -e.lo)
    # descriptive, not a claim verdict: no margin was registered for a study page
    verdict = "the interval excludes 0" if lo > 0 else "the interval includes 0"
    return text + f", 95% interval [{num(lo, 3)}, {num(hi, 3)}] ({verdict})"


def _cells(points: list[tuple[dict[str, Any], Point]], axis: str) -> tuple[list[Any], dict[tuple, dict[Any, list[Point]]],
                                                                          list[str]]:
    """(values of ``axis``, {setting of the other axes: {axis value: points}}, other axis keys)."""
    key = axis
    others = sorted({k for p, _ in points for k in p if k != key and k.split(".")[-1] != "seed"})
    cells: dict[tuple, dict[Any, list[Point]]] = defaultdict(lambda: defaultdict(list))
    values: list[Any] = []
    for params, pt in points:
        v = params.get(key)
        if v not in values:
            values.append(v)
        cells[tuple((k, params.get(k)) for k in others)][v].append(pt)
    return values, dict(cells), others


def contrast(points: list[tuple[dict[str, Any], Point]], axis: str, order: Sequence[Any] = (),
             unit: str = "nats/token") -> tuple[str, list[str]] | None:
    """(answer, notes) contrasting ``axis`` within every setting of the other axes, or None when
    the trials do not vary it. ``points``: (trial params, (value, fate)) of finished trials;
    ``order``: the axis values as the spec lists them (the answer names the later one first:
    "Pre-LN vs Post-LN" for ["post", "pre"])."""
    key = next((k for p, _ in points if (k := _key(p, axis))), None)
    if key is None:
        return None
    values, cells, others = _cells(points, key)
    if len(values) < 2:
        return None
    rank = {v: i for i, v in enumerate(order)}
    values.sort(key=lambda v: (rank.get(v, len(rank)), str(v)))
    parts = []
    for setting, by in sorted(cells.items(), key=lambda kv: [_sortable(v) for _, v in kv[0]]):
        where = ", ".join(value_name(k, v) for k, v in setting)
        parts.append((f"{where}: " if where else "") + _cell_text(key, by, values, unit))
    answer = "; ".join(parts[:MAX_CELLS]) + "."
    notes = [p + "." for p in parts[MAX_CELLS:]]
    # the other half of a two-axis question (pre-vs-post: does Post-LN need warm-up?)
    if len(others) == 1:
        for v in values:
            sub = [(p, pt) for p, pt in points if p.get(key) == v]
            inner = contrast(sub, others[0], unit=unit)
            if inner is not None:  # "Post-LN: warm-up 490 ... vs warm-up 0 ..."
                notes.append(inner[0])
    return answer, notes


def _sortable(v: Any) -> tuple[int, Any]:
    return (0, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, str(v))


def _cell_text(key: str, by: dict[Any, list[Point]], values: list[Any], unit: str) -> str:
    present = [v for v in values if v in by]
    if len(present) == 2:
        a, b = present[1], present[0]  # the later value of the spec first: "Pre-LN vs Post-LN"
        return compare_two(value_name(key, a), by[a], value_name(key, b), by[b], unit)
    means = {v: (float(np.mean(side(by[v])[0])) if side(by[v])[0] else math.inf) for v in present}
    ranked = sorted(present, key=lambda v: (means[v], str(v)))
    if len(ranked) < 2:
        return summary(value_name(key, ranked[0]), by[ranked[0]]) if ranked else "no finished trial"
    best, nxt = ranked[0], ranked[1]
    rest = ", ".join(summary(value_name(key, v), by[v]) for v in ranked[2:])
    return (f"best {compare_two(value_name(key, best), by[best], value_name(key, nxt), by[nxt], unit)}"
            + (f"; then {rest}" if rest else ""))


__all__ = ["contrast", "compare_two", "side", "summary", "value_name"]
