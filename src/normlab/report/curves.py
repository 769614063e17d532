"""The training-curve figures every page with runs draws, and how each run ended (its fate).

A leaf of the report: run, study and comparison pages import it; it imports none of them.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from normlab.core.errors import UserError
from normlab.report import figures as F
from normlab.report.html import Page
from normlab.report.load import RunData
from normlab.report.numbers import num, pm, tick
from normlab.report.style import distinct_styles
from normlab.study.outcome import trial_outcomes
from normlab.study.store import TrialRecord

log = logging.getLogger(__name__)

CURVES = [
    ("val/loss", "validation loss (nats/token)", "validation loss", "val_loss"),
    ("train/loss", "train loss (nats/token)", "training loss", "train_loss"),
    ("lr", "learning rate", "learning-rate schedule", "lr"),
    ("grad_norm", "global grad norm (before clipping)", "global gradient norm", "grad_norm"),
]


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
    """How each run ended: "diverged" (its summary says so, or the lab's outcome rule), "running"
    (no summary yet, or interrupted), "stalled" or "ok".

    Stalled and diverged are the lab's one outcome rule (``normlab.study.outcome.judge``: best
    validation loss not below the unigram cross-entropy of the run's data minus the margin), so
    a page marks the seeds that `normlab study status` and the claims call stalled. Drawing
    such a seed into the mean would show an outcome no run had.
    """

    out: dict[Path, str] = {}
    done: list[TrialRecord] = []
    for r in (r for runs in groups.values() for r in runs):
        s = r.summary or {}
        if s.get("status") in ("diverged", "failed"):
            out[r.path] = "diverged"
        elif r.summary is None or s.get("status") in ("running", "interrupted"):
            out[r.path] = "running"  # still training (or killed): drawn, not averaged
        else:
            out[r.path] = "ok"
            done.append(TrialRecord(str(r.path), {}, str(s.get("status")), s, r.path, None))
    try:
        judged = trial_outcomes(done)
    except UserError as e:  # the run's corpus is gone: its seeds are drawn unjudged
        log.warning("stalls not marked: %s", e)
        judged = {}
    for t in done:
        kind = judged[t.id].kind if t.id in judged else "trains"
        out[t.run_dir] = {"stalls": "stalled", "diverged": "diverged"}.get(kind, "ok")
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
    with distinct_styles(groups):  # every figure of the page draws a label alike, and no two alike
        _curves(page, groups, fate, single)


def _curves(page: Page, groups: dict[str, list[RunData]], fate: dict[Path, str], single: bool) -> None:
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
    top.set_xlabel("tokens seen", fontsize=10.5)
    top.tick_params(labelsize=10)
    from matplotlib.ticker import FuncFormatter

    top.xaxis.set_major_formatter(FuncFormatter(tick))


def _caption(title: str, traces: dict[str, list[F.Trace]], single: bool, tps: float | None) -> str:
    n = {len(ts) for ts in traces.values()}
    top = f" Top axis: tokens seen ({num(tps)} per step)." if tps else ""
    if single or n == {1}:
        what = "one run per line" if len(traces) > 1 else "this run"
        return f"{title[0].upper()}{title[1:]} against step, {what}.{top}" + _fate_note(traces, seeds=False)
    seeds = f"{min(n)}-{max(n)}" if len(n) > 1 else str(n.pop())
    return (f"{title[0].upper()}{title[1:]} against step: thin lines are single seeds ({seeds} per setting), "
            f"the thick line their mean.{top}" + _fate_note(traces))


def _fate_note(traces: dict[str, list[F.Trace]], seeds: bool = True) -> str:
    """What the marks of runs that did not train mean; ``seeds``: lines are seeds of a mean."""
    bad = defaultdict(list)
    for label, ts in traces.items():
        for t in ts:
            if t.fate != "ok":
                bad[t.fate].append(label)
    notes = []
    stalled, diverged, running = (", ".join(sorted(set(bad[k]))) for k in ("stalled", "diverged", "running"))
    if running:
        notes.append(" Runs still going (no summary.json yet) are thin lines, left out of the mean." if seeds else
                     f" Not finished (still going, interrupted or killed): {running}.")
    if stalled:
        rule = "below the unigram loss of their data by the lab's margin (normlab.study.outcome)"
        notes.append(f" Stalled seeds (dotted, ○ at the end: {stalled}) did not get {rule} and are left out of the "
                     "mean." if seeds else f" Stalled (○ at the end): {stalled}, not {rule}.")
    if diverged:
        notes.append(f" × marks where a diverged run stopped ({diverged})"
                     + ("; diverged runs are left out of the mean." if seeds else "."))
    return "".join(notes)
