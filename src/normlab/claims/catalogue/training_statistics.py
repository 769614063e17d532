"""Training claims decided from in-training statistics: RUN/diagnostics.jsonl
(``normlab.diagnostics.training``: log Z, attention logits, per-layer angles and max |x|,
both of ResiDual's streams) and layer deletion on the final checkpoints. What each reads off
one trial is in ``trial_readings.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from normlab.claims.catalogue.training_warmup import seed002_init_sensitive
from normlab.claims.catalogue.trial_readings import (
    deep_angle,
    deep_minus_shallow,
    diag_list,
    exploded,
    logit_growth,
    logz,
    max_abs,
)
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction
from normlab.claims.studies import StudyContext, final_capped, last_diag, values, welch_cells, where
from normlab.diagnostics.sensitivity import sensitivity
from normlab.stats.effects import one_sample, paired, rate_diff, welch

P, QK, LR = "model.placement", "model.qk_norm", "optim.lr"


def _per(ctx: StudyContext, study: str, params: dict[str, Any], fn: Any) -> tuple[list[float], list[str]]:
    return values([t for t in where(ctx.trials(study), params) if t.run_dir.is_dir()], fn)


def _dist(x: float | None, y: float | None = 0.0) -> float | None:
    """|x - y|; None when either is missing (a trial without diagnostics)."""
    return None if x is None or y is None else abs(x - y)


@claim(id="zloss-logz", quick=False, studies=["zloss"], source="PaLM (Chowdhery et al. 2022); Wortsman et al. 2023",
       experiment="study 'zloss': Pre-LN 6 blocks d=128, constant lr 3e-3, no warm-up, 300 steps, z_loss {0, 1e-4}, "
                  "5 seeds, diagnostics every 30 steps", settings="gpt2 init; gradient clipping at 1.0",
       regime=Regime((factor("steps", "whole pre-training runs (PaLM: 10^5+ steps)", inside=False,
                             parts=("drifts", "near-0"), why="log Z drifts over long training; the lab reads "
                             "300 steps, an early-training measurement"),
                      factor("lr", "PaLM's schedule; Wortsman et al. raise the lr to provoke the drift",
                             matters=False))),
       statement="Without z-loss the mean log Z of the output softmax drifts; with z-loss (1e-4) it stays near 0.",
       parts=[Part("drifts", "without z-loss, mean log Z moves during training",
                   "|late - early mean log Z| (last vs first quarter of diagnostic steps), z_loss 0, per seed",
                   Direction(+1, 0.5), "drifts = moves by more than half a nat"),
              Part("near-0", "with z-loss, |mean log Z| late in training is near 0",
                   "|mean log Z| over the last quarter of diagnostic steps, z_loss 1e-4, per seed",
                   Direction(-1, 1.0), "near 0 = within one nat (it starts at ln 65 = 4.17)"),
              Part("lower", "with z-loss it is closer to 0 than without",
                   "|mean log Z| late, z_loss 0 minus z_loss 1e-4", Direction(+1), "z-loss pulls log Z to 0")])
def zloss_logz(ctx: StudyContext) -> dict[str, Measured]:
    drift, ids = _per(ctx, "zloss", {"optim.z_loss": 0.0},
                      lambda t: _dist(logz(t), logz(t, tail=False)))
    with_z, iw = _per(ctx, "zloss", {"optim.z_loss": 1e-4}, lambda t: _dist(logz(t)))
    without, io = _per(ctx, "zloss", {"optim.z_loss": 0.0}, lambda t: _dist(logz(t)))
    return {"drifts": Measured(one_sample(drift), ids), "near-0": Measured(one_sample(with_z), iw),
            "lower": Measured(welch(without, with_z), io + iw)}


WORTSMAN = Regime((
    factor("lr", "a log grid from 1e-4 to 1 (AdamW, warm-up, cosine decay)", why="the lab's grid spans 3e-4 to "
           "3e-2, the part of theirs where small models go from training to failing"),
    factor("steps", "1e4 steps and more", inside=False, why="attention-logit growth develops over training; the "
           "lab's 200 steps show its start"),
    factor("clipping", "global norm 1.0", why="the same"),
    factor("width", "d = 64 to 1024+ (the point is that small models show it)", matters=False),
    factor("precision", "bfloat16 mixed", matters=False, why="the instabilities they study occur in float32 too"),
))


def _sensitivity(ctx: StudyContext, placement: str, qk: str | None) -> dict[int, float]:
    """Wortsman et al.'s LR sensitivity of each seed's sweep: mean over lrs of
    min(final loss, loss at init) minus the sweep's best."""
    by_seed: dict[int, list[float]] = {}
    for t in where(ctx.trials("lr-sensitivity"), {P: placement, QK: qk}):
        v = final_capped(t)
        if v is not None:
            by_seed.setdefault(t.params["seed"], []).append(v)
    lrs = len({t.params[LR] for t in ctx.trials("lr-sensitivity")})
    return {s: sensitivity(v) for s, v in sorted(by_seed.items()) if len(v) == lrs}  # v capped already


