"""Training claims read off in-training monitors (RUN/diagnostics.jsonl, ``diagnostics/training.py``):
warm-up's effect on the sharpness (study ``transfer-sharpness``) and attention-entropy collapse
before Post-LN's stall (study ``transfer-entropy``; ``study/transfer_preset.py``).

Each line of the diagnostics holds ``sharpness`` (the top eigenvalue of the loss Hessian on the
fixed batch, 20 power iterations), ``precond_sharpness`` (Adam's preconditioned one, Cohen et al.
2022) at the sharpness steps, and ``attn_head_entropy`` (each head's mean attention entropy over
its queries, blocks x heads, block-major) at every diagnostic step. A claim reads them as
``normformer-early-grad`` reads its gradient norms: per run, a window of early steps, then a
Welch difference over seeds. The window is fixed here, before the data, and lies inside every
registered stage, so the quantity does not move with the horizon (only the outcomes may).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from normlab.claims.catalogue.transfer_design import ENTROPY_STEP, WINDOW, entropy_design, sharpness_design
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction
from normlab.claims.studies import StudyContext, values, where
from normlab.run.dir import RunDir
from normlab.stats.effects import welch
from normlab.study.horizons import trajectory
from normlab.study.transfer_preset import ENTROPY, SHARPNESS, P, W


def window_mean(t: Any, key: str, lo: int, hi: int) -> float | None:
    """Mean of diagnostic ``key`` (a scalar) over the lines at steps lo..hi (None without values)."""
    got = [r[key] for r in RunDir(t.run_dir).diagnostics() if lo <= r.get("step", -1) <= hi
           and isinstance(r.get(key), (int, float))]
    return statistics.fmean(got) if got else None


def log_sharpness(key: str) -> Any:
    """log10 of the mean of ``key`` over WINDOW (None when absent or not positive)."""
    def fn(t: Any) -> float | None:
        m = window_mean(t, key, *WINDOW)
        return math.log10(m) if m is not None and m > 0 else None
    return fn


def min_entropy(t: Any, upto: int = ENTROPY_STEP) -> float | None:
    """Mean over the diagnostic steps 1..``upto`` of the smallest per-head attention entropy (nats)
    over every block and head (None without values)."""
    got = [min(v for v in r["attn_head_entropy"] if v is not None) for r in RunDir(t.run_dir).diagnostics()
           if 0 < r.get("step", 0) <= upto and any(v is not None for v in r.get("attn_head_entropy") or [])]
    return statistics.fmean(got) if got else None


SHARP_EXP = ("study 'transfer-sharpness': Post-LN and Pre-LN at 6 blocks, d=64, lr 1e-3 (both train there), constant "
             "after warm-up 0 or 50, 6 seeds, 100 steps; diagnostics and the sharpness (20 power iterations on the "
             f"fixed batch) every 10 steps, read over steps {WINDOW[0]} to {WINDOW[1]}; outcomes read at 100 and 200 "
             "steps until they settle")
WHY = ("well-conditioned = a smaller top eigenvalue; read over the warm-up's own steps, where the two arms differ "
       "only by their lr so far. The abstract's other regime (progressive sharpening while the lr is small) "
       "predicts the opposite: the interval's other side would show it")
Q = "log10 of the mean {what} over the diagnostic steps {lo} to {hi}, warm-up 50 minus warm-up 0, {p}, per seed"


def _sharp_parts() -> list[Part]:
    out = []
    for p, name in (("post", "Post-LN"), ("pre", "Pre-LN")):
        for key, what, label in (("sharp", "top Hessian eigenvalue", "sharpness"),
                                 ("precond", "top eigenvalue of Adam's preconditioned Hessian P^-1 H",
                                  "preconditioned sharpness")):
            out.append(Part(f"{p}-{key}", f"with warm-up, {name}'s {label} over the first {WINDOW[1]} steps is lower "
                            "than without", Q.format(what=what, lo=WINDOW[0], hi=WINDOW[1], p=p), Direction(-1), WHY))
    return out


@claim(id="warmup-sharpness", quick=False, studies=[SHARPNESS], experiment=SHARP_EXP, design=sharpness_design,
       settings="xavier init; no gradient clipping; constant lr after linear warm-up; sharpness on the fixed batch, "
                "dropout off, explicit attention",
       regime=Regime((factor("steps", "the warm-up period and after", inside={"cpu": True},
                             why="the window is the warm-up's own steps, inside every stage"),
                      factor("optimizer", "SGD and Adam", why="AdamW (beta2 0.99)"),
                      factor("init", "standard and muP-like initialisations (the regime depends on it)",
                             why="xavier: whichever regime it starts in is the one tested"),
                      factor("warm-up", "linear from 0 to the target lr", why="linear over 50 steps"))),
       source="Kalra & Barkeshli 2024, 'Why Warmup the Learning Rate? Underlying Mechanisms and Improvements', "
              "arXiv 2406.09405, abstract",
       statement="In this paper, we show through systematic experiments using SGD and Adam that the overwhelming "
                 "benefit of warmup arises from allowing the network to tolerate larger eta_trgt by forcing the "
                 "network to more well-conditioned areas of the loss landscape. [...] We uncover different regimes "
                 "of operation during the warmup period, depending on whether training starts off in a progressive "
                 "sharpening or sharpness reduction phase, which in turn depends on the initialization and "
                 "parameterization.",
       parts=_sharp_parts())
def warmup_sharpness(ctx: StudyContext) -> dict[str, Measured]:
    out = {}
    for p in ("post", "pre"):
        for key, stat in (("sharp", "sharpness"), ("precond", "precond_sharpness")):
            runs = [t for t in where(ctx.trials(SHARPNESS), {P: p}) if t.status == "completed"]
            warm, iw = values([t for t in runs if t.params[W] > 0], log_sharpness(stat))
            cold, ic = values([t for t in runs if t.params[W] == 0], log_sharpness(stat))
            out[f"{p}-{key}"] = Measured(welch(warm, cold), iw + ic, {"warmup": warm, "no_warmup": cold,
                                                                      "window": list(WINDOW)})
    return out


ENTROPY_EXP = ("study 'transfer-entropy': Post-LN at 6 blocks, d=64, no warm-up, constant lr 2.25e-3 (its boundary: "
               "some seeds train, some stall), 16 seeds, 200 steps, validation every 20; per-head attention entropy "
               "every 10 steps; outcomes read at 200, 400 and 1000 steps until they settle")


def split(ctx: StudyContext) -> Measured:
    """Early minimum head entropy of the seeds that end stalled minus those that train (Welch);
    inconclusive, and said why, when a seed that trains left the plateau by ENTROPY_STEP (the
    entropy would then not precede the parting)."""
    runs = [t for t in ctx.trials(ENTROPY) if t.status in ("completed", "diverged")]
    got = {t.id: ctx.outcome(t) for t in runs}
    stalled, i_s = values([t for t in runs if got[t.id] == "stalls"], min_entropy)
    trained, i_t = values([t for t in runs if got[t.id] == "trains"], min_entropy)
    left = {t.id: (trajectory(t, ctx.data_ce(t)) or None) for t in runs if got[t.id] == "trains"}
    early = sorted(i for i, tr in left.items()
                   if tr is not None and tr.left_at is not None and tr.left_at <= ENTROPY_STEP)
    counts = {o: sum(v == o for v in got.values()) for o in ("trains", "stalls", "diverged")}
    m = Measured(welch(stalled, trained), i_s + i_t, {"stalled": stalled, "trained": trained, "outcomes": counts,
                                                      "entropy_step": ENTROPY_STEP, "left_early": early})
    if early:
        m.all_failed = (f"{len(early)} seed(s) that train left the plateau by step {ENTROPY_STEP}, where the entropy "
                        "is read: it does not precede their parting, so the part is inconclusive")
    return m


@claim(id="entropy-collapse-stall", quick=False, studies=[ENTROPY], experiment=ENTROPY_EXP, design=entropy_design,
       settings="xavier init; no gradient clipping; constant lr; entropy on the fixed batch's first sequence, "
                "dropout off",
       regime=Regime((factor("steps", "the whole of training (the entropy tracked throughout)", inside={"cpu": True},
                             why=f"the entropy is read by step {ENTROPY_STEP}, the outcome where it settles"),
                      factor("depth", "the paper's ViTs, speech, translation and language models", matters=False,
                             why="a per-head quantity, read at any depth"),
                      factor("optimizer", "Adam and SGD (sigmaReparam lets either train)", matters=False,
                             why="AdamW, as the paper's baselines"))),
       source="Zhai et al. 2023, 'Stabilizing Transformer Training by Preventing Attention Entropy Collapse', "
              "arXiv 2303.06296, abstract",
       statement="We identify a common pattern across different architectures and tasks, where low attention entropy "
                 "is accompanied by high training instability, which can take the form of oscillating loss or "
                 "divergence. We denote the pathologically low attention entropy, corresponding to highly "
                 "concentrated attention scores, as entropy collapse.",
       parts=[Part("precedes", "at an lr on Post-LN's boundary, the seeds that end on the plateau had a lower "
                   "minimum per-head attention entropy early on, before any seed that trains left the plateau",
                   f"smallest per-head attention entropy over every block and head (nats), mean over the diagnostic "
                   f"steps 10 to {ENTROPY_STEP}, seeds that stall at the settled horizon minus seeds that train",
                   Direction(-1),
                   "entropy collapse precedes the failure = lower entropy in the runs that fail, read before the "
                   "runs part (a trained seed leaving the plateau by then makes the part inconclusive); the lab's "
                   "failure is a stall on the unigram plateau, the paper's an oscillating or diverging loss")])
def entropy_collapse_stall(ctx: StudyContext) -> dict[str, Measured]:
    return {"precedes": split(ctx)}
