"""Training claims of seed 002's pet project, on clipping and on the learning rate, decided from
the studies 'pre-vs-post', 'stability-map' and 'lr-sensitivity'.

Each claim names the studies it reads and the exact cells it compares; every cell and margin
is fixed here and registered before the studies run (docs/theory.md, "Pre-registration").
The loss quantity is :func:`~normlab.claims.studies.gain`: best val loss relative to ln V (a
uniform prediction), a diverged run counted as no progress, so that failures stay in the
comparison instead of dropping out.
"""

from __future__ import annotations

from typing import Any

from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction
from normlab.claims.studies import StudyContext, final_capped, first_eval, gain, grad_norms, values, where
from normlab.run.dir import RunDir
from normlab.stats.effects import one_sample, rate, rate_diff, welch

P, W, LR, QK, L = "model.placement", "optim.warmup_steps", "optim.lr", "model.qk_norm", "model.n_layer"
IMPL = "model.impl"  # pre-vs-post's cells are the lab's arms, never its transformers baseline
GAIN = "best val loss minus ln 65, the uniform prediction's loss (nats; diverged = 0), "


def _diff(ctx: StudyContext, study: str, a: dict[str, Any], b: dict[str, Any], fn: Any = gain) -> Measured:
    """Welch effect of fn over seeds: cell a minus cell b."""
    va, ia = values(where(ctx.trials(study), a), fn)
    vb, ib = values(where(ctx.trials(study), b), fn)
    return Measured(welch(va, vb), ia + ib, {"a": va, "b": vb})


PVP = ("study 'pre-vs-post': post/pre x warm-up {0, 50}, 6 blocks d=128, lr 1e-3 cosine, 500 steps, batch 16, "
       "6 seeds (the lab's cpu-size stand-in for the seed's 10 epochs at lr 3e-4, batch 32)")
PSET = "gpt2 init (the lab's default, as in the seed's PyTorch modules); no gradient clipping, as in the seed's code"
# `--scale seed`: the seed's own hyper-parameters (study preset pre-vs-post at scale seed).
PVP_SEED = {"seed": "study 'pre-vs-post' at scale seed: post/pre x warm-up {0, 490}, 6 blocks d=128, 4 heads, "
                    "context 64, AdamW lr 3e-4 constant, batch 32, 4900 steps (10 epochs of the training "
                    "text), 6 seeds: the seed's own settings"}
PET = Regime((
    factor("lr", "3e-4, constant", inside={"seed": True, "cpu": False, "smoke": False},
           why="the cpu scale runs lr 1e-3 cosine to fit 500 steps; the seed scale runs the seed's own"),
    factor("steps", "10 epochs (4900 steps of 32 x 64 tokens)", inside={"seed": True, "cpu": False, "smoke": False},
           why="'final perplexity' after the seed's 10 epochs; the cpu scale trains 500 steps"),
    factor("depth", "6 blocks", why="6 blocks"),
    factor("width", "d = 128", why="d = 128"),
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
              Part("post-fails", "Post-LN without warm-up most likely does not converge",
                   "share of Post-LN runs without warm-up that do not converge (stall on the unigram plateau or "
                   "diverge)", Direction(+1, 0.5),
                   "'most likely' = more than half the runs (exact interval); 6 seeds is the smallest sample at "
                   "which 6 of 6 can show it")])
def seed002_pet_project(ctx: StudyContext) -> dict[str, Measured]:
    post0 = where(ctx.trials("pre-vs-post"), {P: "post", IMPL: "normlab", W: 0})
    got = [ctx.outcome(t) for t in post0]
    fails = sum(o in ("stalls", "diverged") for o in got)
    return {"faster": _diff(ctx, "pre-vs-post", {P: "pre", IMPL: "normlab", W: 0}, {P: "post", IMPL: "normlab", W: 0}, first_eval),
            "lower": _diff(ctx, "pre-vs-post", {P: "pre", IMPL: "normlab", W: 0}, {P: "post", IMPL: "normlab", W: 0}),
            "post-fails": Measured(rate(fails, len(got)), [t.id for t in post0], {"outcomes": got})}


def _diverged(ctx: StudyContext, p: str) -> tuple[int, int, list[str]]:
    runs = [t for t in where(ctx.trials("stability-map"), {P: p}) if t.status in ("completed", "diverged")]
    return sum(t.status == "diverged" for t in runs), len(runs), [t.id for t in runs]


def _spike(t: Any) -> float | None:
    """log10 of the largest pre-clip gradient norm over its median (step > 0): an explosion is a spike."""
    import math
    import statistics

    g = grad_norms(t)
    return math.log10(max(g) / statistics.median(g)) if g and statistics.median(g) > 0 else None


