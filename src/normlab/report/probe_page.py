"""The probe page: how gradients and activations at initialisation scale with depth; for the
output of ``normlab inspect`` (one trained checkpoint, recognised by ``kinds.inspected``), what
each of its blocks does (answer in ``checkpoint``), with the same figures.

It opens with the fitted slopes (the last block's W2 gradient against depth, Xiong et al.
2020 Thm 1) and the per-layer trends, then the figures every registered statistic declares
(``Statistic.draw``, ``figure_specs``), then one table row per probed quantity and the exact
probe configuration.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from normlab.diagnostics.catalogue import STATISTICS
from normlab.report import checkpoint
from normlab.report import figures as F
from normlab.report.html import Page
from normlab.report.kinds import heading, inspected, still_written
from normlab.report.load import ProbeData
from normlab.report.numbers import num, rounded, signed
from normlab.run.outdir import default_page

W2 = ("W_2", "W2")
_KIND = {"layers": "profile", "depth": "depth"}  # a statistic's Figure.kind -> key_figure's kind


def figure_specs() -> list[tuple[str, str, str, tuple[str, ...], str, str, str]]:
    """(kind, metric, sublayer, params, y label, title, file name) of every per-layer or
    against-depth figure a registered probe or inspect statistic declares, in registry order."""

    out = []
    for _, s in STATISTICS.items():
        if not s.tools & {"probe", "inspect"}:
            continue
        where = s.rows(2)
        for f in s.figures():
            if f.kind in _KIND:
                sub = f.sublayer or (where[0][1] if where else "")
                params = f.params or tuple(dict.fromkeys(p for _, w, p in where if w == sub))
                out.append((_KIND[f.kind], s.key, sub, params, f.label, f.title, f.name))
    return out


Rows = list[dict[str, Any]]


def select(rows: Rows, metric: str, sublayer: str, params: Sequence[str]) -> Rows:
    return [r for r in rows if r["metric"] == metric and (r.get("sublayer") or "") == sublayer
            and (r.get("param") or "") in params]


def _labels(rows: Rows) -> tuple[str, ...]:
    return ("placement", "init") if len({r.get("init") for r in rows}) > 1 else ("placement",)


def _by(rows: Rows, keys: tuple[str, ...]) -> dict[str, Rows]:
    out: dict[str, Rows] = defaultdict(list)
    for r in rows:
        out["/".join(str(r.get(k)) for k in keys)].append(r)
    return dict(out)


def _seed_matrix(rows: Rows, xkey: str) -> tuple[np.ndarray, np.ndarray]:
    """(x values, (seeds, x) matrix) from long-format rows."""
    xs = sorted({r[xkey] for r in rows})
    seeds = sorted({r["seed"] for r in rows})
    m = np.full((len(seeds), len(xs)), np.nan)
    for r in rows:
        m[seeds.index(r["seed"]), xs.index(r[xkey])] = r["value"]
    return np.array(xs, float), m


def _last(rows: Rows) -> Rows:
    """Rows of the last layer (weights: block L; stream: x_L) of every depth."""
    return [r for r in rows if r["layer"] == r["n_layer"]]


def depth_slopes(rows: Rows) -> dict[str, tuple[float, float, int]]:
    """{label: (slope, stderr, points)} of log value against log L at the last layer, pooled over
    seeds (one point per depth x seed, as ``normlab.diagnostics.fits``)."""
    out = {}
    for lab, rs in _by(_last(rows), _labels(rows)).items():
        pts = [(r["n_layer"], r["value"]) for r in rs if r["value"] > 0 and math.isfinite(r["value"])]
        if len({L for L, _ in pts}) > 1:
            s, se = F.loglog_slope(np.array([p[0] for p in pts]), np.array([p[1] for p in pts]))
            out[lab] = (s, se, len(pts))
    return out


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Rank correlation (average ranks for ties)."""
    def ranks(v: Sequence[float] | np.ndarray) -> np.ndarray:
        a = np.asarray(v, float)
        order = a.argsort()
        r = np.empty_like(a)
        r[order] = np.arange(a.size)
        for u in np.unique(a):
            r[a == u] = r[a == u].mean()
        return r

    if len(x) < 2:
        return math.nan
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def layer_trend(rows: Rows, depth: int) -> dict[str, float]:
    """{label: Spearman(layer index, seed-mean value)} at depth ``depth``."""
    out = {}
    for lab, rs in _by([r for r in rows if r["n_layer"] == depth], _labels(rows)).items():
        x, m = _seed_matrix(rs, "layer")
        out[lab] = spearman(x, np.nanmean(m, axis=0))
    return out


