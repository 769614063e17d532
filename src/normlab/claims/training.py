"""Training claims on warm-up, convergence and learning rate, decided from study stores.

Each claim names the studies it reads (``STUDIES``) and the exact cells it compares; every
cell and margin is fixed here, before the studies ran (docs/theory.md). The loss quantity is
`~normlab.claims.studies.gain`: best val loss relative to ln V (a uniform prediction), a diverged
run counted as no progress, so that failures stay in the comparison instead of dropping out.
"""

from __future__ import annotations

from typing import Any

from normlab.claims.claim import Measured, Part, claim
from normlab.claims.rules import Direction, Within
from normlab.claims.studies import StudyContext, clip_fraction, final_capped, first_eval, gain, values, where
from normlab.stats import one_sample, rate, welch

P, W, LR, QK = "model.placement", "optim.warmup_steps", "optim.lr", "model.qk_norm"
WARM = "the fixed warm-up cell W = 60 steps of 300 (the study's only non-zero warm-up)"
GAIN = "best val loss minus ln 65, the uniform prediction's loss (nats; diverged = 0), "
XIONG = ("study 'xiong-warmup': post/pre x warm-up {0, 60} x lr {5e-4, 1e-3, 3e-3}, 6 blocks d=128, 300 steps, "
         "linear decay, 3 seeds")
XSET = "no gradient clipping (a clip would hide the divergence warm-up prevents); AdamW beta2 0.99"
MARGIN = "0.05 nats is about twice the seed-to-seed std of one setting at this scale: the largest gap we call 'comparable'"


def _warm(ctx: StudyContext) -> int:
    """The study's non-zero warm-up (60 at cpu scale): the one cell every warm-up part compares."""
    return max(t.params[W] for t in ctx.trials("xiong-warmup"))


def _deepest(ctx: StudyContext) -> int:
    return max(t.params["model.n_layer"] for t in ctx.trials("deep-stability"))


def _diff(ctx: StudyContext, study: str, a: dict[str, Any], b: dict[str, Any], fn: Any = gain) -> Measured:
    """Welch effect of fn over seeds: cell a minus cell b."""
    va, ia = values(where(ctx.trials(study), a), fn)
    vb, ib = values(where(ctx.trials(study), b), fn)
    return Measured(welch(va, vb), ia + ib, {"a": va, "b": vb})


def _warm_parts() -> list[Part]:
    out = []
    for lr in ("5e-4", "1e-3"):
        out.append(Part(f"post-{lr}", f"at lr {lr}, Post-LN without warm-up ends worse than with it",
                        GAIN + f"post, lr {lr}: warm-up 0 minus {WARM}", Direction(+1),
                        "worse = a higher loss relative to init"))
    for lr in ("5e-4", "1e-3"):
        out.append(Part(f"pre-{lr}", f"at lr {lr}, Pre-LN without warm-up is comparable to Pre-LN with it",
                        GAIN + f"pre, lr {lr}: warm-up 0 minus warm-up 60", Within(-0.05, 0.05), MARGIN))
    return out


@claim(id="warmup-post", quick=False, studies=["xiong-warmup"], experiment=XIONG, settings=XSET, parts=_warm_parts(),
       source="Xiong et al. 2020, Sec. 3.1; seed 002 (Russian Q&A) 'post-norm requires warm-up, pre-norm can do "
              "without it'",
       statement="Post-LN needs learning-rate warm-up at lr_max 5e-4 to 1e-3: without it, it trains worse or "
                 "diverges. Pre-LN without warm-up gives comparable results.")
def warmup_post(ctx: StudyContext) -> dict[str, Measured]:
    out = {}
    for p in ("post", "pre"):
        for lr, key in ((5e-4, "5e-4"), (1e-3, "1e-3")):
            out[f"{p}-{key}"] = _diff(ctx, "xiong-warmup", {P: p, LR: lr, W: 0}, {P: p, LR: lr, W: _warm(ctx)})
    return out