@claim(id="seed002-clipping", quick=False, studies=["stability-map", "pre-vs-post"], settings="no gradient clipping in any arm",
       experiment="every unclipped run of 'stability-map' (lr x depth x warm-up x 5 seeds per placement); the "
                  "gradient norms of 'pre-vs-post'",
       regime=Regime((factor("clipping", "'needs clipping': a run that fails without it", why="the lab reads "
                             "whether unclipped runs diverge, not how often a clip would act"),)),
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt)",
       statement="Gradient clipping: pre-norm needs clipping less often, because its gradients do not explode.",
       parts=[Part("rare", "unclipped, Pre-LN rarely diverges",
                   "share of the map's unclipped Pre-LN runs that diverge", Direction(-1, 0.1),
                   "'rarely' = fewer than one run in ten"),
              Part("vs-post", "... less often than Post-LN", "that share, pre minus post", Direction(-1),
                   "less often = a smaller share"),
              Part("no-spikes", "Pre-LN's gradient norm spikes less than Post-LN's",
                   "log10(max / median pre-clip gradient norm over training), pre minus post, no warm-up, per seed",
                   Direction(-1), "'do not explode' = no spike far above the run's typical norm")])
def seed002_clipping(ctx: StudyContext) -> dict[str, Measured]:
    kp, np_, ip = _diverged(ctx, "pre")
    kq, nq, iq = _diverged(ctx, "post")
    return {"rare": Measured(rate(kp, np_), ip), "vs-post": Measured(rate_diff(kp, np_, kq, nq), ip + iq),
            "no-spikes": _diff(ctx, "pre-vs-post", {P: "pre", IMPL: "normlab", W: 0}, {P: "post", IMPL: "normlab", W: 0}, _spike)}


def _grad_ratio(t: Any, step: int) -> float | None:
    """log10(first block's / last block's pre-clip gradient norm) at the diagnostic step nearest ``step``."""
    import math

    if t.status != "completed":
        return None
    recs = [r for r in RunDir(t.run_dir).diagnostics() if r.get("grad_norm")]
    if not recs:
        return None
    r = min(recs, key=lambda x: abs(x["step"] - step))
    g = r["grad_norm"][1:-1]  # [embeddings, blocks 1..L, final]: the blocks
    return math.log10(g[0] / g[-1]) if g and g[0] and g[-1] else None


@claim(id="seed001-early-gradients", quick=False, studies=["pre-vs-post"], experiment=PVP + "; diagnostics every "
       "100 steps", experiments=PVP_SEED, settings=PSET,
       regime=Regime((factor("steps", "about 1K steps", inside={"seed": True, "cpu": False, "smoke": False},
                             why="the cpu scale ends at step 500; the seed scale reads step 1000"),
                      factor("depth", "not stated (Xiong et al.'s 6 to 12 layers)", matters=False))),
       source="seed 001 (Korean paper summary, 001_362ada3767c69b55.txt), on Xiong et al.",
       statement="The paper visualised per-layer gradient magnitudes early in training (1K steps): in Post-LN the "
                 "lower layers' gradients are tens of times larger; in Pre-LN this is not observed.",
       parts=[Part("post", "Post-LN's lowest block gets tens of times the gradient of its last",
                   "log10(gradient norm of block 1 / block 6) at the diagnostic step nearest 1000, post, warm-up "
                   "50, per seed", Direction(+1, 1.0), "'tens of times' = more than 10x"),
              Part("pre", "Pre-LN's does not", "the same, pre", Direction(-1, 1.0), "not observed = below 10x")])
def seed001_early_gradients(ctx: StudyContext) -> dict[str, Measured]:
    w = max(t.params[W] for t in ctx.trials("pre-vs-post"))
    out = {}
    for p in ("post", "pre"):
        v, ids = values(where(ctx.trials("pre-vs-post"), {P: p, IMPL: "normlab", W: w}), lambda t: _grad_ratio(t, 1000))
        out[p] = Measured(one_sample(v), ids, {"per_seed": v})
    return out


LRS = ("study 'lr-sensitivity': lr {3e-4, 1e-3, 3e-3, 1e-2, 3e-2} x (pre, pre + QK-norm, post), 6 blocks d=128, "
       "200 steps, warm-up 20, cosine, 5 seeds, diagnostics every 50 steps")
LSET = "gpt2 init; gradient clipping at 1.0, as in Wortsman et al.'s setup"


@claim(id="seed002-higher-lr", quick=False, studies=["lr-sensitivity"], experiment=LRS, settings=LSET,
       regime=Regime((factor("lr", "3e-4 instead of 1e-4", inside=False, why="the lab compares at 1e-2, where "
                             "the difference shows at 200 steps; 3e-4 and 1e-4 are both gentle here"),)),
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt)",
       statement="Trained from scratch, pre-norm allows a higher learning rate (for example 3e-4 instead of 1e-4).",
       parts=[Part("at-1e-2", "at a high learning rate (1e-2) Pre-LN ends lower than Post-LN",
                   "min(final val loss, loss at init), pre minus post, lr 1e-2, no QK-norm", Direction(-1),
                   "allows a higher lr = still trains where the other does worse; 1e-2 is 10x the lab's default")])
def seed002_higher_lr(ctx: StudyContext) -> dict[str, Measured]:
    return {"at-1e-2": _diff(ctx, "lr-sensitivity", {P: "pre", QK: None, LR: 1e-2}, {P: "post", QK: None, LR: 1e-2},
                             final_capped)}
