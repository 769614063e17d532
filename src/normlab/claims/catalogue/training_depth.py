"""Training claims about depth, decided from the stability map as placement x depth
interactions: how much more a placement's loss rises from 6 to the deep cell than another's,
each against its own 6-block control at the same lr and warm-up. A depth effect without its
shallow control says nothing about depth: if the 6-block model fails too, depth is not the
cause (and when every arm fails the part is inconclusive, ``claims/map_cells.py``).
"""

from __future__ import annotations

from typing import Any

from normlab.claims.catalogue.map_cells import LR, MAP, L, P, W, below_plateau, deep, diff, interaction, shallow, warm
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction
from normlab.claims.studies import StudyContext
from normlab.study.outcome import STALL_MARGIN

EXP = ("study 'stability-map': post/pre/deepnorm/admin/sandwich/pre_post x lr {5e-4, 1e-3, 3e-3} x depth {6, 18} "
       "x warm-up {0, 50}, d=64, 200 steps, constant lr after warm-up, 4 seeds")
SET = "xavier init; no gradient clipping (the claims are about training failing, which a clip can mask)"
INTER = ("(gain at 18 blocks minus gain at 6) for {a} minus the same for {b}, lr {lr}, warm-up 50; gain = best val "
         "loss minus ln 65 (nats; diverged = 0)")
TRAINS = ("best val loss minus the unigram cross-entropy of the corpus (computed from the data), {p}, 18 blocks, "
          "lr {lr}, warm-up 50, per seed")
STALL = "trains = below the unigram plateau by more than the stall margin (docs/studies.md, 'Outcomes')"


def _depth(ctx: StudyContext, a: str, b: str, lr: float) -> Measured:
    hi, lo, w = deep(ctx), shallow(ctx), warm(ctx)
    c: dict[str, Any] = {LR: lr, W: w}
    return interaction(ctx, {P: a, L: hi, **c}, {P: a, L: lo, **c}, {P: b, L: hi, **c}, {P: b, L: lo, **c})


def _trains(ctx: StudyContext, p: str, lr: float) -> Measured:
    m = below_plateau(ctx, {P: p, L: deep(ctx), LR: lr, W: warm(ctx)})
    m.numbers["stall_margin"] = STALL_MARGIN
    return m


def _depth_regime(source_depth: str, warmup: str, lr: str, extra: tuple[Any, ...] = (), inside: bool = False) -> Regime:
    why = ("18 blocks is one of the source's depths" if inside else "the lab's deep cell is 18 blocks: 2 cores allow "
           "no more within the run's budget (docs/theory.md, 'Regimes and the scaled-down rule')")
    return Regime((
        factor("depth", source_depth, inside=inside, why=why),
        factor("warm-up", warmup, why="the map's warm-up cell (50 of 200 steps)"),
        factor("lr", lr, why="the map's cell at that lr"),
        factor("width", "d = 512 or more", matters=False, why="the arguments are about depth, at any width"),
        *extra))


@claim(id="liu-post-converged", quick=False, studies=[MAP], experiment=EXP, settings=SET,
       regime=Regime((factor("steps", "trained to convergence", inside=False, parts=("shallow",),
                             why="'when it converges' is about the end of training; the lab reads 200 steps"),
                      factor("depth", "6 layers (shallow) and 18 or more (deep)", why="6 and 18 blocks (the authors' 18-layer setting)"),
                      factor("warm-up", "tuned warm-up (thousands of updates)", why="the map's warm-up cell"))),
       source="Liu et al. 2020, 'Understanding the Difficulty of Training Transformers', Sec. 3",
       statement="When Post-LN does converge (shallow, tuned warm-up) it often ends at or below Pre-LN; it fails "
                 "at depth.",
       parts=[Part("shallow", "at 6 blocks with warm-up (lr 5e-4) Post-LN ends at or below Pre-LN",
                   "best val loss minus ln 65, post minus pre, 6 blocks, lr 5e-4, warm-up 50", Direction(-1, 0.02),
                   "non-inferiority: 'at or below' within 0.02 nats, 2% in perplexity: a gap no practitioner would "
                   "trade a placement for"),
              Part("deep", "from 6 to 18 blocks Post-LN loses more than Pre-LN (with warm-up, lr 5e-4)",
                   INTER.format(a="post", b="pre", lr="5e-4"), Direction(+1),
                   "fails at depth = its loss rises with depth beyond Pre-LN's, each against its shallow control")])
def liu_post_converged(ctx: StudyContext) -> dict[str, Measured]:
    c = {L: shallow(ctx), LR: 5e-4, W: warm(ctx)}
    return {"shallow": diff(ctx, {P: "post", **c}, {P: "pre", **c}), "deep": _depth(ctx, "post", "pre", 5e-4)}


@claim(id="seed004-depth", quick=False, studies=[MAP], experiment=EXP, settings=SET,
       regime=_depth_regime("'the number of layers' (Liu et al.'s figure: 6 to 18 layers and more)", "not stated",
                            "not stated", inside=True),
       source="seed 004 (Chinese survey, 004_d24365e98fdce59d.txt)",
       statement="Compared with Post Norm, Pre Norm is less sensitive to the number of layers.",
       parts=[Part("interaction", "from 6 to 18 blocks Post-LN's loss rises more than Pre-LN's (lr 1e-3)",
                   INTER.format(a="post", b="pre", lr="1e-3"), Direction(+1),
                   "less sensitive to depth = a smaller change of loss with depth")])
