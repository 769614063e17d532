"""The statistics of diagnostics.jsonl on a run's page: per-layer heatmaps and scalar curves.

Which row is which comes from the statistic registry (``normlab.diagnostics.catalogue``):
each key of a line is a training statistic whose ``over`` gives its labels (x0..xL for the
stream, 1..L per block, emb/1..L/head per parameter group), so a statistic registered there
shows up here with its labels and help, as its ``draw`` says (``layers``: a heatmap,
``growth``: per-layer profiles, one per step, as Peri-LN draws them, ``curve``: a curve
against step, ``none``: not drawn). Keys the registry does not know (older files, or
per-layer keys such as ``stream_rms/layer3``) are drawn with numbered rows.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import numpy as np

from normlab.diagnostics.catalogue import by_key
from normlab.diagnostics.statistic import OVER
from normlab.report import figures as F
from normlab.report.html import Page

_LAYER_KEY = re.compile(r"^(?P<pre>.*?)[/_.]?(?:layer|l)[/_.]?(?P<n>\d+)(?P<post>.*)$")


def _registered() -> dict[str, Any]:
    return by_key("training")


def _depth(table: dict[str, dict[int, dict[float, float]]], known: dict[str, Any]) -> int | None:
    """L from the lengths of the registered per-block or per-state lists (None if none)."""
    for k, by in table.items():
        s = known.get(k)
        if s is not None and s.over in ("blocks", "states"):
            return len(by) - (s.over == "states")
    return None


def diag_matrices(rows: list[dict[str, Any]],
                  n_layer: int | None = None) -> dict[str, tuple[list[float], list[Any], np.ndarray]]:
    """Per-layer statistics from diagnostics.jsonl: {stat: (steps, row labels, matrix (rows, steps))}.

    Accepts per-layer lists (``"grad_norm": [..]``) and per-layer keys (``"grad_norm/layer3"``).
    ``n_layer`` (the run's L) checks the registry's labels against the list lengths; without
    it L is read from the registered per-block or per-state lists.
    """
    return {k: (steps, labels, m) for k, (steps, labels, _, m) in _matrices(rows, n_layer).items()}


def _matrices(rows: list[dict[str, Any]], n_layer: int | None) -> dict[str, tuple[list[float], list[Any], str, Any]]:
    """{stat: (steps, row labels, row axis name, matrix)}."""
    table: dict[str, dict[int, dict[float, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        step = row.get("step")
        if step is None:
            continue
        for k, v in row.items():
            if isinstance(v, list) and v and all(isinstance(e, (int, float)) for e in v):
                for i, e in enumerate(v):
                    table[k][i + 1][float(step)] = float(e)
            elif isinstance(v, (int, float)) and (m := _LAYER_KEY.match(k)):
                stat = (m["pre"] + m["post"]).strip("/_.") or "value"
                table[stat][int(m["n"])][float(step)] = float(v)
    known = _registered()
    L = n_layer if n_layer is not None else _depth(table, known)
    out = {}
    for stat, by_layer in table.items():
        layers = sorted(by_layer)
        steps = sorted(set().union(*(by_layer[lv].keys() for lv in layers)))
        if len(layers) < 2 or len(steps) < 2:
            continue
        m = np.array([[by_layer[lv].get(s, np.nan) for s in steps] for lv in layers])
        s = known.get(stat)
        if s is not None and L is not None and s.size(L) == len(layers):
            out[stat] = (steps, s.labels(L), _axis(s), m)
        else:  # not a registered statistic, or not of this model's shape: number the rows
            out[stat] = (steps, layers, "layer", m)
    return out


def diag_scalars(rows: list[dict[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    """{key: (steps, values)} of the registered one-number statistics (log Z, output change, ...)."""
    known = {k: s for k, s in _registered().items() if s.over == "scalar"}
    out: dict[str, tuple[list[float], list[float]]] = {}
    for row in rows:
        for k in known.keys() & row.keys():
            v = row[k]
            if row.get("step") is not None and isinstance(v, (int, float)) and v == v:
                xs, ys = out.setdefault(k, ([], []))
                xs.append(float(row["step"]))
                ys.append(float(v))
    return {k: out[k] for k in known if k in out and len(out[k][0]) >= 2}


def diag_figures(page: Page, rows: list[dict[str, Any]], n_layer: int | None = None) -> None:
    """One heatmap per per-layer statistic and one curve per scalar one, captioned with the
    statistic's help from the registry."""
    mats, scalars = _matrices(rows, n_layer), diag_scalars(rows)
    if not (mats or scalars):
        return
    known = _registered()
    page.heading("Per-layer statistics during training", "heatmaps")
    for stat, (steps, layers, axis, m) in mats.items():
        safe = re.sub(r"[^A-Za-z0-9_]+", "_", stat)
        s = known.get(stat)
        if s is not None and not _draws(s, "layers"):
            continue
        what = f"{s.help[0].upper()}{s.help[1:]}. " if s is not None else ""
        page.figure(F.heatmap(m, steps, layers, s.label if s is not None else stat,
                              f"{stat} per layer against step", ylabel=axis),
                    f"heat_{safe}", f"{what}{stat} per {axis} (rows) against training step (columns), "
                    "from diagnostics.jsonl.")
    for stat, (steps, layers, axis, m) in mats.items():
        s = known.get(stat)
        if s is not None and _draws(s, "growth"):
            f = next(f for f in s.figures() if f.kind == "growth")
            page.figure(F.layer_growth(m, steps, layers, s.label, f.title), f.name,
                        f"{s.help[0].upper()}{s.help[1:]}: one line per diagnostics step (colour: step), "
                        f"x = {axis}, from diagnostics.jsonl (Kim et al. 2025 draw this for Pre-LN against Peri-LN).")
    for key, (x, y) in scalars.items():
        s = known[key]
        if not _draws(s, "curve"):
            continue
        page.figure(F.curves({key: (np.asarray(x), np.asarray([y]))}, "training step", s.label,
                             f"{key} against step"), f"diag_{re.sub(r'[^A-Za-z0-9_]+', '_', key)}",
                    f"{s.help[0].upper()}{s.help[1:]}, against training step, from diagnostics.jsonl.")


def _draws(s: Any, kind: str) -> bool:
    """Whether the statistic declares a figure of ``kind`` (``Statistic.draw``)."""
    return any(f.kind == kind for f in s.figures())


def _axis(s: Any) -> str:
    return OVER[s.over]
