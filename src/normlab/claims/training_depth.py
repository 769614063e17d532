"""Training claims about depth: which placements train 48 blocks deep without warm-up.

All read the study 'deep-stability' (post, pre, deepnorm, admin, sandwich, pre_post at depth
6 and 48, xavier init, constant lr 1e-3, no warm-up, no clipping, 3 seeds). The quantity is
:func:`~normlab.claims.studies.gain`; "trains" means a gain below -1 nat (fixed before the
data: the unigram entropy of Tiny Shakespeare is ~3.3 nats, 0.9 below ln 65).
"""

from __future__ import annotations

from normlab.claims.claim import Measured, Part, claim
from normlab.claims.rules import Direction
from normlab.claims.studies import StudyContext, gain, values, where
from normlab.stats import one_sample, welch

P, L = "model.placement", "model.n_layer"
DEEP = ("study 'deep-stability': post/pre/deepnorm/admin/sandwich/pre_post x depth {6, 48}, d=64, context 64, "
        "batch 16, constant lr 1e-3, no warm-up, 200 steps, 3 seeds")
DSET = ("xavier init (the papers' setting, and Admin's regime: docs/placements.md); no gradient clipping, "
        "since the claims are about training failing, which a clip can mask")
GAIN = "best val loss minus ln 65, the uniform prediction's loss (nats; diverged = 0), "
TRAINS = "'trains' = more than 1 nat below a uniform prediction (ln 65 = 4.17), fixed before the data"


def _at(ctx: StudyContext, p: str, depth: int | None = None) -> tuple[list[float], list[str]]:
    t = ctx.trials("deep-stability")
    depth = depth or max(x.params[L] for x in t)
    return values(where(t, {P: p, L: depth}), gain)


def _vs(ctx: StudyContext, a: str, b: str) -> Measured:
    va, ia = _at(ctx, a)
    vb, ib = _at(ctx, b)
    return Measured(welch(va, vb), ia + ib, {a: va, b: vb})


def _trains(ctx: StudyContext, p: str) -> Measured:
    v, ids = _at(ctx, p)
    shallow, _ = _at(ctx, "pre", min(x.params[L] for x in ctx.trials("deep-stability")))
    return Measured(one_sample(v), ids, {"per_seed": v, "control_pre_shallow": shallow})


@claim(id="deepnorm-depth", quick=False, studies=["deep-stability"], experiment=DEEP, settings=DSET,
       source="DeepNet (Wang et al. 2022); a public Tiny Shakespeare experiment trains DeepNorm 64 blocks deep",
       statement="DeepNorm trains at depth where Post-LN does not (no warm-up).",
       parts=[Part("deepnorm-trains", "DeepNorm trains at 48 blocks", GAIN + "deepnorm, L=48, per seed",
                   Direction(-1, -1.0), TRAINS),
              Part("post-fails", "Post-LN does not train at 48 blocks", GAIN + "post, L=48, per seed",
                   Direction(+1, -1.0), TRAINS),
              Part("better", "DeepNorm ends lower than Post-LN at 48 blocks", GAIN + "deepnorm minus post, L=48",
                   Direction(-1), "where = a depth at which the two differ")])
def deepnorm_depth(ctx: StudyContext) -> dict[str, Measured]:
    return {"deepnorm-trains": _trains(ctx, "deepnorm"), "post-fails": _trains(ctx, "post"),
            "better": _vs(ctx, "deepnorm", "post")}


@claim(id="admin-depth", quick=False, studies=["deep-stability"], experiment=DEEP, settings=DSET,
       source="Liu et al. 2020 (Admin), 'Understanding the Difficulty of Training Transformers'",
       statement="Admin stabilises Post-LN: with the shortcut rescaled by the profiled omega, deep Post-LN "
                 "models train without the warm-up tricks they otherwise need.",
       parts=[Part("admin-trains", "Admin trains at 48 blocks without warm-up", GAIN + "admin, L=48, per seed",
                   Direction(-1, -1.0), TRAINS),
              Part("better", "Admin ends lower than plain Post-LN at 48 blocks", GAIN + "admin minus post, L=48",
                   Direction(-1), "stabilises = does better than what it stabilises")])
def admin_depth(ctx: StudyContext) -> dict[str, Measured]:
    return {"admin-trains": _trains(ctx, "admin"), "better": _vs(ctx, "admin", "post")}


@claim(id="seed002-sandwich-deep", quick=False, studies=["deep-stability"], experiment=DEEP, settings=DSET,
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), sections 7 and 9",
       statement="Sandwich-Norm (output = LayerNorm(x + F(LayerNorm(x)))) can improve stability on very deep "
                 "models (100+ layers); for very deep models (> 48 layers) consider Sandwich-Norm.",
       parts=[Part("pre_post", "the seed's own formula (normlab's pre_post) ends lower than Pre-LN at 48 blocks",
                   GAIN + "pre_post minus pre, L=48", Direction(-1), "improves = does better than plain Pre-LN"),
              Part("sandwich", "CogView's Sandwich-LN (x + LN(F(LN(x)))) ends lower than Pre-LN at 48 blocks",
                   GAIN + "sandwich minus pre, L=48", Direction(-1),
                   "the seed's name refers to CogView's block, whose formula differs from the seed's")])
def seed002_sandwich_deep(ctx: StudyContext) -> dict[str, Measured]:
    return {"pre_post": _vs(ctx, "pre_post", "pre"), "sandwich": _vs(ctx, "sandwich", "pre")}


CLAIMS = [deepnorm_depth, admin_depth, seed002_sandwich_deep]
