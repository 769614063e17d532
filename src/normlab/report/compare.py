"""``normlab report A B ...``: several runs, probes or studies on one page, on shared axes
with one legend per figure. Each input is named by its directory; its curves keep that
name in every figure, and the page opens with which one is best and by how much."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from normlab.core.errors import UserError
from normlab.report import checkpoint, probe_page, study_answer, study_page
from normlab.report import figures as F
from normlab.report.curves import curve_figures, fates
from normlab.report.html import Page
from normlab.report.kinds import heading, inspected
from normlab.report.load import RunData, detect, load_probe, load_run, load_study
from normlab.report.numbers import duration, num, signed
from normlab.report.run_page import describe
from normlab.run.dir import RunDir


def names(paths: Sequence[Path]) -> list[str]:
    """Short distinct names: the directory name, with its parent when two share a name."""
    short = [p.resolve().name for p in paths]
    out = []
    for p, s in zip(paths, short):
        out.append(f"{p.resolve().parent.name}/{s}" if short.count(s) > 1 else s)
    if len(set(out)) < len(out):
        raise UserError("the same PATH is given twice: compare distinct runs, probes or studies")
    return out


def compare_page(paths: Sequence[str | Path], out: str | Path, progress: bool = False) -> Path:
    """Write OUT/index.html comparing ``paths`` (all runs, all probes or all studies)."""
    ps = [Path(p) for p in paths]
    kinds = [detect(p) for p in ps]  # each a UserError when it is none of the three
    if len(set(kinds)) > 1:
        listed = ", ".join(f"{p} ({k})" for p, k in zip(ps, kinds))
        raise UserError(f"cannot compare different kinds on one page: {listed}; give only runs, only probes "
                        "or only studies")
    labels = names(ps)
    build = {"run": _runs, "probe": _probes, "study": _studies}[kinds[0]]
    return build(ps, labels, Path(out), progress)


def run_labels(configs: Sequence[dict[str, Any]], dirs: Sequence[str]) -> list[str]:
    """Legend labels from the config fields that differ: 'placement=pre, optim.lr=1e-3'.

    The placement first, then the other differing fields in order, up to three, and more
    while two labels are still equal; runs whose configurations are identical add their
    directory name, so no two labels are ever the same."""
    diff = sorted(config_diff(configs), key=lambda k: k != "model.placement")

    def label(c: dict[str, Any], keys: Sequence[str]) -> str:
        return ", ".join(f"{'placement' if k == 'model.placement' else k}={_value(_get(c, k))}" for k in keys)

    n = min(3, len(diff))
    while n < len(diff) and len({label(c, diff[:n]) for c in configs}) < len(configs):
        n += 1
    out = [label(c, diff[:n]) for c in configs]
    if len(set(out)) < len(out):
        out = [f"{lab} ({d})" if lab else d for lab, d in zip(out, dirs)]
    return out


def _value(v: Any) -> str:
    return num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else (
        v if isinstance(v, str) else json.dumps(v))


def _runs(paths: list[Path], labels: list[str], out: Path, progress: bool) -> Path:
    runs = [load_run(p) for p in paths]
    diff = config_diff([r.config for r in runs])
    groups = {lab: [r] for lab, r in zip(run_labels([r.config for r in runs], labels), runs)}
    # what every run shares, said once: what each has of its own is its label (the fields that
    # differ) and the table of differences, so the question stays a line however many runs
    said = [describe(r.config).split(", ") for r in runs]
    common = [b for b in said[0] if all(b in w for w in said[1:])]
    q = "Which of these runs reaches the lowest validation loss?" + (f" All: {', '.join(common)}." if common else "")
    head = heading("compare", what="runs", names=list(groups), question=q)
    page = Page(head.title, out, progress=progress)
    best: dict[str, Any] = {g: (r.summary or {}).get("best_val_loss") for g, (r,) in groups.items()}
    ranked = sorted((g for g in best if _finite(best[g])), key=lambda g: best[g])
    if ranked:
        a = f"{ranked[0]} is lowest: best val loss {num(best[ranked[0]])}"
        if len(ranked) > 1:
            a += f", {num(best[ranked[1]] - best[ranked[0]], 3)} nats/token below {ranked[1]} at {num(best[ranked[1]])}"
        a += " (one run each, so no seed spread: a gap this size may be seed noise)." if len(ranked) > 1 else "."
    else:
        a = "No run has a validation loss yet."
    notes = [f"They differ in {', '.join(diff)}." if diff else "Their configurations are identical."]
    notes += [f"{g} diverged at step {num((r.summary or {}).get('diverged_at_step'))}."
              for g, (r,) in groups.items() if (r.summary or {}).get("status") == "diverged"]
    page.lead(head.question, a, notes)
    page.heading("Evidence", "figures")
    curve_figures(page, groups, fates(groups))
    page.heading("Tables", "tables")
    keys = ["status", "steps", "tokens", "best_val_loss", "final_val_loss", "diverged_at_step", "tokens_per_s"]
    page.table(["run", "directory", *(k.replace("_", " ") for k in keys), "wall time"],
               [[g, d, *((r.summary or {}).get(k) for k in keys), duration((r.summary or {}).get("wall_time_s"))]
                for (g, (r,)), d in zip(groups.items(), labels)])
    if diff:
        page.raw("<h3>Configuration differences</h3>")
        page.table(["field", *labels], [[k, *(json.dumps(_get(r.config, k)) for r in runs)] for k in diff])
    _configs(page, [(g, r) for g, (r,) in groups.items()])
    page.versions()
    return page.write()


def config_diff(configs: Sequence[dict[str, Any]]) -> list[str]:
    """Dotted keys whose values differ between the configs (the name field aside)."""
    keys = sorted({k for c in configs for k in _flat(c)})
    return [k for k in keys if k != "name" and len({json.dumps(_get(c, k), sort_keys=True) for c in configs}) > 1]


def _flat(d: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        out.extend(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"])
    return out


def _get(d: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _configs(page: Page, named: list[tuple[str, RunData]]) -> None:
    page.heading("Configuration", "config")
    for g, r in named:
        page.details(f"RunConfig of {g} ({r.path})", json.dumps(r.config, indent=2, sort_keys=True))


def _probes(paths: list[Path], labels: list[str], out: Path, progress: bool) -> Path:
    probes = [load_probe(p) for p in paths]
    slopes = {lab: probe_page.w2_slopes(p) for lab, p in zip(labels, probes)}
    trained = {lab: inspected(p.path) for lab, p in zip(labels, probes)}  # `normlab inspect` outputs

    def fits(lab: str) -> str:
        return ", ".join(f"{pl} {signed(s)} ± {num(se, 2)}" for pl, (s, se, _) in slopes[lab].items()) or "no W2 rows"

    if any(trained.values()):  # a trained checkpoint among them: its blocks, not depth scaling at init
        q = "How do the blocks of these models compare? " + "; ".join(
            f"{lab}: {checkpoint.describe(p) if trained[lab] else probe_page.describe_probe(p) + ', at initialisation'}"
            for lab, p in zip(labels, probes))
        a = " ".join(f"{lab}: {checkpoint.answer(p)[0] if trained[lab] else 'W2 depth slopes ' + fits(lab) + '.'}"
                     for lab, p in zip(labels, probes))
        what = "models"
    else:
        q = "How do the depth scalings at initialisation of these probes compare? " + "; ".join(
            f"{lab}: {probe_page.describe_probe(p)}" for lab, p in zip(labels, probes))
        a = "Last block's W2 gradient norm against depth, fitted slope of log norm on log L: " + "; ".join(
            f"{lab}: {fits(lab)}" for lab in labels) + "."
        what = "probes"
    head = heading("compare", what=what, names=labels, question=q)
    page = Page(head.title, out, progress=progress)
    page.lead(head.question, a)
    merged = [dict(r, placement=f"{lab}: {r['placement']}") for lab, p in zip(labels, probes) for r in p.rows]
    depth = max(r["n_layer"] for r in merged) if merged else 0
    page.heading("Evidence", "figures")
    for kind, metric, sub, params, ylabel, title, name in probe_page.figure_specs():
        rows = probe_page.select(merged, metric, sub, params)
        if rows:
            probe_page.key_figure(page, kind, rows, depth, ylabel, title, name)
    page.heading("Tables", "tables")
    page.table(["probe", "placement", "W2 slope vs log L", "points"],
               [[lab, pl, f"{signed(s)} ± {num(se, 2)}", n] for lab, sl in slopes.items() for pl, (s, se, n) in sl.items()])
    page.heading("Configuration", "config")
    for lab, p in zip(labels, probes):
        page.details(f"Probe configuration of {lab} ({p.path})", json.dumps(p.config, indent=2, sort_keys=True))
    page.versions()
    return page.write()


def _studies(paths: list[Path], labels: list[str], out: Path, progress: bool) -> Path:
    studies = [load_study(p) for p in paths]
    page = Page(heading("compare", what="studies", names=labels, question="").title, out, progress=progress)
    groups: dict[str, list[RunData]] = {}
    values: dict[str, list[tuple[float, str]]] = {}
    answers = []
    metrics = {s.spec.get("metric", "best_val_loss") for s in studies}
    metric = metrics.pop() if len(metrics) == 1 else "best_val_loss"
    for lab, st in zip(labels, studies):
        trials = [replace(t, params={"study": lab, **t.params}) for t in st.trials]
        per: dict[str, list[Any]] = {}
        for t in trials:
            per.setdefault(f"{lab}: {study_page.group_label({k: v for k, v in t.params.items() if k != 'study'})}",
                           []).append(t)
        runs = {g: [load_run(t.run_dir) for t in ts if RunDir(t.run_dir).is_report_run()] for g, ts in per.items()}
        runs = {g: rs for g, rs in runs.items() if rs}
        fate, _ = study_page.trial_fates(replace(st, trials=trials))
        vals = {g: [(study_page.trial_value(t, metric), fate[t.id]) for t in ts
                    if t.status in ("completed", "diverged", "failed")] for g, ts in per.items()}
        vals = {g: v for g, v in vals.items() if v}
        ans, _ = study_answer.headline({g.split(": ", 1)[1]: v for g, v in vals.items()}, metric, len(st.trials))
        answers.append(f"{lab}: {ans}")
        groups.update(runs)
        values.update(vals)
    q = f"How do these studies compare on {metric.replace('_', ' ')}? " + "; ".join(
        f"{lab}: {st.spec.get('description') or st.spec.get('name', lab)}" for lab, st in zip(labels, studies))
    overall, _ = study_answer.headline(values, metric, sum(len(s.trials) for s in studies))
    page.lead(q, f"Over all of them: {overall}", answers)
    page.heading("Evidence", "figures")
    curve_figures(page, groups, fates(groups))
    if values:
        page.figure(F.seed_dots(values, f"{metric.replace('_', ' ')} (nats/token)",
                                           f"{metric.replace('_', ' ')} per seed"), "metric_per_seed",
                    "Every seed of every study (dots) and the mean of the seeds that trained (bar); best on top.")
    page.heading("Tables", "tables")
    for lab, st in zip(labels, studies):
        study_page.results_table(page, st, metric, title=f"Results of {lab}")
    page.heading("Configuration", "config")
    for lab, st in zip(labels, studies):
        page.details(f"Study spec of {lab} ({st.path})", json.dumps(st.spec, indent=2, sort_keys=True, default=str))
    page.versions()
    return page.write()


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
