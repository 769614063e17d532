"""The page of a stability-map study: which placements train where in learning rate x depth x
warm-up, answered first; then one phase diagram per placement (and per width, parametrisation or
any other axis the study varies: ``study.outcome.map_variants``; ``report.phase``), side by
side on shared axes; with three lrs or more, the critical learning rates against depth and the
outcomes at each horizon (``report.frontier_page``); then the table of cells, every trial with its outcome, and the exact
configuration. Outcomes and the reference losses are ``normlab.study.outcome``'s, from the
data the trials trained on."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from normlab.data.unigram import SMOOTHING, DataCE
from normlab.report.frontier_page import add_frontier
from normlab.report.kinds import open_study_page
from normlab.report.load import StudyData
from normlab.report.numbers import duration, num
from normlab.report.phase import ordered, phase_diagram
from normlab.study.outcome import (
    OUTCOMES,
    Cell,
    CellKey,
    cell_key,
    classify,
    horizon_text,
    judge,
    map_cells,
    map_variants,
    rule_text,
    study_data_ce,
)

VERB = {"trains": "train", "stalls": "stall", "diverged": "diverge"}


def _where(k: CellKey) -> str:
    return f"L={num(k.depth)}, lr {num(k.lr)}, warm-up {num(k.warmup)}"


def _counts(c: Cell) -> str:
    """'3 of 5 stall, 2 diverge': the outcomes other than training first, then how many trained."""
    parts = [f"{c.counts[o]} of {c.n} {VERB[o]}" for o in ("stalls", "diverged") if c.counts[o]]
    if c.counts["trains"]:
        parts.append(f"{c.counts['trains']} train")
    return ", ".join(parts)


def answer(cells: dict[CellKey, Cell], ce: DataCE, n_trials: int,
           horizon: str = "at the last step of each trial") -> tuple[str, list[str]]:
    """(answer, notes): per placement, in how many cells every seed trains and in how many some
    seed stalls or diverges; the notes list those cells with their counts, and the rule."""
    by_pl: dict[str, dict[CellKey, Cell]] = defaultdict(dict)
    for k, c in cells.items():
        if c.n:
            by_pl[k.placement][k] = c
    notes = [f"Outcomes (normlab.study.outcome, as study status, the study page and the claims judge), "
             f"{horizon}: {rule_text(ce, fmt=lambda v: num(v, 4))}. The unigram cross-entropy is that of the "
             f"validation split under the training split's symbol frequencies (add-{num(SMOOTHING)} smoothing), "
             "computed from the data."]
    done = sum(c.n for c in cells.values())
    if done < n_trials:
        notes.append(f"{done} of {n_trials} trials have an outcome; the rest (pending, running or failed) are "
                     "not in these counts.")
    if not by_pl:
        return "No trial has an outcome yet.", notes
    everywhere = [p for p, cs in by_pl.items() if all(c.counts["trains"] == c.n for c in cs.values())]
    parts = []
    if everywhere:
        n_cells = {len(by_pl[p]) for p in everywhere}
        size = f"{n_cells.pop()} " if len(n_cells) == 1 else ""
        parts.append(f"every seed trains in all {size}cells for {', '.join(everywhere)}")
    for p, cs in by_pl.items():
        if p in everywhere:
            continue
        full = sum(c.counts["trains"] == c.n for c in cs.values())
        text = f"{p}: every seed trains in {full} of {len(cs)} cells"
        for o in ("stalls", "diverged"):
            hit = sum(c.counts[o] > 0 for c in cs.values())
            if hit:
                text += f", seeds {VERB[o]} in {hit}"
        parts.append(text)
        bad = [f"{_where(k)}: {_counts(c)}" for k, c in sorted(cs.items(), key=lambda kc: _order(kc[0]))
               if c.counts["trains"] < c.n]
        notes.append(f"{p} fails at " + "; ".join(bad) + ".")
    return "; ".join(parts) + ".", notes


def _order(k: CellKey) -> tuple[Any, ...]:
    return tuple((v is None, v if v is not None else 0) for v in (k.depth, k.lr, k.warmup))


def build(study: StudyData, progress: bool = False, out: Path | None = None) -> Path:
    page, head, finished = open_study_page(study, "stability", progress, out, "No trial has an outcome yet.")
    if not finished:
        return page.write()
    spec = study.spec
    ce = study_data_ce(finished)
    # one map per placement and variant (width, parametrisation, ... when the study varies them):
    # the variant joins the placement's label, so that no cell pools two models
    groups = map_variants(study.trials)
    label = {t.id: f"{cell_key(t).placement} ({v})" if v else cell_key(t).placement
             for v, ts in groups.items() for t in ts}
    cells = {k._replace(placement=f"{k.placement} ({v})" if v else k.placement): c
             for v, ts in groups.items() for k, c in map_cells(ts, ce).items()}
    horizon = horizon_text(o for t in finished if (o := judge(t, ce)) is not None)
    ans, notes = answer(cells, ce, len(study.trials), horizon)
    page.lead(head.question, ans, notes)

    page.heading("Maps", "figures")
    lrs, depths, warmups = (ordered([getattr(k, a) for k in cells]) for a in ("lr", "depth", "warmup"))
    placements = list(dict.fromkeys(k.placement for k in cells))
    for pl in placements:
        sub = {(k.lr, k.depth, k.warmup): c for k, c in cells.items() if k.placement == pl}
        page.figure(phase_diagram(sub, f"{pl}: outcome over learning rate x depth", lrs, depths, warmups),
                    "map_" + re.sub(r"[^A-Za-z0-9_.-]+", "_", pl).strip("_"), f"{pl}: each cell is split into bands by the share of its seeds that train, stall "
                    f"near the unigram loss {num(ce.unigram, 4)} or diverge; the number is the mean best validation "
                    "loss of the seeds that did not diverge (× when all did), k/n the seeds that trained.")

    add_frontier(page, study.trials, ce, lrs)

    page.heading("Tables", "tables")
    page.raw("<h3>Cells</h3>")
    rows = []
    for k in sorted(cells, key=lambda k: (placements.index(k.placement), *_order(k))):
        c = cells[k]
        rows.append([k.placement, k.lr, k.depth, k.warmup, c.n, *(c.counts[o] for o in OUTCOMES),
                     c.mean_best(), c.missing])
    page.table(["placement", "lr", "depth", "warm-up", "seeds", "train", "stall", "diverge",
                "mean best val loss (not diverged)", "no outcome yet"], rows)
    page.raw("<h3>Every trial</h3>")
    trows = []
    for t in study.trials:
        s = t.summary or {}
        k = cell_key(t)
        trows.append([t.id[:10], label[t.id], k.lr, k.depth, k.warmup, t.params.get("seed"), t.status,
                      classify(t, ce) or "–", s.get("best_val_loss"), s.get("final_val_loss"), s.get("steps"),
                      duration(s.get("wall_time_s"))])
    page.table(["trial", "placement", "lr", "depth", "warm-up", "seed", "status", "outcome", "best val loss",
                "final val loss", "steps", "wall time"], trows)
    failed = [t for t in study.trials if t.error]
    if failed:
        page.text("Errors: " + "; ".join(f"{t.id[:10]}: {t.error}" for t in failed[:10]), "muted")
    page.heading("Configuration", "config")
    page.details("Resolved study spec (spec.json)", json.dumps(spec, indent=2, sort_keys=True, default=str))
    page.versions()
    return page.write()


__all__ = ["answer", "build"]