def _slopes_text(slopes: dict[str, tuple[float, float, int]]) -> str:
    return ", ".join(f"{lab} {signed(s)} ± {num(se, 2)}" for lab, (s, se, _) in slopes.items())


def w2_slopes(probe: ProbeData) -> dict[str, tuple[float, float, int]]:
    """The probe's own W2 fit (summary.json ``w2_slope``) when it has one, else the same fit
    computed here from the rows."""
    fits = probe.summary.get("w2_slope") if isinstance(probe.summary.get("w2_slope"), dict) else None
    if fits and all(isinstance(f, dict) and "slope" in f for f in fits.values()):
        return {p: (f["slope"], f.get("stderr", math.nan), f.get("n", 0)) for p, f in fits.items()}
    return depth_slopes(select(probe.rows, "grad_norm", "ffn", W2))


def answer(probe: ProbeData) -> tuple[str, list[str]]:
    """The fitted slopes and per-layer trends, with the numbers."""
    rows, notes = probe.rows, []
    depth = max(r["n_layer"] for r in rows)
    w2 = select(rows, "grad_norm", "ffn", W2)
    slopes = w2_slopes(probe)
    if slopes:
        ans = (f"The last block's W2 gradient norm scales as L^slope with fitted slopes {_slopes_text(slopes)} "
               f"(log-log least squares over depths {_depths(w2)} and seeds; Xiong et al. 2020 Thm 1 predict about 0 "
               "for Post-LN and about -0.5 for Pre-LN).")
    else:
        ans = f"{len({(r['metric'], r.get('param'), r.get('sublayer')) for r in rows})} quantities probed at depths " \
              f"{_depths(rows)}; no W2 gradient rows, so no Xiong slope (see the table)."
    block = select(rows, "grad_norm", "block", ("all",)) or w2
    if block:
        trend = layer_trend(block, depth)
        which = "block" if block is not w2 else "W2"
        notes.append(f"Per-layer {which} gradient at L={depth}, Spearman(layer, norm): " + ", ".join(
            f"{lab} {signed(v, 2)} ({'rises toward the output' if v > 0 else 'falls toward the output'})"
            for lab, v in trend.items() if math.isfinite(v)) + ".")
    stream = [r for r in select(rows, "mean_sq", "stream", ("x",)) if r["n_layer"] == depth]
    if stream:
        per = {lab: np.nanmean(_seed_matrix(rs, "layer")[1], axis=0) for lab, rs in _by(stream, _labels(stream)).items()}
        notes.append(f"Forward norm E||x_l||²/d from x_0 to x_{depth}: " + ", ".join(
            f"{lab} {num(v[0], 3)} → {num(v[-1], 3)} ({signed(float(np.polyfit(np.arange(v.size), v, 1)[0]), 3)} per layer)"
            for lab, v in per.items()) + ".")
    return ans, notes


def _depths(rows: Rows) -> str:
    return ", ".join(num(L) for L in sorted({r["n_layer"] for r in rows}))


def describe_probe(probe: ProbeData) -> str:
    c, rows = probe.config, probe.rows
    placements = ", ".join(sorted({r["placement"] for r in rows}))
    seeds = len({r["seed"] for r in rows})
    bits = [placements, f"init {c['init']}" if c.get("init") else None, f"d={c['d_model']}" if c.get("d_model") else None,
            f"L = {_depths(rows)}", f"{seeds} seed{'s' * (seeds != 1)}", f"{c['data']} data" if c.get("data") else None]
    return "; ".join(b for b in bits if b)


