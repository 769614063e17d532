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




def headline(values: dict[str, list[tuple[float, str]]], metric: str, n_trials: int) -> tuple[str, list[str]]:
    """(answer, notes): the winning setting, its margin over the runner-up in nats with its 95%
    Welch interval over seeds (``normlab.stats.effects``, as the claims decide), the seed counts, and
    every setting with stalled or diverged seeds.

    Settings rank as the results table ranks nuisance settings: fewer failed seeds (stalled
    or diverged) first, then the mean over every seed with a value, stalled ones included (a
    stall is an outcome of the setting; only the curves' mean lines leave it out).
    """
    what = metric.replace("_", " ")
    stats = {}
    for label, pts in values.items():
        vals = [v for v, f in pts if f != "diverged" and math.isfinite(v)]
        stats[label] = (float(np.mean(vals)) if vals else math.inf,
                        float(np.std(vals, ddof=1)) if len(vals) > 1 else None, len(vals), len(pts))
    failed = {k: sum(f != "ok" for _, f in values[k]) for k in values}
    ranked = sorted(stats, key=lambda k: (failed[k], stats[k][0]))
    ranked = [k for k in ranked if math.isfinite(stats[k][0])]
    notes = []
    done = sum(len(p) for p in values.values())
    if done < n_trials:
        notes.append(f"{done} of {n_trials} trials have finished; the rest are not in these numbers.")
    for label in values:
        bad = [(v, f) for v, f in values[label] if f != "ok"]
        if not bad:
            continue
        n = stats[label][3]
        kinds = defaultdict(list)
        for v, f in bad:
            kinds[f].append(v)
        txt = "; ".join(f"{len(vs)} of {n} seeds {k}" + (f" ({what} {', '.join(num(v) for v in vs)})" if k == "stalled" else "")
                        for k, vs in kinds.items())
        ok = [v for v, f in values[label] if f == "ok" and math.isfinite(v)]
        if ok:
            sd = float(np.std(ok, ddof=1)) if len(ok) > 1 else None
            notes.append(f"{label}: {txt}; the other {len(ok)}: {pm(float(np.mean(ok)), sd)}. The curves' mean "
                         "lines leave them out; the ranking counts them.")
        else:
            notes.append(f"{label}: {txt}; no seed trained" + ("." if math.isfinite(stats[label][0]) else
                                                               ", so it is not ranked."))
    if not ranked:
        return f"No setting has a finished seed with a finite {what} yet.", notes
    best = ranked[0]
    m, sd, n_ok, _ = stats[best]
    ans = f"{best} is best: {what} {pm(m, sd)} (mean ± sample std over {n_ok} seed{'s' * (n_ok != 1)})"
    if len(ranked) > 1:
        nxt = ranked[1]
        m2, sd2, n2, _ = stats[nxt]
        gap = m2 - m
        ans += f", {num(gap, 3)} nats/token lower than the runner-up {nxt} ({pm(m2, sd2)}, {n2} seed{'s' * (n2 != 1)})"

        e = welch([v for v, _ in values[nxt] if math.isfinite(v)], [v for v, _ in values[best] if math.isfinite(v)])
        if e.lo is None or e.n_min < MIN_SEEDS:
            ans += (f"; fewer than {MIN_SEEDS} seeds a side, so the gap is not weighed against seed noise "
                    "(the claims' rule).")
        else:
            ans += f"; 95% Welch interval of the gap [{num(e.lo, 3)}, {num(e.hi, 3)}]"
            ans += (", above 0: a real difference." if e.lo > 0 else
                    ", which contains 0: not distinguishable from seed noise.")
        if len(ranked) > 2:
            notes.insert(0, "Ranking (settings with stalled or diverged seeds last): "
                         + ", then ".join(f"{k} {num(stats[k][0])}" for k in ranked) + ".")
    else:
        ans += "."
    return ans, notes


__all__ = ["compare_two", "contrast", "headline", "side", "summary", "value_name"]