@claim(id="lr-sensitivity", quick=False, studies=["lr-sensitivity"], source="Wortsman et al. 2023, 'Small-scale proxies for large-scale "
       "Transformer training instabilities'; seed 000's check question on q/k logits",
       experiment="study 'lr-sensitivity': lr {3e-4 .. 3e-2} x (pre, pre + QK-norm, post), 6 blocks, 200 steps, "
                  "5 seeds; attention logits from in-training diagnostics", settings="gpt2 init; gradient clipping at 1.0",
       regime=WORTSMAN,
       statement="QK-norm lowers LR sensitivity; attention logits grow at high learning rates without it "
                 "(Pre-LN alone does not stop q/k logit growth).",
       parts=[Part("qk-lowers", "QK-norm lowers Pre-LN's LR sensitivity",
                   "LR sensitivity of each seed's sweep, Pre-LN minus Pre-LN + QK-norm, paired by seed",
                   Direction(+1), "lowers = the sweep without QK-norm is more sensitive"),
              Part("logits-grow", "without QK-norm, Pre-LN's attention logits grow at a high lr",
                   "log(max attention logit, last / first diagnostic step), Pre-LN, lr 1e-2, per seed",
                   Direction(+1), "grow = end above where they started; 1e-2 is 10x the default lr"),
              Part("qk-stops", "... more than with QK-norm", "that log growth, without minus with QK-norm, lr 1e-2",
                   Direction(+1), "QK-norm bounds q.k by construction up to its gains")])
def lr_sensitivity(ctx: StudyContext) -> dict[str, Measured]:
    a, b = _sensitivity(ctx, "pre", None), _sensitivity(ctx, "pre", "layernorm")
    seeds = sorted(set(a) & set(b))
    grow, ig = _per(ctx, "lr-sensitivity", {P: "pre", QK: None, LR: 1e-2}, logit_growth)
    grow_qk, iq = _per(ctx, "lr-sensitivity", {P: "pre", QK: "layernorm", LR: 1e-2}, logit_growth)
    return {"qk-lowers": Measured(paired([a[s] for s in seeds], [b[s] for s in seeds]),
                                  [t.id for t in where(ctx.trials("lr-sensitivity"), {P: "pre"})],
                                  {"pre": a, "pre_qk": b, "post": _sensitivity(ctx, "post", None)}),
            "logits-grow": Measured(one_sample(grow), ig), "qk-stops": Measured(welch(grow, grow_qk), ig + iq)}


LRS_EXP = ("study 'lr-sensitivity': lr {3e-4 .. 3e-2} x (pre, pre + QK-norm, post), 6 blocks, 200 steps, 5 seeds; "
           "the init part: seed002-init-sensitive's cells (stability-map and recipe-variants, post, 6 blocks, lr 1e-3, "
           "warm-up 0, xavier and gpt2)")
_INIT_POST = next(p for p in seed002_init_sensitive.parts if p.id == "post")
_WORTSMAN_PARTS = ("explode", "post-more", "converges")
# Wortsman et al.'s regime for the lr-sweep parts; the init part is seed002-init-sensitive's own
# quantity, scoped by that claim's factors, so the one effect carries one scoping in both claims.
LR_SENSITIVE = Regime(tuple(dataclasses.replace(f, parts=_WORTSMAN_PARTS) for f in WORTSMAN.factors)
                      + tuple(dataclasses.replace(f, parts=("init",))
                              for f in (seed002_init_sensitive.regime or Regime(())).factors))
