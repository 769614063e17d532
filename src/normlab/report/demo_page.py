"""The page of ``normlab demo`` (study ``pre-vs-post-demo``, ``kinds.DEMO_STUDIES``): the answer
first (``demo_answer``: a verdict that holds whichever seeds stall, the plateau counts, the
lab's earlier results it sits beside), then the training loss at every step for both
placements (smoothed, the raw per-step loss faint underneath), the validation loss by step,
the best validation loss per seed, the tables and the exact configuration."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from normlab.data.unigram import DataCE
from normlab.report import figures as F
from normlab.report.demo_answer import Demo, answer, collect, plateau
from normlab.report.kinds import open_study_page
from normlab.report.load import RunData, StudyData, load_run
from normlab.report.numbers import duration, num, pm
from normlab.report.style import color, figure, integer_ticks, legend
from normlab.run.dir import RunDir
from normlab.study.outcome import STALL_MARGIN, study_data_ce

Curve = tuple[Sequence[float], Sequence[float]]  # (steps, values) of one seed
NAMES = {"post": "Post-LN", "pre": "Pre-LN"}

# The lab's published results this page cites (each checked against its file by
# tests/report/test_demo_page.py, so a republished run cannot leave them stale).
MAP_CELL: dict[str, Any] = {"lr": 3e-3, "n_layer": 6, "d_model": 64, "warmup": 50, "seeds": 4,
            "trains": {("post", 0): 0, ("post", 50): 4, ("pre", 0): 4, ("pre", 50): 4}}
SEED_SCALE: dict[str, Any] = {"converged": (6, 6), "faster": (-0.116, -0.127, -0.106), "faster_step": 245,
              "best": (1.64, 1.79), "lower": (-0.151, -0.16, -0.142)}  # registered run, seeds 400-405
KNIFE: dict[str, tuple[int, int]] = {"page": (5, 6), "claims": (4, 6)}  # pre-vs-post, Post-LN without warm-up: seeds on the plateau


def smooth(y: Sequence[float], window: int) -> np.ndarray:
    """Centred moving average over ``window`` steps (fewer at the ends, so no lag and no padding)."""
    v = np.asarray(y, dtype=float)
    n, h = v.size, max(0, window // 2)
    c = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(n)
    lo, hi = np.clip(i - h, 0, n), np.clip(i + h + 1, 0, n)
    return (c[hi] - c[lo]) / (hi - lo)


def loss_figure(curves: dict[tuple[str, int], list[Curve]], warmups: Sequence[int], title: str, ylabel: str,
                plateau_at: float, window: int | None = None, top: float | None = None) -> Any:
    """One panel per warm-up, Post-LN and Pre-LN in their colours, one line per seed. ``window``:
    draw each seed's raw values faint (gid ``raw:PLACEMENT:WARMUP:I``, I the seed's index) and their
    moving average over it on top (``smooth:...``); None: the values as they are, with markers
    (``val:...``). The gids name the lines in the SVG, where a test finds them."""
    fig, axes = figure(ncols=len(warmups), width=5.0, height=3.8)
    axes = np.atleast_1d(axes)
    for ax, wu in zip(axes, warmups):
        for pl in ("post", "pre"):
            c = color(pl)
            for i, (x, y) in enumerate(curves.get((pl, wu), [])):
                label = NAMES[pl] if i == 0 else "_seed"
                if window is None:
                    ax.plot(x, y, color=c, lw=1.1, marker="o", ms=2.5, alpha=0.85, label=label, gid=f"val:{pl}:{wu}:{i}")
                    continue
                ax.plot(x, y, color=c, lw=0.5, alpha=0.22, zorder=1, label="_raw", gid=f"raw:{pl}:{wu}:{i}")
                ax.plot(x, smooth(y, window), color=c, lw=1.3, alpha=0.95, zorder=3, label=label,
                        gid=f"smooth:{pl}:{wu}:{i}")
        ax.axhline(plateau_at, color="#555555", ls="--", lw=1.0, zorder=2, label="unigram plateau")
        if wu:
            ax.axvline(wu, color="#999999", ls=":", lw=1.0, zorder=2, label="end of warm-up")
        ax.set(title=f"{title}, {'no warm-up' if not wu else f'warm-up {wu} steps'}", xlabel="step", ylabel=ylabel)
        integer_ticks(ax.xaxis)
    lows = [ax.get_ylim()[0] for ax in axes]
    highs = [ax.get_ylim()[1] for ax in axes]
    for ax in axes:  # one y range for every panel, so the panels compare at a glance
        ax.set_ylim(min(lows), min(max(highs), top) if top else max(highs))
        legend(ax)
    return fig


def _curves(runs: dict[tuple[str, int], list[RunData]], key: str) -> dict[tuple[str, int], list[Curve]]:
    return {k: [c for r in rs if len((c := r.series(key))[0])] for k, rs in runs.items()}


def context_notes(spec: dict[str, Any], demo: Demo) -> list[str]:
    """Where this setting sits among the lab's published results, and seed 002's own settings."""
    base = spec.get("base", {})
    mine = (base.get("optim", {}).get("lr"), base.get("model", {}).get("n_layer"), base.get("model", {}).get("d_model"),
            demo.warmup)
    cell = MAP_CELL
    t = cell["trains"]
    counts = (f"Post-LN trained in {t[('post', 0)]} of {cell['seeds']} seeds without warm-up and {t[('post', 50)]} of "
              f"{cell['seeds']} with warm-up 50, Pre-LN in {t[('pre', 0)]} and {t[('pre', 50)]} of {cell['seeds']}")
    where = (f"the lab's stability map (confirmatory run, docs/evidence/maps/stability-map/: d=64, 200 steps, constant lr, "
             f"xavier init, no clipping) at {cell['n_layer']} blocks and lr {num(cell['lr'])}, where {counts}")
    if mine == (cell["lr"], cell["n_layer"], cell["d_model"], cell["warmup"]):
        first = (f"Why this setting: it is a cell of {where}. There, lr 3e-3 is where warm-up decides Post-LN's "
                 "outcome in every seed; at lr 1e-3 the map's Post-LN trains with or without warm-up, and the "
                 "36-run study at lr 1e-3 (next note) is a knife edge.")
    else:
        first = (f"This store ran a smaller setting (lr {num(mine[0])}, {mine[1]} blocks, d={mine[2]}); the demo's cpu "
                 f"scale runs a cell of {where}.")
    k, n = KNIFE["page"]
    kc, nc = KNIFE["claims"]
    knife = (f"The 36-run study at lr 1e-3 cosine (`normlab study run pre-vs-post`; published page "
             f"docs/evidence/pre-vs-post/) sits on the knife edge: Post-LN without warm-up stayed on the plateau in {k} "
             f"of {n} seeds on its published page and in {kc} of {nc} in the exploratory claims run's copy of the same study "
             f"(docs/evidence/exploratory/).")
    s = SEED_SCALE
    f, lo = s["faster"], s["lower"]
    seed = (f"At seed 002's own settings (lr 3e-4 constant, batch 32, 4900 steps, 6 blocks, d=128) Post-LN trains "
            f"without warm-up: the lab's registered seed-scale run (docs/evidence/confirm-seed/) found it converging in "
            f"{s['converged'][0]} of {s['converged'][1]} seeds, Pre-LN faster ({num(f[0])} [{num(f[1])}, {num(f[2])}] "
            f"nats/token at step {s['faster_step']}) and lower (best validation loss {num(s['best'][0])} against "
            f"{num(s['best'][1])}, {num(lo[0])} [{num(lo[1])}, {num(lo[2])}]). Rerun it with `normlab study run "
            "pre-vs-post --scale seed`.")
    return [first, knife, seed]


def _mean_sd(v: list[float]) -> str:
    return pm(float(np.mean(v)) if v else None, float(np.std(v, ddof=1)) if len(v) > 1 else None)


def _arm_rows(demo: Demo, ce: DataCE) -> list[list[Any]]:
    """One row per arm: seeds, plateau counts at H and at the end, diverged, early and best loss."""
    at_h, at_end = plateau(demo, ce, demo.horizon), plateau(demo, ce, demo.steps)
    rows = []
    for key in sorted(demo.arms):
        seeds = [s for s in demo.seeds(*key) if not s.diverged]
        best = [b for s in seeds if math.isfinite(b := s.best_until())]
        rows.append([NAMES.get(key[0], key[0]), key[1], len(demo.seeds(*key)), at_h[key][0], at_end[key][0],
                     len(demo.seeds(*key)) - len(seeds), _mean_sd([s.at(demo.early) for s in seeds]), _mean_sd(best)])
    return rows


def build(study: StudyData, progress: bool = False, out: Path | None = None) -> Path:
    page, head, finished = open_study_page(study, "demo", progress, out, "No trial has finished yet.")
    if not finished:
        return page.write()
    spec = study.spec
    ce = study_data_ce(finished)
    demo = collect(study)
    ans, notes = answer(demo, ce)
    page.lead(head.question, ans, [*notes, *context_notes(spec, demo)])

    runs: dict[tuple[str, int], list[RunData]] = {}
    for t in finished:
        if RunDir(t.run_dir).is_report_run():
            key = (str(t.params.get("model.placement")), int(t.params.get("optim.warmup_steps") or 0))
            runs.setdefault(key, []).append(load_run(t.run_dir))
    warmups = sorted({w for _, w in runs})
    line = ce.unigram - STALL_MARGIN
    window = max(1, demo.steps // 15)
    page.heading("Curves", "figures")
    page.figure(loss_figure(_curves(runs, "train/loss"), warmups, "training loss", "train loss (nats/token)",
                            ce.unigram, window, top=ce.uniform + 0.5), "train_loss",
                f"Training loss at every step, one line per seed: faint, the loss of each step's batch; solid, its "
                f"moving average over {window} steps. Dashed: the unigram cross-entropy {num(ce.unigram, 4)} "
                "(the plateau of a model that learned symbol frequencies only); dotted: the end of warm-up.", wide=True)
    page.figure(loss_figure(_curves(runs, "val/loss"), warmups, "validation loss", "val loss (nats/token)",
                            ce.unigram), "val_loss",
                f"Validation loss at every evaluation, one line per seed. A seed whose best value stays above "
                f"{num(line, 4)} (the dashed line minus {num(STALL_MARGIN)}) is on the plateau.", wide=True)
    values = {f"{pl} warm-up {wu}": [(s.ending(ce.uniform), "diverged" if s.diverged else "stalled"
                                                     if s.best_until() >= line else "ok") for s in demo.seeds(pl, wu)]
              for pl, wu in sorted(demo.arms)}
    page.figure(F.seed_dots(values, "best validation loss (nats/token)", "best validation loss per seed"),
                "best_per_seed", "Best validation loss of every seed (dots) and the mean of the seeds that trained "
                "(bar). Hollow dots: seeds on the plateau; diverged seeds count at ln V in the answer.")

    page.heading("Tables", "tables")
    page.table(["placement", "warm-up", "seeds", f"on the plateau at step {demo.horizon}",
                f"on the plateau at step {demo.steps}", "diverged", f"val loss at step {demo.early}",
                "best val loss (mean ± sample std)"], _arm_rows(demo, ce))
    page.raw("<h3>Every trial</h3>")
    page.table(["trial", "placement", "warm-up", "seed", "status", "best val loss", "final val loss", "steps",
                "wall time"],
               [[t.id[:10], t.params.get("model.placement"), t.params.get("optim.warmup_steps"), t.params.get("seed"),
                 t.status, (t.summary or {}).get("best_val_loss"), (t.summary or {}).get("final_val_loss"),
                 (t.summary or {}).get("steps"), duration((t.summary or {}).get("wall_time_s"))] for t in study.trials])
    page.heading("Configuration", "config")
    page.details("Resolved study spec (spec.json)", json.dumps(spec, indent=2, sort_keys=True, default=str))
    page.versions()
    return page.write()


__all__ = ["KNIFE", "MAP_CELL", "SEED_SCALE", "build", "context_notes", "loss_figure", "smooth"]
