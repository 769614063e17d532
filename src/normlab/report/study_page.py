"""The study-store page: trials grouped by their non-seed axis values, seeds as the band."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

import numpy as np

from normlab.report import figures as F
from normlab.report.html import Page
from normlab.report.load import RunData, StudyData, load_run
from normlab.report.pages import curve_figures, mean_std
from normlab.study.store import TrialRecord as Trial


def _find(params: dict[str, Any], suffix: str) -> Any:
    for k, v in params.items():
        if k == suffix or k.endswith("." + suffix):
            return v
    return None


def group_label(params: dict[str, Any]) -> str:
    """Axis values except the seed, placement first: 'post lr=0.001 warmup_steps=100'."""
    items = [(k, v) for k, v in params.items() if k.split(".")[-1] != "seed"]
    items.sort(key=lambda kv: (kv[0].split(".")[-1] != "placement", kv[0]))
    parts = [str(v) if k.split(".")[-1] == "placement" else f"{k.split('.')[-1]}={v}" for k, v in items]
    return " ".join(parts) or "all"


def _natural(label: str) -> list[tuple[int, float, str]]:
    """Sort key splitting 'post warmup_steps=100' into words and numbers."""
    import re

    return [(0, float(x), "") if re.fullmatch(r"[-+]?\d*\.?\d+(e[-+]?\d+)?", x) else (1, 0.0, x)
            for x in re.split(r"[ =]", label)]


def build(study: StudyData) -> Any:
    page = Page(f"normlab study report: {study.spec.get('name', study.path.name)}", study.path / "report")
    groups: dict[str, list[Trial]] = defaultdict(list)
    for t in study.trials:
        groups[group_label(t.params)].append(t)
    # placement first, then numeric axis values in numeric order (warm-up 0 before 50 before 100)
    groups = defaultdict(list, sorted(groups.items(), key=lambda kv: _natural(kv[0])))
    page.heading("Summary", "summary")
    rows = []
    for label, ts in groups.items():
        status = ", ".join(f"{s}: {n}" for s, n in sorted(_count(t.status for t in ts).items()))
        best = [t.summary.get("best_val_loss") for t in ts if t.summary]
        rows.append([label, len(ts), status, mean_std([b for b in best if b is not None])])
    page.table(["trial", "seeds", "status", "best val loss (mean ± sample std over seeds)"], rows)
    failed = [t for t in study.trials if t.error]
    if failed:
        page.text("Errors: " + "; ".join(f"{t.id[:10]}: {t.error}" for t in failed[:10]), "muted")

    runs: dict[str, list[RunData]] = {}
    for label, ts in groups.items():
        rs = [load_run(t.run_dir) for t in ts if (t.run_dir / "metrics.jsonl").is_file()
              and (t.run_dir / "config.json").is_file()]
        if rs:
            runs[label] = rs
    curve_figures(page, runs)
    _best_bars(page, groups)
    _grid_figures(page, study, runs)
    page.heading("Configuration", "config")
    page.text("Resolved study spec (spec.json):")
    page.pre(json.dumps(study.spec, indent=2, sort_keys=True, default=str))
    for label, ts in groups.items():
        cfg = runs[label][0].config if label in runs else {}
        if cfg:
            page.text(f"RunConfig of '{label}' (seed {_find(ts[0].params, 'seed')}):")
            page.pre(json.dumps(cfg, indent=2, sort_keys=True))
    page.versions()
    return page.write()


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for i in items:
        out[i] += 1
    return out


def _best_bars(page: Page, groups: dict[str, list[Trial]]) -> None:
    labels, means, sds = [], [], []
    for label, ts in groups.items():
        v = [t.summary["best_val_loss"] for t in ts if t.summary and _finite(t.summary.get("best_val_loss"))]
        if v:
            labels.append(label)
            means.append(float(np.mean(v)))
            sds.append(float(np.std(v, ddof=1)) if len(v) > 1 else 0.0)
    if labels:
        page.figure(F.bars(labels, means, sds, "best val loss (nats/token)", "best validation loss per trial"),
                    "best_val_loss", "Best validation loss, mean over seeds; error bar = sample std over seeds.")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def final_loss(t: Trial) -> tuple[float, bool]:
    """(final val loss, diverged?) of a trial; diverged or failed trials count as diverged."""
    s = t.summary or {}
    diverged = t.status in ("diverged", "failed") or s.get("status") == "diverged"
    v = s.get("final_val_loss", s.get("best_val_loss"))
    return (float(v) if _finite(v) else math.nan), diverged or not _finite(v)


def _grid_figures(page: Page, study: StudyData, runs: dict[str, list[RunData]]) -> None:
    """Stability map (lr x warm-up per placement) and LR-sensitivity curves when the axes exist."""
    done = [t for t in study.trials if t.status in ("completed", "diverged", "failed")]
    lrs = {_find(t.params, "lr") for t in done} - {None}
    wus = {_find(t.params, "warmup_steps") for t in done} - {None}
    if len(lrs) < 2:
        return
    by_cell: dict[str, dict[tuple[float, float], list[tuple[float, bool]]]] = defaultdict(lambda: defaultdict(list))
    for t in done:
        name = str(_find(t.params, "placement") or "all")
        qk = _find(t.params, "qk_norm")
        if qk:
            name += f"+qk_{qk}"
        by_cell[name][(float(_find(t.params, "lr")), float(_find(t.params, "warmup_steps") or 0))].append(final_loss(t))
    if len(wus) >= 2:
        cells = {n: {k: (float(np.nanmean([v for v, _ in vs])) if any(not d for _, d in vs) else math.nan,
                         all(d for _, d in vs)) for k, vs in c.items()} for n, c in by_cell.items()}
        page.figure(F.stability_map(cells), "stability_map",
                    "Final validation loss per (lr, warm-up) cell, mean over seeds that did not diverge; "
                    "× marks cells where every seed diverged.")
    init = [r.series("train/loss")[1][0] for rs in runs.values() for r in rs if r.series("train/loss")[1]]
    init_loss = float(np.mean(init)) if init else math.log(65)
    curves = {}
    for name, c in by_cell.items():
        xs = sorted({k[0] for k in c})
        seeds = max(len(vs) for vs in c.values())
        m = np.full((seeds, len(xs)), init_loss)
        for (lr, _), vs in c.items():
            for i, (v, dv) in enumerate(vs):
                m[i, xs.index(lr)] = init_loss if dv else min(v, init_loss)
        curves[name] = (np.array(xs), m)
    fig, _ = F.lr_curves(curves, init_loss)
    page.figure(fig, "lr_sensitivity", "Final loss against peak lr (diverged = loss at init); legend: "
                "Wortsman et al. 2023 sensitivity, mean over lrs of min(loss, loss at init) - best loss.")
