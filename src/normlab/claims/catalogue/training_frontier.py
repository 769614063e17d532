"""Training claims about critical learning rates: where half the seeds of a placement x depth x
warm-up train (``normlab.study.frontier``), compared as differences of log10 critical lr against
a control (no warm-up, the shallow depth, the other placement), each with its 95% interval.

A cell's count of stalls sits on a knife edge; where the boundary lies is a stable quantity
(docs/studies.md, "Critical learning rates"). Each line is read off ``frontier-bracket``: five lrs
a factor 1.25 apart placed around the boundary the exploration on seen seeds found
(``study/bracket_preset.py``), on the stability map's base. The study is read in registered stages (200, 400, 1000 steps): a
part settles when its critical lrs move less than 0.1 decade over a stage, so a slow start is not
read as a failure. A frontier with every lr training (or none) is censored: its 95% limit on the
known side is all a difference can use, and the rule decides from that side alone
(``claims/rules.py``); such a difference is a bound, with no p-value.
"""

from __future__ import annotations

from typing import Any

from normlab.claims.catalogue.frontier_design import designs
from normlab.claims.catalogue.map_cells import L, P, W
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction
from normlab.claims.studies import StudyContext, where
from normlab.stats.effects import Effect
from normlab.stats.frontier import log_ratio, ratio_effect
from normlab.study.frontier import Line, frontiers

BRACKET, POST6 = "frontier-bracket", "frontier-bracket-post6"
STUDIES = [BRACKET, POST6]
EXP = ("studies 'frontier-bracket' (pre x depth {6, 18} x warm-up {0, 50}, and post at 12 blocks with warm-up) and "
       "'frontier-bracket-post6' (post at 6 blocks, warm-up {0, 50}), each line at five lrs a factor 1.25 apart "
       "around its boundary, 6 seeds, d=64, 200 steps, constant lr after warm-up, xavier init, no clipping; read at "
       "200, 400 and 1000 steps until the critical lrs settle")
SET = "xavier init; no gradient clipping; outcomes where the critical lrs settle (registered stages, resumed runs)"
CRIT = "log10 of the critical lr (where half the seeds train by the horizon; logistic in log lr) "
WHY = ("a direction: the 95% interval of the difference (MOVER, from the two frontiers' own intervals) decides it; the "
       "lr grid's spacing (a factor 1.25) limits how small a shift can be seen, and the interval carries that")
NO_POST18 = ("Post-LN at 18 blocks has no critical lr here: in the first frontier stage (read after the fact, "
             "exploratory) it trained half its seeds at no lr from 2e-5 to 1.5e-4 by step 1000, and the map at none "
             "from 5e-4 to 3e-3, so no difference with it exists")


def horizon(ctx: StudyContext) -> int:
    """Where the bracket is read: its ``extend_stalled_to``, else its runs' length (at a stage:
    the stage's horizon, which the staged context sets as train.steps)."""
    spec = ctx.spec(BRACKET)
    return int(spec.extend_stalled_to or spec.base["train"]["steps"])


def _axis(ctx: StudyContext, key: str) -> list[int]:
    return sorted({int(t.params[key]) for n in STUDIES for t in ctx.spec(n).trials()})


def shallow(ctx: StudyContext) -> int:
    return _axis(ctx, L)[0]


def deep(ctx: StudyContext, placement: str) -> int:
    """The deepest line of ``placement`` (cpu: Pre-LN 18 blocks, Post-LN 12)."""
    return max(int(t.params[L]) for n in STUDIES for t in ctx.spec(n).trials() if t.params[P] == placement)


def warm(ctx: StudyContext) -> int:
    return _axis(ctx, W)[-1]


def _lines(ctx: StudyContext) -> dict[tuple[str, int | None, int | None], Line]:
    trials = [t for n in STUDIES for t in ctx.trials(n)]
    return {(x.placement, x.depth, x.warmup): x for x in frontiers(trials, ctx.reference(BRACKET), horizon(ctx))}


def _ids(ctx: StudyContext, key: tuple[str, int, int]) -> list[str]:
    return [t.id for n in STUDIES for t in where(ctx.trials(n), {P: key[0], L: key[1], W: key[2]})]


def ratio(ctx: StudyContext, a: tuple[str, int, int], b: tuple[str, int, int]) -> Measured:
    """log10(critical lr of line a) - log10(critical lr of line b) at the long horizon."""
    lines = _lines(ctx)
    la, lb = lines.get(a), lines.get(b)
    ids = _ids(ctx, a) + _ids(ctx, b)
    if la is None or lb is None:
        return Measured(Effect(None, None, None, 0, 0, method="a line has fewer than two lrs with an outcome"), ids,
                        {"horizon": horizon(ctx)})
    r = log_ratio(la.frontier, lb.frontier)
    e = ratio_effect(r, min(la.frontier.seeds or (0,)), min(lb.frontier.seeds or (0,)))
    return Measured(e, ids, {"a": la.record(), "b": lb.record(), "log10_ratio": r.as_dict(), "horizon": horizon(ctx)},
                    note="" if r.censored is None else f"censored ({r.censored}): {r.text()}; a bound with no p-value, "
                                                       "decided by its 95% limit, outside the Holm family")


def _regime(*extra: Any) -> Regime:
    return Regime((
        factor("lr", "swept", matters=False, why="the lr is the axis the critical lr is read from"),
        factor("init", "Xavier", why="xavier init, as the theories assume"),
        factor("steps", "early training (the failures are in the first hundreds of updates)", inside={"cpu": True},
               why="a run that fails in these papers fails early; the lab reads 200, 400 and 1000 steps, resuming "
                   "every run, until the critical lrs settle"),
        *extra))