@claim(id="warmup-pre-not-universal", quick=False, studies=["xiong-warmup"], experiment=XIONG, settings=XSET,
       source="seed 000 (Korean lecture notes, 000_ca64de5e8bef631c.txt)",
       statement="Pre-LN gave comparable results without warm-up in that setting, but it is not a law that "
                 "warm-up is unnecessary in every setting.",
       parts=[Part("pre-3e-3", "at a higher lr (3e-3), Pre-LN without warm-up ends worse than with it",
                   GAIN + "pre, lr 3e-3: warm-up 0 minus warm-up 60", Direction(+1),
                   "one setting where Pre-LN needs warm-up shows the 'law' fails; 3e-3 is 3x the top of "
                   "Xiong's range")])
def warmup_pre_not_universal(ctx: StudyContext) -> dict[str, Measured]:
    return {"pre-3e-3": _diff(ctx, "xiong-warmup", {P: "pre", LR: 3e-3, W: 0}, {P: "pre", LR: 3e-3, W: _warm(ctx)})}



@claim(id="liu-post-converged", quick=False, studies=["xiong-warmup", "deep-stability"], settings=XSET + "; deep-stability: xavier init, unclipped",
       experiment=XIONG + "; study 'deep-stability' at L=48 for the depth part",
       source="Liu et al. 2020, 'Understanding the Difficulty of Training Transformers', Sec. 3",
       statement="When Post-LN does converge (shallow, tuned warm-up) it often ends at or below Pre-LN; it fails "
                 "at depth.",
       parts=[Part("shallow", "at 6 blocks with warm-up (lr 5e-4, W = 60) Post-LN ends at or below Pre-LN",
                   GAIN + "post minus pre at lr 5e-4, warm-up 60 (the gentlest cell, fixed in advance)",
                   Direction(-1, 0.02), "non-inferiority: 'at or below' within 0.02 nats"),
              Part("deep", "at 48 blocks without warm-up Post-LN ends worse than Pre-LN",
                   GAIN + "post minus pre, deep-stability L=48", Direction(+1), "fails at depth = worse than Pre-LN")])
def liu_post_converged(ctx: StudyContext) -> dict[str, Measured]:
    cell = {LR: 5e-4, W: _warm(ctx)}
    deep = {"model.n_layer": _deepest(ctx)}
    return {"shallow": _diff(ctx, "xiong-warmup", {P: "post", **cell}, {P: "pre", **cell}),
            "deep": _diff(ctx, "deep-stability", {P: "post", **deep}, {P: "pre", **deep})}


@claim(id="seed002-post-shallow", quick=False, studies=["xiong-warmup"], experiment=XIONG, settings=XSET,
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), practical advice",
       statement="Below 12 layers post-norm may give slightly better perplexity, but the difference is usually "
                 "negligible.",
       parts=[Part("negligible", "at 6 blocks the Post-LN / Pre-LN difference is negligible",
                   GAIN + "post minus pre at lr 5e-4, warm-up 60", Within(-0.05, 0.05), MARGIN),
              Part("post-better", "... and Post-LN is the (slightly) better one", GAIN + "post minus pre, same cell",
                   Direction(-1), "better = lower loss")])
def seed002_post_shallow(ctx: StudyContext) -> dict[str, Measured]:
    cell = {LR: 5e-4, W: _warm(ctx)}
    m = _diff(ctx, "xiong-warmup", {P: "post", **cell}, {P: "pre", **cell})
    return {"negligible": m, "post-better": m}


PVP = ("study 'pre-vs-post': post/pre x warm-up {0, 50}, 6 blocks d=128, lr 1e-3 cosine, 500 steps, batch 16, "
       "4 seeds (the lab's cpu-size stand-in for the seed's 10 epochs at lr 3e-4, batch 32)")
PSET = "no gradient clipping, as in the seed's code (the pre-clip norm is logged)"
# `--scale seed`: the seed's own hyper-parameters (study preset pre-vs-post at scale seed).
PVP_SEED = {"seed": "study 'pre-vs-post' at scale seed: post/pre x warm-up {0, 490}, 6 blocks d=128, 4 heads, "
                    "context 64, AdamW lr 3e-4 constant, batch 32, 4900 steps (10 epochs of the training "
                    "text), 4 seeds: the seed's own settings"}


