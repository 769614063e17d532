"""Training claims of seed 002's pet project and on clipping and early gradients, decided from
the study 'pre-vs-post', and seed 002's vanishing gradients in deep Post-LN, from the deep
Post-LN arm of 'new-methods'. (Seed 002's "pre-norm allows a higher learning rate" is
``frontier-placement``: the critical lr each placement trains up to.)

Each claim names the studies it reads and the exact cells it compares; every cell and margin
is fixed here and registered before the studies run (docs/theory.md, "Pre-registration").
The loss quantity is :func:`~normlab.claims.studies.gain`: best val loss relative to ln V (a
uniform prediction), a diverged run counted as no progress, so that failures stay in the
comparison instead of dropping out.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction
from normlab.claims.studies import StudyContext, clip_fraction, first_eval, spike_ratio, values, welch_cells, where
from normlab.run.dir import RunDir
from normlab.stats.effects import one_sample, rate

P, W, LR, QK, L = "model.placement", "optim.warmup_steps", "optim.lr", "model.qk_norm", "model.n_layer"
IMPL = "model.impl"  # pre-vs-post's cells are the lab's arms, never its transformers baseline
GAIN = "best val loss minus ln 65, the uniform prediction's loss (nats; diverged = 0), "


PVP = ("study 'pre-vs-post': post/pre x warm-up {0, 50}, 6 blocks d=128, lr 1e-3 cosine, 500 steps, batch 16, "
       "6 seeds (the lab's cpu-size stand-in for the seed's 10 epochs at lr 3e-4, batch 32)")
PSET = ("cpu scale: gpt2 init (the lab's default); seed scale: torch_default, the seed's code's init (PyTorch's "
        "module defaults, N(0, 1) embeddings, a separate output layer); no gradient clipping, as in the seed's code")
# `--scale seed`: the seed's own hyper-parameters (study preset pre-vs-post at scale seed).
PVP_SEED = {"seed": "study 'pre-vs-post' at scale seed: post and pre without warm-up, 6 blocks d=128, 4 heads, "
                    "context 64, AdamW lr 3e-4 constant, batch 32, 4900 steps (10 epochs of the training "
                    "text), init torch_default (PyTorch's module defaults, N(0, 1) embeddings) with an untied output "
                    "layer, 6 seeds: the seed's own settings (d, heads and context are the lab's: the seed states "
                    "none)"}
PET = Regime((
    factor("lr", "3e-4, constant", inside={"seed": True, "cpu": False, "smoke": False},
           why="the cpu scale runs lr 1e-3 cosine to fit 500 steps; the seed scale runs the seed's own"),
    factor("steps", "10 epochs (4900 steps of 32 x 64 tokens)", inside={"seed": True, "cpu": False, "smoke": False},
           why="'final perplexity' after the seed's 10 epochs; the cpu scale trains 500 steps"),
    factor("init", "PyTorch's module defaults (the seed's code sets no init: nn.Embedding N(0, 1), nn.Linear and "
           "nn.MultiheadAttention's uniform draws)", inside={"seed": True, "cpu": False, "smoke": False},
           why="the seed scale runs init torch_default, those defaults; the cpu scale runs GPT-2's N(0, 0.02)"),
    factor("depth", "6 blocks", why="6 blocks"),
    factor("width", "not stated (the code takes d_model as a parameter)", matters=False,
           why="the lab runs d = 128, 4 heads, context 64 at both scales"),
    factor("clipping", "none", why="none, as the seed's code"),
    factor("warm-up", "none, and a linear warm-up", why="no warm-up, and 10% of training"),
))


@claim(id="seed002-pet-project", quick=False, studies=["pre-vs-post"], experiment=PVP, settings=PSET, experiments=PVP_SEED,
       regime=PET, source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), the pet project",
       statement="Expected result: the pre-norm model will show a faster decrease of the loss and a lower final "
                 "perplexity. Post-norm may diverge without warm-up (train post-norm without warm-up: it will "
                 "most likely not converge).",
       parts=[Part("faster", "without warm-up, Pre-LN's loss falls faster",
                   "val loss at the first eval after step 0 (step 100 at cpu scale, 245 at seed scale), pre minus post, no warm-up", Direction(-1),
                   "faster = lower loss early"),
              Part("lower", "without warm-up, Pre-LN ends lower", GAIN + "pre minus post, no warm-up", Direction(-1),
                   "lower final perplexity = lower loss"),
              Part("post-fails", "Post-LN without warm-up has not converged by the study's last step in most runs",
                   "share of Post-LN runs without warm-up still on the unigram plateau or diverged at the study's "
                   "last step (500 at cpu scale, 4900 at seed scale)", Direction(+1, 0.5),
                   "'most likely not converge' read at the horizon the study trains to: a run on the plateau there "
                   "may still leave it later; 'most likely' = more than half the runs (exact interval), which 6 "
                   "seeds decide only at 6 of 6 (and the opposite only at 0 of 6)")])
def seed002_pet_project(ctx: StudyContext) -> dict[str, Measured]:
    post0 = where(ctx.trials("pre-vs-post"), {P: "post", IMPL: "normlab", W: 0})
    got = [ctx.outcome(t) for t in post0]
    fails = sum(o in ("stalls", "diverged") for o in got)
    return {"faster": welch_cells(ctx, "pre-vs-post", {P: "pre", IMPL: "normlab", W: 0}, {P: "post", IMPL: "normlab", W: 0}, first_eval),
            "lower": welch_cells(ctx, "pre-vs-post", {P: "pre", IMPL: "normlab", W: 0}, {P: "post", IMPL: "normlab", W: 0}),
            "post-fails": Measured(rate(fails, len(got)), [t.id for t in post0], {"outcomes": got})}


CLIP_AT = 1.0  # the lab's default clip (and nanoGPT's, GPT-2's): the seed names no threshold


@claim(id="seed002-clipping", quick=False, studies=["pre-vs-post"], settings="no gradient clipping in any arm",
       experiment=PVP + "; every pre-clip gradient norm the training log records (every 10th step)",
       regime=Regime((factor("clipping", "not stated: 'needs clipping' names no threshold", matters=False,
                             why="the lab counts the steps a clip at global norm 1.0 (its default) would cut in "
                                 "unclipped runs; the part's quantity names the threshold"),)),
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt)",
       statement="Gradient clipping: pre-norm needs clipping less often, because its gradients do not explode.",
       parts=[Part("vs-post", "unclipped, a clip at 1.0 would act on a smaller share of Pre-LN's steps than of "
                   "Post-LN's", "share of the logged training steps whose pre-clip gradient norm exceeds 1.0 (what "
                   "a clip at global norm 1.0 would cut), pre minus post, no warm-up, per seed", Direction(-1),
                   "needs clipping less often = a smaller share of steps a clip would act on, the statement's own "
                   "quantity (the earlier reading, OLMo-core's spike score, was 0 in 10 of 12 runs and could not "
                   "decide). Design: 6 seeds a side, per-seed sd 0.05 (prior; the superseded seed-scale run had "
                   "0.013 for Post-LN and 0 for Pre-LN) detect -0.092 with 80% power"),
              Part("no-spikes", "Pre-LN's gradient norm spikes less than Post-LN's",
                   "log10(max / median pre-clip gradient norm over training), pre minus post, no warm-up, per seed",
                   Direction(-1), "'do not explode' = no spike far above the run's typical norm")])
def seed002_clipping(ctx: StudyContext) -> dict[str, Measured]:
    pre, post = {P: "pre", IMPL: "normlab", W: 0}, {P: "post", IMPL: "normlab", W: 0}
    return {"vs-post": welch_cells(ctx, "pre-vs-post", pre, post, lambda t: clip_fraction(t, CLIP_AT)),
            "no-spikes": welch_cells(ctx, "pre-vs-post", pre, post, spike_ratio)}


def _grad_ratio(t: Any, step: int) -> float | None:
    """log10(first block's / last block's pre-clip gradient norm) at the diagnostic step nearest ``step``."""
    if t.status != "completed":
        return None
    recs = [r for r in RunDir(t.run_dir).diagnostics() if r.get("grad_norm")]
    if not recs:
        return None
    r = min(recs, key=lambda x: abs(x["step"] - step))
    g = r["grad_norm"][1:-1]  # [embeddings, blocks 1..L, final]: the blocks
    return math.log10(g[0] / g[-1]) if g and g[0] and g[-1] else None


# no seed scale: 'pre-vs-post --scale seed' trains no warm-up arm (it is sized to seed002-pet-project)
@claim(id="seed001-early-gradients", quick=False, studies=["pre-vs-post"], experiment=PVP + "; diagnostics every "
       "100 steps", settings=PSET,
       regime=Regime((factor("steps", "about 1K steps", inside={"seed": True, "cpu": False, "smoke": False},
                             why="the cpu scale ends at step 500; the seed scale reads step 1000"),
                      factor("depth", "not stated (Xiong et al.'s 6 to 12 layers)", matters=False))),
       source="seed 001 (Korean paper summary, 001_362ada3767c69b55.txt), on Xiong et al.",
       statement="The paper visualised per-layer gradient magnitudes early in training (1K steps): in Post-LN the "
                 "lower layers' gradients are tens of times larger; in Pre-LN this is not observed.",
       parts=[Part("post", "Post-LN's lowest block gets tens of times the gradient of its last",
                   "log10(gradient norm of block 1 / block 6) at the diagnostic step nearest 1000, post, warm-up "
                   "50, per seed that trained (runs still on the plateau are left out and listed)", Direction(+1, 1.0),
                   "'tens of times' = more than 10x"),
              Part("pre", "Pre-LN's does not", "the same, pre", Direction(-1, 1.0), "not observed = below 10x")])
def seed001_early_gradients(ctx: StudyContext) -> dict[str, Measured]:
    w = max(t.params[W] for t in ctx.trials("pre-vs-post"))
    out = {}
    for p in ("post", "pre"):
        runs = where(ctx.trials("pre-vs-post"), {P: p, IMPL: "normlab", W: w})
        # a run still on the unigram plateau learns nothing the paper's picture shows: left out, and named
        trained = [t for t in runs if ctx.outcome(t) == "trains"]
        v, ids = values(trained, lambda t: _grad_ratio(t, 1000))
        out[p] = Measured(one_sample(v), ids, {"per_seed": v, "left_out": [t.id for t in runs if t not in trained]})
    return out


def whole_run_grad_ratio(t: Any) -> float | None:
    """Mean over every diagnostic step of the run of log10(||grad block 1|| / ||grad block L||),
    the blocks' pre-clip gradient norms (None without diagnostics)."""
    recs = [r for r in RunDir(t.run_dir).diagnostics() if r.get("grad_norm")]
    out = []
    for r in recs:
        g = r["grad_norm"][1:-1]  # [embeddings, blocks 1..L, final]: the blocks
        if len(g) >= 2 and g[0] and g[-1] and g[0] > 0 and g[-1] > 0:
            out.append(math.log10(g[0] / g[-1]))
    return statistics.fmean(out) if out else None


