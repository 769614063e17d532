"""The critical-lr section of a stability-map page (``report.stability_page``): the frontier
figure at the study's base horizon and at its longest, the critical lrs and the warm-up and
depth contrasts as tables, and every cell's outcome at each horizon with the steps at which
its seeds left the plateau. What it draws is summarised by ``normlab.study.frontier`` and
``normlab.study.horizons``; nothing here fits or judges."""

from __future__ import annotations

from typing import Any, Sequence

from normlab.data.unigram import DataCE
from normlab.report.frontier_fig import frontier_figure, width_figure
from normlab.report.html import Page
from normlab.report.kinds import MIN_LRS  # fewer lrs per line: no frontier section
from normlab.report.numbers import num
from normlab.study.frontier import PARAM, WIDTH, contrasts, frontiers
from normlab.study.horizons import horizon_cells, horizons
from normlab.study.store import TrialRecord


def _shown(hs: list[int]) -> list[int]:
    """The base horizon (the study's train.steps: the most common) and the longest."""
    return sorted({hs[0], hs[-1]}) if hs else []


def add_frontier(page: Page, trials: Sequence[TrialRecord], ce: DataCE, lrs: Sequence[float]) -> bool:
    """Add the section when the study has at least ``MIN_LRS`` lrs; returns whether it did."""
    lrs = [v for v in lrs if v is not None]
    finished = [t for t in trials if t.status in ("completed", "diverged")]
    hs = horizons(finished)
    if len(lrs) < MIN_LRS or not hs:
        return False
    page.heading("Critical learning rates", "frontier")
    page.text("Per placement, depth and warm-up, the learning rate at which half the seeds train by the horizon "
              "(diverged and stalled seeds do not): a logistic in log lr fitted to every seed at every lr "
              "(scipy), with its 95% profile-likelihood interval. Where the seeds separate perfectly (all train "
              "up to one lr, none above) the interval is the gap widened by exact one-sided tests. A triangle "
              "with an arrow is censored: every lr trains (the critical lr lies above the largest tried) or none "
              "does (below the smallest). The grey bands lie outside the lrs tried. Method: docs/theory.md, "
              "'Critical learning rates'.")
    rows, crows = [], []
    widths = any(t.params.get(WIDTH) is not None or t.params.get(PARAM) is not None for t in finished)
    for h in _shown(hs):
        lines = frontiers(finished, ce, h)
        if not lines:
            continue
        shapes = list(dict.fromkeys((x.width, x.param) for x in lines))
        for width, param in shapes:  # one depth figure per width x parametrisation the study has
            mine = [x for x in lines if (x.width, x.param) == (width, param)]
            if len(shapes) > 1 and len({x.depth for x in mine}) < 2:
                continue
            at = mine[0].where()
            page.figure(frontier_figure(mine, lrs, h, f"Critical lr against depth{at}"),
                        f"frontier_{h}" + (f"_d{width}_{param}" if len(shapes) > 1 else ""),
                        f"Critical learning rate by step {h}{at}, per placement, against depth, one line per warm-up; "
                        "bars: 95% intervals; arrows: censored points and unbounded interval sides.", wide=True)
        if len({x.width for x in lines if x.width is not None}) > 1:
            page.figure(width_figure(lines, lrs, h, "Critical lr against width"), f"frontier_width_{h}",
                        f"Critical learning rate by step {h}, per placement, against width (d_model), one line per "
                        "parametrisation, depth and warm-up: under muP it should stay put, under standard "
                        "parametrisation fall; bars: 95% intervals; arrows: censored points.", wide=True)
        for x in lines:
            f = x.frontier
            rows.append([h, x.placement, x.depth, x.warmup, *([x.width, x.param] if widths else []), f.text(),
                         f.method, f.left_out, " ".join(f"{k}/{n}" for k, n in zip(f.trains, f.seeds))])
        crows += [[c.horizon, c.placement, c.factor, c.arm, c.control, c.effect.text()] for c in contrasts(lines)]
    page.raw("<h3>Critical learning rates</h3>")
    page.text("Lrs below the lowest lr where the most seeds train are left out of the fit (at a short horizon a "
              "small lr can stall because it is slow): the frontier is the transition above it.")
    page.table(["by step", "placement", "depth", "warm-up", *(["width", "param"] if widths else []),
                "critical lr [95% interval]", "method",
                "lrs left out (slow)", "seeds that train per lr (low to high)"], rows)
    if crows:
        page.raw("<h3>Warm-up, depth and width, against their controls</h3>")
        page.text("log10(critical lr of the arm / critical lr of its control): positive = the arm trains at higher "
                  "lrs. Intervals combine the two critical lrs' own (MOVER); a censored critical lr leaves a bound.")
        page.table(["by step", "placement", "factor", "arm", "control", "difference of log10 critical lr"], crows)
    _horizon_table(page, finished, ce, hs)
    return True


def _horizon_table(page: Page, trials: Sequence[TrialRecord], ce: DataCE, hs: list[int]) -> None:
    """Every cell's outcome at each horizon (trains / stalls / diverged, and seeds with no outcome
    there: stopped on the plateau before it) and the steps at which its seeds left the plateau."""
    cells = horizon_cells(trials, ce, hs)
    rows: list[list[Any]] = []
    for k, c in sorted(cells.items(), key=lambda kc: (kc[0].placement, kc[0].depth or 0, kc[0].warmup or 0,
                                                      kc[0].lr or 0)):
        per = [f"{n['trains']}/{n['stalls']}/{n['diverged']}" + (f" (+{n['unknown']} not run)" if n["unknown"] else "")
               for n in (c.at[h] for h in hs)]
        left = ", ".join("–" if s is None else num(s) for s in sorted(c.left_at, key=lambda s: (s is None, s or 0)))
        rows.append([k.placement, k.lr, k.depth, k.warmup, *per, left])
    page.raw("<h3>Outcomes at each horizon</h3>")
    page.text("Seeds that train / stall / diverge by each step (the rule of the maps above at that step, from "
              "each run's validation losses); 'not run': stopped on the plateau before that step. The last "
              "column is the step at which each seed left the plateau (–: never, up to its last step).")
    page.table(["placement", "lr", "depth", "warm-up", *(f"by step {h}" for h in hs), "left the plateau at"], rows)


__all__ = ["MIN_LRS", "add_frontier"]