@claim(id="seed002-pet-project", quick=False, studies=["pre-vs-post"], experiment=PVP, settings=PSET, experiments=PVP_SEED,
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), the pet project",
       statement="Expected result: the pre-norm model will show a faster decrease of the loss and a lower final "
                 "perplexity. Post-norm may diverge without warm-up (train post-norm without warm-up: it will "
                 "most likely not converge).",
       parts=[Part("faster", "without warm-up, Pre-LN's loss falls faster",
                   "val loss at the first eval after step 0 (step 100 at cpu scale, 245 at seed scale), pre minus post, no warm-up", Direction(-1),
                   "faster = lower loss early"),
              Part("lower", "without warm-up, Pre-LN ends lower", GAIN + "pre minus post, no warm-up", Direction(-1),
                   "lower final perplexity = lower loss"),
              Part("post-fails", "Post-LN without warm-up most likely does not converge",
                   "share of Post-LN runs without warm-up that do not converge (gain above -1 nat, or diverged)",
                   Direction(+1, 0.5), "'most likely' = more than half the runs (Wilson interval, exact binomial)")])
def seed002_pet_project(ctx: StudyContext) -> dict[str, Measured]:
    post0 = where(ctx.trials("pre-vs-post"), {P: "post", W: 0})
    g, ids = values(post0, gain)
    fails = sum(v > -1.0 for v in g)
    return {"faster": _diff(ctx, "pre-vs-post", {P: "pre", W: 0}, {P: "post", W: 0}, first_eval),
            "lower": _diff(ctx, "pre-vs-post", {P: "pre", W: 0}, {P: "post", W: 0}),
            "post-fails": Measured(rate(fails, len(g)), ids, {"gains": g})}


@claim(id="seed002-clipping", quick=False, studies=["pre-vs-post"], experiment=PVP, settings=PSET, experiments=PVP_SEED,
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt)",
       statement="Gradient clipping: pre-norm needs clipping less often, because its gradients do not explode.",
       parts=[Part("rare", "Pre-LN rarely needs clipping",
                   "share of logged steps with pre-clip gradient norm > 1.0, Pre-LN, no warm-up, per seed",
                   Direction(-1, 0.1), "'rarely' = on fewer than one step in ten, at clip 1.0 (the usual setting)"),
              Part("vs-post", "... less often than Post-LN", "that share, pre minus post, no warm-up",
                   Direction(-1), "less often = a smaller share")])
def seed002_clipping(ctx: StudyContext) -> dict[str, Measured]:
    pre, ids = values(where(ctx.trials("pre-vs-post"), {P: "pre", W: 0}), clip_fraction)
    return {"rare": Measured(one_sample(pre), ids, {"per_seed": pre}),
            "vs-post": _diff(ctx, "pre-vs-post", {P: "pre", W: 0}, {P: "post", W: 0}, clip_fraction)}


LRS = ("study 'lr-sensitivity': lr {3e-4, 1e-3, 3e-3, 1e-2, 3e-2} x (pre, pre + QK-norm, post), 6 blocks d=128, "
       "200 steps, warm-up 20, cosine, 3 seeds, diagnostics every 50 steps")
LSET = "gradient clipping at 1.0, as in Wortsman et al.'s setup"


@claim(id="seed002-higher-lr", quick=False, studies=["lr-sensitivity"], experiment=LRS, settings=LSET,
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt)",
       statement="Trained from scratch, pre-norm allows a higher learning rate (for example 3e-4 instead of 1e-4).",
       parts=[Part("at-1e-2", "at a high learning rate (1e-2) Pre-LN ends lower than Post-LN",
                   "min(final val loss, loss at init), pre minus post, lr 1e-2, no QK-norm", Direction(-1),
                   "allows a higher lr = still trains where the other does worse; 1e-2 is 10x the lab's default")])
def seed002_higher_lr(ctx: StudyContext) -> dict[str, Measured]:
    return {"at-1e-2": _diff(ctx, "lr-sensitivity", {P: "pre", QK: None, LR: 1e-2}, {P: "post", QK: None, LR: 1e-2},
                             final_capped)}


CLAIMS = [warmup_post, warmup_pre_not_universal, liu_post_converged, seed002_post_shallow, seed002_pet_project,
          seed002_clipping, seed002_higher_lr]