@claim(id="seed004-lr-sensitive", quick=False, studies=["lr-sensitivity", "stability-map", "recipe-variants"],
       experiment=LRS_EXP, settings="gpt2 init, gradient clipping at 1.0 (lr-sensitivity); the init part: xavier "
       "and gpt2, unclipped", regime=LR_SENSITIVE,
       source="seed 004 (Chinese survey, 004_d24365e98fdce59d.txt), closing comparison",
       statement="Post Norm trains unstably: its gradients explode easily, it is sensitive to the learning rate "
                 "and to the weight initialisation, and it converges with difficulty.",
       parts=[Part("explode", "over the lr grid, Post-LN's gradients explode in more runs than Pre-LN's",
                   "share of the runs over every lr of the grid (5 lrs x 5 seeds, no QK-norm) that diverged or "
                   "logged a pre-clip gradient norm 10x their median, post minus pre (difference of rates)",
                   Direction(+1), "'explode easily' = in more of the settings tried, each placement its own control "
                   "at the same lrs and seeds; an event per run, so a run on the plateau counts as what it is (no "
                   "explosion unless its gradients spiked) instead of entering a spike-size contrast against runs "
                   "that train (the earlier reading, at lr 1e-2 alone, where Post-LN stalls). Design: 25 runs a "
                   "side, Pre-LN's rate 0.05 (prior; 1 of its 5 runs at lr 1e-2 in the confirm-2b run), detect a "
                   "difference of +0.33 with 80% power (exact)"),
              Part("post-more", "Post-LN's LR sensitivity is higher than Pre-LN's",
                   "Wortsman et al.'s LR sensitivity of each seed's sweep (mean over lrs of min(final loss, loss at "
                   "init) minus the sweep's best), post minus pre", Direction(+1),
                   "more sensitive = a larger average loss excess over the lr grid"),
              Part("init", "Post-LN is sensitive to the weight initialisation: its outcome differs between xavier "
                   "and GPT-2's init", _INIT_POST.quantity, _INIT_POST.rule,
                   "the sentence's clause 'sensitive to the weight initialisation', read as seed002-init-sensitive's "
                   "part post reads seed 002's (the same cells, quantity, rule and scoping: one effect). Design: 4 "
                   "seeds a side, sd 0.01 (xavier) and 0.19 (gpt2; the exploratory run, one slow seed) detect a "
                   "difference of 0.45 beyond the margin with 80% power"),
              Part("converges", "Post-LN converges with more difficulty: it ends higher at the default lr",
                   "min(final val loss, loss at init), post minus pre, lr 1e-3, no QK-norm, per seed", Direction(+1),
                   "'converges with difficulty' read as a higher loss after the same 200 steps")])
def seed004_lr_sensitive(ctx: StudyContext) -> dict[str, Measured]:
    a, b = _sensitivity(ctx, "post", None), _sensitivity(ctx, "pre", None)
    post, pre = {P: "post", QK: None}, {P: "pre", QK: None}
    boom = {p: values(where(ctx.trials("lr-sensitivity"), {P: p, QK: None}),
                      lambda t: None if (e := exploded(t)) is None else float(e)) for p in ("post", "pre")}
    (kp, ip), (kq, iq) = boom["post"], boom["pre"]
    return {"explode": Measured(rate_diff(int(sum(kp)), len(kp), int(sum(kq)), len(kq)), ip + iq,
                                {"exploded": {"post": f"{int(sum(kp))}/{len(kp)}", "pre": f"{int(sum(kq))}/{len(kq)}"}}),
            "post-more": Measured(welch(list(a.values()), list(b.values())),
                                  [t.id for t in where(ctx.trials("lr-sensitivity"), {QK: None})], {"post": a, "pre": b}),
            "init": seed002_init_sensitive.measure(ctx)["post"],
            "converges": welch_cells(ctx, "lr-sensitivity", {**post, LR: 1e-3}, {**pre, LR: 1e-3}, final_capped)}


def _deletion(ctx: StudyContext, t: Any) -> float | None:
    """Deep-half minus shallow-half mean loss increase when one block is deleted (final checkpoint)."""
    if t.status != "completed":
        return None
    res = ctx.analysis(t)  # written under the claims output: the store being read stays as it was
    return deep_minus_shallow([x - res["val_loss"] for x in res["deletion_loss"]])


COL = ("study 'collapse': pre/resi_dual/lns/sandwich, 24 blocks d=64, 300 steps, lr 1e-3 cosine, warm-up 30, "
       "5 seeds, diagnostics every 60 steps")
COLLAPSE = Regime((
    factor("depth", "deep stacks (Sun et al.: up to 70B-parameter LLMs of 32 to 80 layers)", inside=False,
           why="24 blocks is the deepest the run affords"),
    factor("steps", "pre-trained models", inside=False, why="collapse is reported in trained LLMs; the lab reads "
           "300 steps"),
))
SANDWICH = Regime((
    factor("steps", "long training (CogView: instability after thousands of steps; Peri-LN: pre-training)",
           inside=False, why="max |x| grows over long training; the lab reads 300 steps"),
    factor("precision", "fp16 / bf16", matters=False, why="the lab measures the value in float32; overflow is "
           "read against 65504"),
))