def seed004_depth(ctx: StudyContext) -> dict[str, Measured]:
    return {"interaction": _depth(ctx, "post", "pre", 1e-3)}


@claim(id="deepnorm-depth", quick=False, studies=[MAP], experiment=EXP, settings=SET + "; DeepNorm's alpha and "
       "beta for decoder-only M blocks", regime=_depth_regime("hundreds to 1000 layers", "4000 updates (translation)",
                                                               "5e-4 (translation)"),
       source="DeepNet (Wang et al. 2022); a public Tiny Shakespeare experiment trains DeepNorm 64 blocks deep",
       statement="DeepNorm trains at depth where Post-LN does not.",
       parts=[Part("deepnorm-trains", "DeepNorm trains at 18 blocks", TRAINS.format(p="deepnorm", lr="5e-4"),
                   Direction(-1, -0.15), STALL),
              Part("vs-post", "from 6 to 18 blocks DeepNorm loses less than Post-LN",
                   INTER.format(a="deepnorm", b="post", lr="5e-4"), Direction(-1),
                   "trains at depth where Post-LN does not = a smaller loss rise with depth")])
def deepnorm_depth(ctx: StudyContext) -> dict[str, Measured]:
    return {"deepnorm-trains": _trains(ctx, "deepnorm", 5e-4), "vs-post": _depth(ctx, "deepnorm", "post", 5e-4)}


@claim(id="admin-depth", quick=False, studies=[MAP], experiment=EXP, settings=SET + "; Admin's omega profiled at "
       "init", regime=_depth_regime("6, 18 and 60 encoder layers", "8000 updates (WMT14, RAdam)", "1e-3",
                                    (factor("optimizer", "RAdam", matters=False,
                                            why="the warm-up is kept in both; the claim is about the shortcut"),),
                                    inside=True),
       source="Liu et al. 2020 (Admin), 'Understanding the Difficulty of Training Transformers'",
       statement="Admin stabilises Post-LN: rescaling the shortcut by the profiled omega removes the amplification "
                 "that makes deep Post-LN fail in its usual recipe (with warm-up).",
       parts=[Part("admin-trains", "Admin trains at 18 blocks", TRAINS.format(p="admin", lr="1e-3"),
                   Direction(-1, -0.15), STALL),
              Part("vs-post", "from 6 to 18 blocks Admin loses less than Post-LN",
                   INTER.format(a="admin", b="post", lr="1e-3"), Direction(-1),
                   "stabilises = a smaller loss rise with depth than what it stabilises")])
def admin_depth(ctx: StudyContext) -> dict[str, Measured]:
    return {"admin-trains": _trains(ctx, "admin", 1e-3), "vs-post": _depth(ctx, "admin", "post", 1e-3)}


@claim(id="seed002-sandwich-deep", quick=False, studies=[MAP], experiment=EXP, settings=SET,
       regime=_depth_regime("100+ layers ('very deep', more than 48)", "not stated", "not stated"),
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), sections 7 and 9",
       statement="Sandwich-Norm (output = LayerNorm(x + F(LayerNorm(x)))) can improve stability on very deep "
                 "models (100+ layers); for very deep models (> 48 layers) consider Sandwich-Norm.",
       parts=[Part("pre_post", "the seed's own formula (normlab's pre_post) loses less with depth than Pre-LN",
                   INTER.format(a="pre_post", b="pre", lr="1e-3"), Direction(-1),
                   "improves stability = a smaller loss rise with depth"),
              Part("sandwich", "CogView's Sandwich-LN (x + LN(F(LN(x)))) loses less with depth than Pre-LN",
                   INTER.format(a="sandwich", b="pre", lr="1e-3"), Direction(-1),
                   "the seed's name refers to CogView's block, whose formula differs from the seed's")])
def seed002_sandwich_deep(ctx: StudyContext) -> dict[str, Measured]:
    return {"pre_post": _depth(ctx, "pre_post", "pre", 1e-3), "sandwich": _depth(ctx, "sandwich", "pre", 1e-3)}


@claim(id="seed000-final-norm", quick=False, studies=[MAP, "recipe-variants"], experiment=EXP + "; "
       "'recipe-variants': pre without its final norm at 18 blocks", settings=SET,
       regime=Regime((factor("depth", "any Pre-LN stack", matters=False),)),
       source="seed 000 (Korean lecture notes, 000_ca64de5e8bef631c.txt)",
       statement="A Final Norm is commonly added after a Pre-LN stack (Pre-LN does not normalise the residual "
                 "after every sub-layer).",
       parts=[Part("needed", "without the final norm, an 18-block Pre-LN model ends worse",
                   "best val loss minus ln 65, pre without minus pre with its final norm, 18 blocks, lr 1e-3, "
                   "warm-up 50", Direction(+1), "the seed says the norm is commonly added; the lab tests whether "
                   "leaving it out costs loss where the stream has grown most (18 blocks)")])
def seed000_final_norm(ctx: StudyContext) -> dict[str, Measured]:
    c = {L: deep(ctx), LR: 1e-3, W: warm(ctx)}
    return {"needed": diff(ctx, {"study": "recipe-variants", P: "pre", "model.final_norm": False, W: c[W]},
                           {P: "pre", **c})}