def build(probe: ProbeData, progress: bool = False, out: Path | None = None) -> Path:
    if inspected(probe.path):  # one trained checkpoint: what its blocks do, not depth scaling at init

        head = heading("inspect", model=probe.summary.get("model", probe.path.name), what=checkpoint.describe(probe),
                       text=checkpoint.text_of(probe))
        ans, notes = checkpoint.answer(probe) if probe.rows else ("probe.csv has no rows: nothing was measured.", [])
    else:
        head = heading("probe", name=probe.path.name, what=describe_probe(probe) if probe.rows else "no rows")
        ans, notes = answer(probe) if probe.rows else ("probe.csv has no rows: nothing was measured.", [])
    page = Page(head.title, out or default_page(probe.path), progress=progress)
    if probe.writer:
        notes = [still_written(probe.writer), *notes]
    page.lead(head.question, ans, notes)
    if not probe.rows:
        page.versions()
        return page.write()
    page.heading("Evidence", "figures")
    depth = max(r["n_layer"] for r in probe.rows)
    drawn = 0
    for kind, metric, sub, params, ylabel, title, name in figure_specs():
        rows = select(probe.rows, metric, sub, params)
        if rows:
            drawn += key_figure(page, kind, rows, depth, ylabel, title, name)
    if not drawn:  # a probe of other quantities: the first few, per layer
        for (metric, param, sub), rows in list(_quantities(probe.rows).items())[:4]:
            what = " ".join(v for v in (metric, param, sub) if v)
            drawn += key_figure(page, "profile", rows, depth, what, what, "layers_" + re.sub(r"\W+", "_", what))
    page.heading("Every probed quantity", "tables")
    table = []
    for (metric, param, sub), rows in _quantities(probe.rows).items():
        slopes = depth_slopes(rows)
        trend = layer_trend(rows, depth)
        last = {lab: float(np.nanmean([r["value"] for r in rs])) for lab, rs in
                _by([r for r in _last(rows) if r["n_layer"] == depth], _labels(rows)).items()}
        for lab in sorted(set(trend) | set(slopes) | set(last)):
            s = slopes.get(lab)
            table.append([metric, sub, param, lab, f"{signed(s[0])} ± {num(s[1], 2)}" if s else "–",
                          signed(trend.get(lab, math.nan), 2), last.get(lab)])
    header = ["metric", "sublayer", "param", "placement", "slope vs log L (last layer)",
              f"Spearman(layer, value) at L={depth}", f"seed mean at the last layer, L={depth}"]
    if len({r["n_layer"] for r in probe.rows}) == 1:  # one depth (an inspected checkpoint): no depth slope
        header.pop(4)
        table = [row[:4] + row[5:] for row in table]
    page.table(header, table)
    page.heading("Configuration", "config")
    page.details("Probe configuration (probe_config.json)", json.dumps(probe.config, indent=2, sort_keys=True,
                                                                        default=str))
    if probe.summary:
        page.details("Fits as written by the probe (summary.json)",
                     json.dumps(rounded(probe.summary), indent=2, sort_keys=True, default=str))
    page.versions()
    return page.write()


def _quantities(rows: Rows) -> dict[tuple[str, str, str], Rows]:
    out: dict[tuple[str, str, str], Rows] = defaultdict(list)
    for r in rows:
        out[(r["metric"], r.get("param") or "", r.get("sublayer") or "")].append(r)
    return dict(out)


def key_figure(page: Page, kind: str, rows: Rows, depth: int, ylabel: str, title: str, name: str) -> int:
    labels = _labels(rows)
    if kind == "depth":
        last = _last(rows)
        series = {lab: _seed_matrix(rs, "n_layer") for lab, rs in _by(last, labels).items()}
        if len({r["n_layer"] for r in last}) < 2:
            return 0
        if all(np.all(ys > 0) for _, ys in series.values()) and "cos" not in ylabel:
            fits = {k: v[:2] for k, v in depth_slopes(rows).items()}
            fig, _ = F.depth_scaling(series, ylabel, title, fits=fits)
            page.figure(fig, name, f"{ylabel} against depth L on log-log axes; thin lines are seeds, thick their "
                        "mean; legend: least-squares slope of log value against log L over every depth and seed, "
                        "± its standard error.")
        else:
            fig = F.curves(series, "depth L", ylabel, title, logy=False)
            F.depth_axis(fig.axes[0], [r["n_layer"] for r in last])
            page.figure(fig, name, f"{ylabel} against depth L; thin lines are seeds, thick their mean.")
        return 1
    at = [r for r in rows if r["n_layer"] == depth]
    series = {lab: _seed_matrix(rs, "layer") for lab, rs in _by(at, labels).items()}
    if not any(len(x) > 1 for x, _ in series.values()):
        return 0
    stream = rows[0].get("sublayer") == "stream"
    xlabel = "stream index l (0 = embedding output)" if stream else "layer index l (1 = next to the embedding)"
    seeds = max(ys.shape[0] for _, ys in series.values())
    page.figure(F.layer_profile(series, ylabel, f"{title}, L={depth}", xlabel=xlabel), name,
                f"{ylabel} against {'stream index' if stream else 'layer'} at depth {depth}"
                + ("; thin lines are seeds, thick their mean." if seeds > 1 else " (one seed)."))
    return 1