@claim(id="frontier-warmup", quick=False, studies=STUDIES, experiment=EXP, settings=SET,
       design=designs({"post-L6": (("post", "shallow", "warm"), ("post", "shallow", 0))}),
       regime=_regime(factor("depth", "6 layers and deeper", why="6 blocks; " + NO_POST18)),
       source="Xiong et al. 2020, Sec. 3 (warm-up is what lets Post-LN train at a useful lr)",
       statement="Learning-rate warm-up raises the learning rate up to which Post-LN trains.",
       parts=[Part("post-L6", "at 6 blocks, Post-LN's critical lr is higher with warm-up than without",
                   CRIT + "post, 6 blocks: warm-up 50 minus warm-up 0", Direction(+1), WHY)])
def frontier_warmup(ctx: StudyContext) -> dict[str, Measured]:
    lo = shallow(ctx)
    return {"post-L6": ratio(ctx, ("post", lo, warm(ctx)), ("post", lo, 0))}


@claim(id="frontier-placement", quick=False, studies=STUDIES, experiment=EXP, settings=SET,
       design=designs({"L6-w0": (("pre", "shallow", 0), ("post", "shallow", 0)),
                       "L6-w50": (("pre", "shallow", "warm"), ("post", "shallow", "warm"))}),
       regime=_regime(factor("warm-up", "with and without", matters=False, why="the statement names no warm-up"),
                      factor("depth", "not stated", matters=False, why="the statement names no depth; 6 blocks. "
                             + NO_POST18 + " (Pre-LN trains there up to about 0.18)")),
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), practical advice",
       statement="Pre-norm allows a higher learning rate (3e-4 instead of 1e-4).",
       parts=[Part("L6-w0", "at 6 blocks without warm-up, Pre-LN's critical lr is above Post-LN's",
                   CRIT + "pre minus post, 6 blocks, warm-up 0", Direction(+1), WHY),
              Part("L6-w50", "at 6 blocks with warm-up, the same", CRIT + "pre minus post, 6 blocks, warm-up 50",
                   Direction(+1), WHY)])
def frontier_placement(ctx: StudyContext) -> dict[str, Measured]:
    w, lo = warm(ctx), shallow(ctx)
    return {"L6-w0": ratio(ctx, ("pre", lo, 0), ("post", lo, 0)),
            "L6-w50": ratio(ctx, ("pre", lo, w), ("post", lo, w))}


@claim(id="frontier-depth", quick=False, studies=STUDIES, experiment=EXP, settings=SET,
       design=designs({"post": (("post", "deep", "warm"), ("post", "shallow", "warm"))}),
       regime=_regime(factor("warm-up", "tuned warm-up", why="the map's warm-up cell (50 of 200 steps)"),
                      factor("depth", "6 layers against 18 or more", why="6 and 12 blocks. " + NO_POST18 + ": "
                             "untrainable at every lr, the statement's extreme, which the map's claims read")),
       source="Liu et al. 2020, 'Understanding the Difficulty of Training Transformers', Sec. 3; seed 002",
       statement="Post-LN becomes harder to train as it gets deeper.",
       parts=[Part("post", "with warm-up, Post-LN's critical lr is lower at 12 blocks than at 6",
                   CRIT + "post, warm-up 50: 12 blocks minus 6 blocks", Direction(-1), WHY)])
def frontier_depth(ctx: StudyContext) -> dict[str, Measured]:
    w = warm(ctx)
    return {"post": ratio(ctx, ("post", deep(ctx, "post"), w), ("post", shallow(ctx), w))}


@claim(id="frontier-warmup-tolerance", quick=False, studies=STUDIES, experiment=EXP, settings=SET,
       design=designs({"pre-L6": (("pre", "shallow", "warm"), ("pre", "shallow", 0)),
                       "pre-L18": (("pre", "deep", "warm"), ("pre", "deep", 0))}),
       regime=_regime(factor("optimizer", "SGD and Adam", matters=False, why="AdamW, the lab's optimiser"),
                      factor("depth", "not stated", matters=False, why="6 and 18 blocks")),
       source="Kalra & Barkeshli 2024, 'Why Warmup the Learning Rate?' (arXiv 2406.09405), abstract",
       statement="The overwhelming benefit of warm-up arises from allowing the network to tolerate larger "
                 "target learning rates.",
       parts=[Part("pre-L6", "at 6 blocks, Pre-LN's critical lr is higher with warm-up than without",
                   CRIT + "pre, 6 blocks: warm-up 50 minus warm-up 0", Direction(+1), WHY),
              Part("pre-L18", "at 18 blocks, the same", CRIT + "pre, 18 blocks: warm-up 50 minus warm-up 0",
                   Direction(+1), WHY)])
def frontier_warmup_tolerance(ctx: StudyContext) -> dict[str, Measured]:
    """Post-LN's side of the statement is ``frontier-warmup``; this reads the placement Xiong et
    al. say needs no warm-up, at both depths."""
    w, lo, hi = warm(ctx), shallow(ctx), deep(ctx, "pre")
    return {"pre-L6": ratio(ctx, ("pre", lo, w), ("pre", lo, 0)), "pre-L18": ratio(ctx, ("pre", hi, w), ("pre", hi, 0))}
