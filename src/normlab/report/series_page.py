"""The page of a checkpoint series (``normlab inspect --series``): how one model's per-layer
statistics move over training, answered first with the numbers; then, for each per-layer
statistic of the registry present in the rows (in registry order), a layer x step heat map
beside lines for the first, middle and last layer; then the loss and log Z against step, one
table row per checkpoint and the exact settings.

The answer ranks the statistics by the symmetric relative change of their layer mean from the
first checkpoint to the last, (b - a) / max(|a|, |b|), which lies in [-2, 2] and stays finite
for a statistic that starts at zero (a block's deletion cost at initialisation).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from normlab.diagnostics.catalogue import STATISTICS
from normlab.report import figures as F
from normlab.report.html import Page
from normlab.report.kinds import heading
from normlab.report.load import SeriesData
from normlab.report.numbers import duration, num, signed
from normlab.run.outdir import default_page

# the probe-row sublayer of each ``over`` (``Statistic.rows``); a labelled statistic takes the rest
_SUBLAYER = {"states": "stream", "inputs": "stream", "blocks": "block", "groups": "group"}


class Stat:
    """One per-layer statistic of the series: (layers, steps) values and its registry words."""

    def __init__(self, key: str, sublayer: str, label: str, help_: str, layers: list[Any], steps: list[int],
                 m: np.ndarray) -> None:
        self.key, self.sublayer, self.label, self.help = key, sublayer, label, help_
        self.layers, self.steps, self.m = layers, steps, m

        self.title = label  # stats_of names the sublayer too when two statistics share a label

    @property
    def axis(self) -> str:
        return "stream state" if self.sublayer == "stream" else "block" if self.sublayer in ("block", "attn") \
            else "layer"

    @property
    def names(self) -> list[str]:
        """Each row's name: x0 .. xL for the stream, 'block 1' .. for blocks."""
        return [f"x{v}" if self.sublayer == "stream" else f"{self.axis} {v}" for v in self.layers]

    def mean(self, j: int) -> float:
        col = self.m[:, j]
        col = col[np.isfinite(col)]
        return float(col.mean()) if col.size else math.nan

    def change(self) -> float:
        """Symmetric relative change of the layer mean, first checkpoint to last."""
        a, b = self.mean(0), self.mean(len(self.steps) - 1)
        top = max(abs(a), abs(b))
        return (b - a) / top if math.isfinite(a) and math.isfinite(b) and top > 0 else 0.0


def stats_of(series: SeriesData) -> list[Stat]:
    """Every per-layer statistic of the registry in the rows (more than one layer), in registry order."""

    steps = series.steps
    taken: set[tuple[str, str]] = set()
    out = []
    for _, s in STATISTICS.items():
        if "inspect" not in s.tools or s.over in ("scalar", "pairs"):
            continue
        subs = [_SUBLAYER[s.over]] if s.over in _SUBLAYER else sorted(
            {r.get("sublayer") or "" for r in series.rows if r["metric"] == s.key} - set(_SUBLAYER.values())
            - {"model", "pair"})
        for sub in subs:
            if (s.key, sub) in taken:
                continue
            rows = [r for r in series.rows if r["metric"] == s.key and (r.get("sublayer") or "") == sub]
            layers = sorted({r["layer"] for r in rows})
            if len(layers) < 2:
                continue
            taken.add((s.key, sub))
            m = np.full((len(layers), len(steps)), np.nan)
            for r in rows:
                m[layers.index(r["layer"]), steps.index(r["step"])] = r["value"]
            out.append(Stat(s.key, sub, s.label, s.help, layers, steps, m))
    for st in out:
        if sum(o.label == st.label for o in out) > 1:
            st.title = f"{st.label} ({st.axis}s)"
    return out