NM_POST = {P: "post", "model.norm": "layernorm"}
VANISH_SD = 0.2  # decades per seed, a stated prior: no run has read this quantity for Post-LN (Pre-LN's: 0.04)


def _vanish_design(claim: Any, scale: str) -> dict[str, Any]:
    """The stated prior's design at the seeds the new-methods study plans at ``scale``."""
    from normlab.claims.design import mean_design
    from normlab.claims.registration import study_spec

    n = len(study_spec("new-methods", scale).seeds)
    return {"vanish": mean_design(f"{claim.id}/vanish", claim.parts[0].rule, n, VANISH_SD, unit="decades")}


@claim(id="seed002-post-vanish", quick=False, studies=["new-methods"], design=_vanish_design,
       experiment="study 'new-methods', its Post-LN arm: 18 blocks, d=64, lr 1e-3 constant after warm-up 50, 200 "
                  "steps, 5 seeds; per-block gradient norms every 20 steps",
       settings="xavier init; no gradient clipping; LayerNorm",
       regime=Regime((factor("steps", "during training (not stated when)",
                             why="the lab reads the first 200 steps, where deep Post-LN stalls on the plateau"),
                      factor("depth", "more than 12-24 layers", inside=False,
                             why="18 blocks lies inside the band the seed gives as its threshold, not beyond it"),
                      factor("warm-up", "without the special techniques (warm-up, small lr) it says vanishing needs",
                             inside=False, why="the lab's deep cell has a 50-step warm-up"))),
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), on post-norm",
       statement="In deep networks (more than 12-24 layers) the gradients may vanish, requiring special "
                 "techniques (warm-up, small learning rates).",
       parts=[Part("vanish", "during training, an 18-block Post-LN model's first block gets below a tenth of the "
                   "gradient of its last", "log10(||grad of block 1|| / ||grad of block 18||), mean over every "
                   "diagnostic step of the run (20 to 200), post, 18 blocks, lr 1e-3, warm-up 50, per seed",
                   Direction(-1, -1.0), "vanish = a factor 10 or more below the top of the stack, read in training "
                   "as the statement is (the quick claim this replaces read it at initialisation). Design: 5 seeds, "
                   "per-seed sd 0.2 decades (prior) detect -1.34 with 80% power")])
def seed002_post_vanish(ctx: StudyContext) -> dict[str, Measured]:
    runs = [t for t in where(ctx.trials("new-methods"), NM_POST) if t.status == "completed"]
    v, ids = values(runs, whole_run_grad_ratio)
    return {"vanish": Measured(one_sample(v), ids, {"per_seed": v})}