@claim(id="pre-collapse", quick=False, studies=["collapse"], experiment=COL, settings="gpt2 init; gradient clipping at 1.0",
       regime=COLLAPSE,
       source="Liu et al. 2020; Sun et al. 2025 ('curse of depth'); Xie et al. 2023 (ResiDual); seed 004",
       statement="In Pre-LN the deep layers become similar (cosine(x_l, x_{l+1}) near 1, small angular distance; "
                 "deleting a deep layer costs little). ResiDual and LayerNorm Scaling avoid it.",
       parts=[Part("deep-similar", "Pre-LN's deep blocks change the stream less than its shallow ones",
                   "mean angular distance arccos(cos)/pi of block input/output, deep half minus shallow half, last "
                   "diagnostic step, per seed (pre)", Direction(-1), "collapse = deep layers closer to identity"),
              Part("deletion", "deleting a deep Pre-LN block costs less than deleting a shallow one",
                   "mean loss increase when one block is deleted, deep half minus shallow half (pre)", Direction(-1),
                   "similar deep layers are redundant"),
              Part("resi_dual-x", "ResiDual's Post-LN stream x avoids it",
                   "deep-half angular distance, resi_dual's x stream minus pre's", Direction(+1),
                   "avoids = its deep blocks still move their stream more"),
              Part("resi_dual-d", "... and so does its un-normalised stream d",
                   "deep-half angular distance, resi_dual's d stream minus pre's", Direction(+1),
                   "the dual stream is the Pre-LN-like one: collapse would show there"),
              Part("lns", "LayerNorm Scaling avoids it",
                   "the deletion quantity above (deep half minus shallow half), lns minus pre", Direction(+1),
                   "avoids = deleting its deep blocks costs relatively more than Pre-LN's; not an angle, since "
                   "LNS scales deep branches by 1/sqrt(l) by design, which a similarity measure would penalise by "
                   "construction")])
def pre_collapse(ctx: StudyContext) -> dict[str, Measured]:
    def halves(t: Any) -> float | None:
        vals = diag_list(last_diag(t.run_dir), "angular_distance")
        return deep_minus_shallow(vals) if vals else None

    pre, ip = _per(ctx, "collapse", {P: "pre"}, deep_angle)
    out = {"deep-similar": Measured(one_sample(_per(ctx, "collapse", {P: "pre"}, halves)[0]), ip),
           "deletion": Measured(one_sample(_per(ctx, "collapse", {P: "pre"}, lambda t: _deletion(ctx, t))[0]), ip)}
    for part, p, key in (("resi_dual-x", "resi_dual", "angular_distance"),
                         ("resi_dual-d", "resi_dual", "angular_distance_aux")):
        v, i = _per(ctx, "collapse", {P: p}, lambda t, k=key: deep_angle(t, k))
        out[part] = Measured(welch(v, pre), i + ip, {p: v, "pre": pre})
    lns, il = _per(ctx, "collapse", {P: "lns"}, lambda t: _deletion(ctx, t))
    pre_del, _ = _per(ctx, "collapse", {P: "pre"}, lambda t: _deletion(ctx, t))
    out["lns"] = Measured(welch(lns, pre_del), il + ip, {"lns": lns, "pre": pre_del})
    return out


@claim(id="sandwich-max-abs", quick=False, studies=["collapse"], experiment=COL, settings="gpt2 init; gradient clipping at 1.0",
       regime=SANDWICH,
       source="CogView (Ding et al. 2021); Peri-LN (Kim et al. 2025)",
       statement="Sandwich/Peri-LN keeps the residual stream's max |x| bounded where Pre-LN's grows "
                 "(fp16 overflow risk at 65504).",
       parts=[Part("lower", "Sandwich's max |x| ends below Pre-LN's",
                   "log10 max over layers of max |x_l| at the last diagnostic step, sandwich minus pre",
                   Direction(-1), "bounded where Pre-LN's grows = lower after training"),
              Part("growth", "Sandwich's max |x| grows less during training",
                   "log10(last / first diagnostic max |x|), sandwich minus pre", Direction(-1),
                   "'grows' is about the change over training")])
def sandwich_max_abs(ctx: StudyContext) -> dict[str, Measured]:
    out = {}
    for i, part in enumerate(("lower", "growth")):
        s, is_ = _per(ctx, "collapse", {P: "sandwich"}, lambda t, i=i: (max_abs(t) or (None, None))[i])
        p, ip = _per(ctx, "collapse", {P: "pre"}, lambda t, i=i: (max_abs(t) or (None, None))[i])
        out[part] = Measured(welch(s, p), is_ + ip, {"sandwich": s, "pre": p})
    return out
