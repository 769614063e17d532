"""What the report pages share: how each run ended (its fate), the training-curve figures,
the per-layer matrices of diagnostics.jsonl, and the dispatch from a path to its page.

Pages: ``run_page`` (one training run), ``probe_page`` (one probe output), ``study_page``
(one study store) and ``compare_page`` (several of one kind on shared axes). Each opens
with its question and answer, then the figures, then tables and the exact configuration.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from normlab.report import figures as F
from normlab.report.html import Page, esc
from normlab.report.load import RunData, load_run, load_study, run_label
from normlab.report.numbers import num, pm, tick

# (metric key, y label, title, file name) of the curves drawn against step
CURVES = [
    ("val/loss", "validation loss (nats/token)", "validation loss", "val_loss"),
    ("train/loss", "train loss (nats/token)", "training loss", "train_loss"),
    ("lr", "learning rate", "learning-rate schedule", "lr"),
    ("grad_norm", "global grad norm (before clipping)", "global gradient norm", "grad_norm"),
]
STALL_FRACTION = 0.5  # a seed that fell less than this share of its group's best drop stalled
_LAYER_KEY = re.compile(r"^(?P<pre>.*?)[/_.]?(?:layer|l)[/_.]?(?P<n>\d+)(?P<post>.*)$")


def mean_std(values: Sequence[float]) -> str:
    """'mean ± sample std' (ddof=1, as `normlab study status` and the claims use)."""
    v = [x for x in values if isinstance(x, (int, float)) and math.isfinite(x)]
    if not v:
        return "-"
    return pm(float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else None)


def loss_series(run: RunData) -> tuple[list[float], list[float]]:
    """The curve a run is judged by: validation loss when logged twice or more, else train loss."""
    x, y = run.series("val/loss")
    return (x, y) if len(y) >= 2 else run.series("train/loss")


def fates(groups: dict[str, list[RunData]]) -> dict[Path, str]:
    """How each run ended: "diverged" (its summary says so), "running" (no summary yet, or
    interrupted), "stalled" or "ok".

    Stalled: in a group of two or more seeds that did not diverge, a seed whose loss fell
    by less than half as much as the group's best seed (Post-LN without warm-up has seeds
    that sit at the unigram loss while their siblings train). Drawing such a seed into the
    mean would show an outcome no run had.
    """
    out: dict[Path, str] = {}
    for runs in groups.values():
        drops: dict[Path, float] = {}
        for r in runs:
            s = r.summary or {}
            if s.get("status") in ("diverged", "failed"):
                out[r.path] = "diverged"
                continue
            if r.summary is None or s.get("status") in ("running", "interrupted"):
                out[r.path] = "running"  # still training (or killed): drawn, not averaged
                continue
            out[r.path] = "ok"
            _, y = loss_series(r)
            if len(y) >= 2:
                drops[r.path] = y[0] - y[-1]
        best = max(drops.values(), default=0.0)
        if len(drops) >= 2 and best > 0:
            for p, d in drops.items():
                if d < STALL_FRACTION * best:
                    out[p] = "stalled"
    return out


def tokens_per_step(runs: Sequence[RunData]) -> float | None:
    """Tokens per optimizer step when every run has the same fixed batch (the tokens axis is
    then the step axis rescaled); None when it varies between or within runs."""
    ratios = {round(m["tokens"] / m["step"], 9) for r in runs for m in r.metrics
              if isinstance(m.get("tokens"), (int, float)) and isinstance(m.get("step"), (int, float)) and m["step"] > 0}
    return ratios.pop() if len(ratios) == 1 else None


def curve_figures(page: Page, groups: dict[str, list[RunData]], fate: dict[Path, str] | None = None,
                  single: bool = False) -> None:
    """Loss, lr and grad-norm curves against step: per group every seed a thin line and the
    mean of its seeds that trained a thick one (``F.seed_curves``). ``single``: one run, so
    train and validation loss share one figure and no caption talks about seeds.

    With a fixed batch, tokens seen are a second x axis of the same figure (a separate
    tokens figure would repeat it); with batches that differ, loss against tokens is drawn.
    """
    fate = fate if fate is not None else fates(groups)
    every = [r for rs in groups.values() for r in rs]
    tps = tokens_per_step(every)
    if single:
        _single_loss(page, every[0], tps, fate.get(every[0].path, "ok"))
    wanted = [c for c in CURVES if not single or c[0] not in ("val/loss", "train/loss")]
    if len(groups) > 1 and _same_series(every, "lr"):
        wanted = [c for c in wanted if c[0] != "lr"]  # one schedule for all: the config says it
    for key, ylabel, title, name in wanted:
        traces = _traces(groups, key, "step", fate)
        if traces:
            fig = F.seed_curves(traces, "step", ylabel, title)
            _tokens_axis(fig, tps)
            page.figure(fig, name, _caption(title, traces, single, tps))
    if tps is None and not single:
        traces = _traces(groups, "val/loss", "tokens", fate) or _traces(groups, "train/loss", "tokens", fate)
        if traces:
            page.figure(F.seed_curves(traces, "tokens seen", "loss (nats/token)", "loss against tokens seen"),
                        "loss_tokens", _caption("loss against tokens seen (the batches differ)", traces, single, None))


def _single_loss(page: Page, run: RunData, tps: float | None, end: str) -> None:
    tr = {k: F.Trace(*run.series(key), fate=end) for k, key in (("train", "train/loss"), ("validation", "val/loss"))}
    tr = {k: [t] for k, t in tr.items() if len(t.x)}
    if not tr:
        return
    fig = F.seed_curves(tr, "step", "loss (nats/token)", "training and validation loss")
    for line in fig.axes[0].get_lines():
        if line.get_label() == "validation":
            line.set_marker("o")
            line.set_markersize(4)
    _tokens_axis(fig, tps)
    note = " × marks where the run diverged and stopped." if end == "diverged" else ""
    page.figure(fig, "loss", "Training loss (every logged step) and validation loss (every evaluation) of this "
                "run" + (f"; top axis: tokens seen ({num(tps)} per step)." if tps else ".") + note)


def _traces(groups: dict[str, list[RunData]], key: str, x: str, fate: dict[Path, str]) -> dict[str, list[F.Trace]]:
    out = {}
    for label, runs in groups.items():
        ts = [F.Trace(*r.series(key, x), fate=fate.get(r.path, "ok")) for r in runs]
        ts = [t for t in ts if len(t.x)]
        if ts:
            out[label] = ts
    return out


def _same_series(runs: Sequence[RunData], key: str) -> bool:
    first = runs[0].series(key) if runs else None
    return all(r.series(key) == first for r in runs)


def _tokens_axis(fig: Any, tps: float | None) -> None:
    if not tps:
        return
    top = fig.axes[0].secondary_xaxis("top", functions=(lambda s: s * tps, lambda t: t / tps))
    top.set_xlabel("tokens seen", fontsize=9)
    top.tick_params(labelsize=8.5)
    from matplotlib.ticker import FuncFormatter

    top.xaxis.set_major_formatter(FuncFormatter(tick))


def _caption(title: str, traces: dict[str, list[F.Trace]], single: bool, tps: float | None) -> str:
    n = {len(ts) for ts in traces.values()}
    top = f" Top axis: tokens seen ({num(tps)} per step)." if tps else ""
    if single or n == {1}:
        what = "one run per line" if len(traces) > 1 else "this run"
        return f"{title[0].upper()}{title[1:]} against step, {what}.{top}" + _fate_note(traces)
    seeds = f"{min(n)}-{max(n)}" if len(n) > 1 else str(n.pop())
    return (f"{title[0].upper()}{title[1:]} against step: thin lines are single seeds ({seeds} per setting), "
            f"the thick line their mean.{top}" + _fate_note(traces))


def _fate_note(traces: dict[str, list[F.Trace]]) -> str:
    bad = defaultdict(list)
    for label, ts in traces.items():
        for t in ts:
            if t.fate != "ok":
                bad[t.fate].append(label)
    notes = []
    if bad.get("running"):
        notes.append(" Runs still going (no summary.json yet) are thin lines, left out of the mean.")
    if bad.get("stalled"):
        notes.append(f" Stalled seeds (dotted, ○ at the end: {', '.join(sorted(set(bad['stalled'])))}) fell less than "
                     f"half as far as the best seed of their setting and are left out of its mean.")
    if bad.get("diverged"):
        notes.append(f" × marks where a diverged run stopped ({', '.join(sorted(set(bad['diverged'])))}); "
                     "diverged runs are left out of the mean.")
    return "".join(notes)


def diag_matrices(rows: list[dict[str, Any]]) -> dict[str, tuple[list[float], list[Any], np.ndarray]]:
    """Per-layer statistics from diagnostics.jsonl: {stat: (steps, layers, matrix (L, steps))}.

    Accepts per-layer lists (``"grad_norm": [..]``) and per-layer keys (``"grad_norm/layer3"``).
    """
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
    # diagnostics.jsonl list lengths (normlab.diagnostics.training): L per block, L + 1 per stream
    # x_0..x_L, L + 2 per parameter group [embeddings, blocks 1..L, final norm/head]
    n_block = max((len(by) for k, by in table.items() if k in ("cos", "angle")), default=None)
    out = {}
    for stat, by_layer in table.items():
        layers = sorted(by_layer)
        steps = sorted(set().union(*(by_layer[lv].keys() for lv in layers)))
        if len(layers) < 2 or len(steps) < 2:
            continue
        m = np.array([[by_layer[lv].get(s, np.nan) for s in steps] for lv in layers])
        names: list[Any] = layers
        if n_block is not None and len(layers) == n_block + 2:
            names = ["emb", *range(1, n_block + 1), "head"]
        elif n_block is not None and len(layers) == n_block + 1:
            names = [f"x{i}" for i in range(n_block + 1)]
        out[stat] = (steps, names, m)
    return out


def run_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    from normlab.report.run_page import build

    return build(load_run(path), progress=progress, out=out)


def probe_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    from normlab.report.load import load_probe
    from normlab.report.probe_page import build

    return build(load_probe(path), progress=progress, out=out)


def study_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    from normlab.report.study_page import build

    return build(load_study(path), progress=progress, out=out)


def build_report(path: str | Path, progress: bool = False, out: str | Path | None = None) -> Path:
    """Write PATH/report/index.html (or OUT/index.html) for a run dir, probe output or study
    store; return its path. ``progress`` prints each figure on stderr as it is drawn."""
    from normlab.report.load import detect

    page = {"run": run_page, "probe": probe_page, "study": study_page}[detect(path)]
    return page(path, progress=progress, out=Path(out) if out is not None else None)


__all__ = ["build_report", "run_page", "probe_page", "study_page", "run_label", "esc", "curve_figures",
           "diag_matrices", "fates", "mean_std"]