def chosen(n: int) -> list[int]:
    """The first, middle and last of ``n`` rows (fewer when they coincide)."""
    return sorted({0, (n - 1) // 2, n - 1})


def _scalar(series: SeriesData, key: str) -> list[float]:
    """A summary.json number at each step (NaN where absent or null)."""
    vals = [series.summaries.get(s, {}).get(key) for s in series.steps]
    return [float(v) if isinstance(v, (int, float)) else math.nan for v in vals]


def answer(series: SeriesData, stats: list[Stat]) -> tuple[str, list[str]]:
    steps = series.steps
    if len(steps) < 2:
        return f"{len(steps)} checkpoint measured: a series needs two to change.", []
    parts = [f"over {len(steps)} checkpoints from step {num(steps[0])} to {num(steps[-1])}"]
    loss = _scalar(series, "loss")
    if all(math.isfinite(v) for v in (loss[0], loss[-1])):
        best = int(np.nanargmin(loss))
        parts.append(f"the loss goes from {num(loss[0], 4)} to {num(loss[-1], 4)} nats/token (lowest "
                     f"{num(loss[best], 4)} at step {num(steps[best])})")
    ranked = sorted(stats, key=lambda s: -abs(s.change()))
    if ranked:
        parts.append("the layer means that change most are " + ", ".join(
            f"{s.title} ({num(s.mean(0), 3)} → {num(s.mean(len(steps) - 1), 3)})" for s in ranked[:3]))
    notes = []
    for s in ranked[:3]:
        d = np.abs(s.m[:, -1] - s.m[:, 0])
        i = int(np.nanargmax(d)) if np.isfinite(d).any() else 0
        means = [s.mean(j) for j in range(len(steps))]
        jumps = np.abs(np.diff(means))
        j = int(np.nanargmax(jumps)) if np.isfinite(jumps).any() else 0
        notes.append(f"{s.title}: {s.names[i]} moves most ({num(s.m[i, 0], 3)} → {num(s.m[i, -1], 3)}); "
                     f"its layer mean moves most between steps {num(steps[j])} and {num(steps[j + 1])} "
                     f"({signed(means[j + 1] - means[j])}).")
    notes.append("Ranked by the symmetric relative change of the layer mean, first checkpoint to last: "
                 "(b − a) / max(|a|, |b|); " + ", ".join(f"{s.title} {signed(s.change(), 2)}" for s in ranked) + ".")
    text = series.summaries.get(steps[0], {}).get("text")
    if text:
        notes.append(f"Every checkpoint is measured on the same {num(series.summaries[steps[0]].get('tokens'))} "
                     f"tokens of {text}.")
    return (parts[0][0].upper() + parts[0][1:] + ": " + "; ".join(parts[1:]) + ".") if len(parts) > 1 \
        else parts[0] + ".", notes


def describe(series: SeriesData) -> str:
    s = series.summaries.get(series.steps[0], {}) if series.steps else {}
    bits = [f"family {s.get('family')}" if s.get("family") else "", f"placement {s['placement']}"
            if s.get("placement") else "", f"{num(s['n_layer'])} blocks" if s.get("n_layer") else "",
            f"{len(series.steps)} checkpoints"]
    return ", ".join(b for b in bits if b)


def build(series: SeriesData, progress: bool = False, out: Path | None = None) -> Path:
    name = series.meta.get("name") or series.path.name
    head = heading("series", name=name, what=describe(series))
    page = Page(head.title, out or default_page(series.path), progress=progress)
    stats = stats_of(series)
    ans, notes = answer(series, stats)
    page.lead(head.question, ans, notes)
    steps = series.steps
    if len(steps) >= 2:
        page.heading("Per-layer statistics against step", "figures")
        for s in stats:
            what = f"{s.help[0].upper()}{s.help[1:]}" if s.help else s.key
            rows = chosen(len(s.layers))
            safe = re.sub(r"[^A-Za-z0-9_]+", "_", f"{s.key}_{s.sublayer}")
            ticks = [n.removeprefix(s.axis + " ") for n in s.names]
            page.figure(F.layer_step(s.m, steps, ticks, rows, s.label, f"{s.title} over training", ylabel=s.axis,
                                     names=s.names),
                        f"series_{safe}", f"{what}. Left: per {s.axis} (rows) at each checkpoint (columns, in step "
                        f"order); right: {', '.join(s.names[i] for i in rows)} (first, middle, last) against "
                        "training step.", wide=True)
        loss, logz = _scalar(series, "loss"), _scalar(series, "log_z")
        groups = {k: (np.asarray(steps, float), np.asarray([v])) for k, v in (("loss", loss), ("mean log Z", logz))
                  if any(math.isfinite(x) for x in v)}
        if groups:
            page.figure(F.curves(groups, "training step", "nats/token (loss), nats (log Z)",
                                 "loss and mean log Z against step", logy=False), "series_loss",
                        "Loss (mean cross-entropy) and mean log Z of the output softmax on the measured text, "
                        "at each checkpoint.")
    page.heading("Checkpoints", "tables")
    table = []
    for st in steps:
        s = series.summaries.get(st, {})
        where = series.meta.get("revisions", {}).get(str(st)) or series.meta.get("sources", {}).get(str(st))
        table.append([st, where or s.get("source"), s.get("loss"),  # a Hub revision: REPO@REV, else the folder
                      s.get("log_z"), s.get("tokens"), duration(s.get("wall_time_s"))])
    page.table(["step", "checkpoint", "loss (nats/token)", "mean log Z", "tokens", "wall time"], table)
    page.heading("Configuration", "config")
    page.details("Series settings (series.json)", json.dumps(series.meta, indent=2, sort_keys=True, default=str))
    page.versions()
    return page.write()


__all__ = ["Stat", "answer", "build", "chosen", "stats_of"]
