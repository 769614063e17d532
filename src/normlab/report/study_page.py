"""The study-store page: the study's own question answered with the numbers (``study_answer``),
which setting wins, by how much, over how many seeds; then the
curves (every seed a thin line), the metric per seed, the lr x warm-up maps, the tables
and the exact configuration. Trials are grouped by their non-seed axis values."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from normlab.core.errors import UserError
from normlab.report import figures as F
from normlab.report.baseline import implementation_check, label_items, split
from normlab.report.curves import curve_figures
from normlab.report.html import Page, esc
from normlab.report.kinds import heading, study_question
from normlab.report.load import RunData, StudyData, load_run
from normlab.report.numbers import duration, num, pm
from normlab.report.study_answer import contrast, headline
from normlab.run.dir import RunDir
from normlab.run.outdir import default_page
from normlab.study.outcome import horizon_text, rule_text, trial_ces, trial_outcomes
from normlab.study.results import results
from normlab.study.store import TrialRecord as Trial

MAX_CURVE_GROUPS = 8  # more settings than this: curves show each scientific setting's best nuisance


def _find(params: dict[str, Any], suffix: str) -> Any:
    for k, v in params.items():
        if k == suffix or k.endswith("." + suffix):
            return v
    return None


def group_label(params: dict[str, Any]) -> str:
    """Axis values except the seed, placement first, then a baseline's implementation:
    'post lr=0.001 warmup_steps=100', 'pre hf-gpt2 warmup_steps=0' (``baseline.label_items``)."""
    items = label_items(params)
    bare = ("placement", "impl")  # values that read without their key
    items.sort(key=lambda kv: (bare.index(s) if (s := kv[0].split(".")[-1]) in bare else len(bare), kv[0]))
    parts = [str(v) if k.split(".")[-1] in bare else f"{k.split('.')[-1]}={num(v)}" for k, v in items]
    return " ".join(parts) or "all"


def _natural(label: str) -> list[tuple[int, float, str]]:
    """Sort key splitting 'post warmup_steps=100' into words and numbers."""
    out = []
    for x in re.split(r"[ =]", label):
        try:
            out.append((0, float(x.replace(",", "")), ""))
        except ValueError:
            out.append((1, 0.0, x))
    return out


FATE = {"trains": "ok", "stalls": "stalled", "diverged": "diverged"}  # an outcome's word on the page


def trial_fates(study: StudyData) -> tuple[dict[str, str], str | None]:
    """(fate of every trial id, the sentence stating the rule and its horizon). Fates are the
    lab's one outcome rule (``normlab.study.outcome``, as `normlab study status` and the
    claims judge): ok (trains), stalled or diverged; a failed trial counts as diverged, an
    unfinished one is "running"."""

    note: str | None = None
    try:
        ces = trial_ces(study.trials)
    except UserError as e:  # the data the runs trained on is gone: no stall can be judged
        ces, note = {}, f"Stalls are not marked: {e}."
    got = trial_outcomes(study.trials, ces)
    if got:
        refs = set(ces.values())
        rule = f": {rule_text(refs.pop(), fmt=lambda v: num(v, 4))}" if len(refs) == 1 else ""
        note = (f"Outcomes are the lab's rule (normlab.study.outcome, as study status and the claims judge), "
                f"{horizon_text(got.values())}{rule}.")
    out = {}
    for t in study.trials:
        if t.id in got:
            out[t.id] = FATE[got[t.id].kind]
        elif t.status in ("completed", "diverged", "failed"):
            out[t.id] = "diverged" if t.status in ("diverged", "failed") else "ok"
        else:
            out[t.id] = "running"
    return out, note


def build(study: StudyData, progress: bool = False, out: Path | None = None) -> Path:
    spec = study.spec
    question, axis = study_question(spec)
    head = heading("study", name=spec.get("name", study.path.name), question=question)
    page = Page(head.title, out or default_page(study.path), progress=progress)
    metric = spec.get("metric", "best_val_loss")
    groups: dict[str, list[Trial]] = defaultdict(list)
    for t in study.trials:
        groups[group_label(t.params)].append(t)
    # placement first, then numeric axis values in numeric order (warm-up 0 before 50 before 100)
    groups = dict(sorted(groups.items(), key=lambda kv: _natural(kv[0])))
    runs: dict[str, list[RunData]] = {}
    for label, ts in groups.items():
        rs = [load_run(t.run_dir) for t in ts if RunDir(t.run_dir).is_report_run()]
        if rs:
            runs[label] = rs
    fate, rule = trial_fates(study)
    values = {label: [(trial_value(t, metric), fate[t.id]) for t in ts if t.status in ("completed", "diverged", "failed")]
              for label, ts in groups.items()}
    values = {k: v for k, v in values.items() if v}
    answer, notes = headline(values, metric, len(study.trials))
    points = [(t.params, (trial_value(t, metric), fate[t.id])) for t in study.trials
              if t.status in ("completed", "diverged", "failed")]
    unit = "nats/token" if "loss" in metric else ""
    order = (spec.get("axes") or {}).get(axis) or next((g[axis] for g in spec.get("zip") or [] if axis in g), ())
    # the question is the lab's: a baseline arm (another model.impl) is its own check, below it
    own = contrast(split(points)[0], axis, list(dict.fromkeys(order)), unit) if axis else None
    if own is not None:  # the study's own question first; the best setting overall after it
        notes = [*own[1], f"Best setting overall: {answer}", *notes]
        answer = own[0]
    page.lead(head.question, answer, [*notes, rule] if rule else notes)
    check = implementation_check(points, unit)
    if check:
        page.text(check)

    page.heading("Evidence", "figures")
    shown = _curve_groups(study, groups, runs, metric)
    curve_figures(page, shown, {t.run_dir: fate[t.id] for t in study.trials})
    if values:
        page.figure(F.seed_dots(values, f"{metric.replace('_', ' ')} (nats/token)", f"{metric.replace('_', ' ')} per seed"),
                    "metric_per_seed", f"{metric.replace('_', ' ')} of every seed (dots) and the mean of the seeds that "
                    "trained (bar, value above it); best setting on top. Hollow dots: stalled seeds; × at the right "
                    "edge: diverged seeds, which have no final value.")
    _grid_figures(page, study, runs)

    page.heading("Tables", "tables")
    results_table(page, study, metric)
    page.raw("<h3>Every trial</h3>")
    rows = []
    for label, ts in groups.items():
        for t in ts:
            s = t.summary or {}
            state = t.status + (" (stalled)" if fate[t.id] == "stalled" else "")
            rows.append([t.id[:10], label, _find(t.params, "seed"), state, s.get("best_val_loss"),
                         s.get("final_val_loss"), s.get("steps"), duration(s.get("wall_time_s")), s.get("tokens_per_s")])
    page.table(["trial", "setting", "seed", "status", "best val loss", "final val loss", "steps", "wall time",
                "tokens/s"], rows)
    failed = [t for t in study.trials if t.error]
    if failed:
        page.text("Errors: " + "; ".join(f"{t.id[:10]}: {t.error}" for t in failed[:10]), "muted")
    page.heading("Configuration", "config")
    page.details("Resolved study spec (spec.json)", json.dumps(spec, indent=2, sort_keys=True, default=str))
    for label, ts in groups.items():
        if label in runs:
            page.details(f"RunConfig of '{label}' (seed {_find(ts[0].params, 'seed')})",
                         json.dumps(runs[label][0].config, indent=2, sort_keys=True))
    page.versions()
    return page.write()


def trial_value(t: Trial, metric: str) -> float:
    v = (t.summary or {}).get(metric)
    return float(v) if _finite(v) else math.nan


def _curve_groups(study: StudyData, groups: dict[str, list[Trial]], runs: dict[str, list[RunData]],
                  metric: str) -> dict[str, list[RunData]]:
    """Curve groups: all of them, or with many settings each scientific setting at its best
    nuisance setting (the results table's pick), so the figure stays readable."""
    nuisance = study.spec.get("nuisance") or []
    nuisance = [a for a in nuisance if a != "seed"]
    if len(runs) <= MAX_CURVE_GROUPS or not nuisance:
        return runs

    keep = set()
    for row in results(study.trials, study.spec.get("scientific", []), nuisance, metric):
        keep.add(group_label({**row.scientific, **row.nuisance}))
    return {k: v for k, v in runs.items() if k in keep} or runs


def results_table(page: Page, study: StudyData, metric: str, title: str = "Results") -> None:
    """The table of `normlab study status` (best nuisance setting per scientific setting)."""

    sci = study.spec.get("scientific") or []
    nui = [a for a in (study.spec.get("nuisance") or []) if a != "seed"]
    rows = results(study.trials, sci, nui, metric)
    if not rows:
        return
    page.raw(f"<h3>{esc(title)} (as <code>normlab study status</code>)</h3>")
    page.table([*(a.split(".")[-1] for a in sci), *(f"best {a.split('.')[-1]}" for a in nui),
                f"{metric.replace('_', ' ')} (mean ± sample std)", "seeds", "diverged", "done"],
               [[*(num(r.scientific[a]) for a in sci), *(num(r.nuisance[a]) for a in nui), pm(r.mean, r.std),
                 r.seeds, r.diverged, f"{r.final}/{r.trials}"] for r in rows])


def _finite(v: Any) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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
                    "× marks cells where every seed diverged.", wide=len(cells) > 2)
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
    page.figure(fig, "lr_sensitivity", "Final loss against peak lr (diverged = loss at init); thin lines are seeds, "
                "thick their mean; legend: Wortsman et al. 2023 sensitivity, mean over lrs of min(loss, loss at "
                "init) - best loss.")
