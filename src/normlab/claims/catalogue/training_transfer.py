"""Training claims about how a critical lr transfers: across width under muP and SP, across depth
under CompleteP, and from AdamW to Muon (``study/transfer_preset.py``).

Each line (a placement at one width, depth, parametrisation and optimiser) is read as the
critical-lr claims read theirs (``training_frontier.py``): where half the seeds train by the
horizon (``study.frontier``), compared as log10 differences with MOVER intervals, in registered
stages until the critical lrs move less than 0.1 decade. Two rules are new here:

* an equivalence, ``Within(-0.15, 0.15)``: the critical lr moves less than 0.15 decades (a factor
  1.41, under one 1.5x step of the lr grids practitioners tune on). Its Holm p is a normal
  approximation from the interval's wider side (``_equivalence``), so p < 0.05 only where the
  interval lies inside the margin (it may stay above 0.05 for an interval just inside);
* a difference of two gaps (Pre-LN minus Post-LN under Muon, minus the same under AdamW),
  MOVER over the four lines (``stats.frontier_gap``).

A censored line (every lr trains, or none) makes its difference a bound: decided by its 95% limit,
with no p-value; an equivalence it can never support. The design analyses are
``transfer_design.py``'s.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from normlab.claims.catalogue.transfer_design import depth_design, muon_design, width_design
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction, Within
from normlab.claims.studies import StudyContext
from normlab.stats.effects import Effect
from normlab.stats.frontier import Z95, LogRatio, log_ratio, ratio_effect
from normlab.stats.frontier_gap import gap_difference
from normlab.study.frontier import Line, frontiers
from normlab.study.transfer_preset import DEPTH, MUON, OPT, PARAM, WIDTH_MUP, WIDTH_SP, D, L, P

MARGIN = 0.15  # decades: what "the critical lr transfers" allows
MARGIN_WHY = ("transfers = moves less than 0.15 decades (a factor 1.41), under one 1.5x step of the lr grids a "
              "practitioner tunes on, so the tuned lr needs no retuning")
CRIT = "log10 of the critical lr (where half the seeds train by the horizon; logistic in log lr) "
DIRECTION_WHY = ("a direction: the 95% interval of the difference (MOVER, from the two frontiers' own intervals) "
                 "decides it")
NORMAL_DF = 1e6  # an equivalence's Holm p: a normal approximation (no degrees of freedom in a MOVER interval)
SET = "xavier init; no gradient clipping; constant lr after warm-up; outcomes read where the critical lrs settle"
Key = Callable[[dict[str, Any]], Any]


def horizon(ctx: StudyContext, study: str) -> int:
    """Where a study is read: its runs' length (at a stage, the stage's horizon: the staged
    context sets it as train.steps), or its ``extend_stalled_to``."""
    spec = ctx.spec(study)
    return int(spec.extend_stalled_to or spec.base["train"]["steps"])


def lines(ctx: StudyContext, study: str, key: Key) -> tuple[dict[Any, Line], dict[Any, list[str]]]:
    """Each line of ``study`` (its trials grouped by ``key`` of their params) with its critical lr
    at the study's horizon, and the trial ids of each."""
    groups: dict[Any, list[Any]] = {}
    for t in ctx.trials(study):
        groups.setdefault(key(t.params), []).append(t)
    ref, h = ctx.reference(study), horizon(ctx, study)
    found = {k: frontiers(ts, ref, h) for k, ts in groups.items()}
    return {k: got[0] for k, got in found.items() if len(got) == 1}, {k: [t.id for t in ts] for k, ts in groups.items()}


def _record(line: Line, label: str) -> dict[str, Any]:
    return {**line.record(), "label": label}  # the label names the line apart from its placement and depth


def _seeds(line: Line) -> int:
    return min(line.frontier.seeds or (0,))


def _measured(r: LogRatio | None, ids: list[str], numbers: dict[str, Any], n_a: int, n_b: int) -> Measured:
    if r is None:
        return Measured(Effect(None, None, None, 0, 0, method="a line has fewer than two lrs with an outcome"), ids,
                        numbers)
    note = "" if r.censored is None else (f"censored ({r.censored}): {r.text()}; a bound with no p-value, decided by "
                                          "its 95% limit, outside the Holm family")
    return Measured(ratio_effect(r, n_a, n_b), ids, {**numbers, "log10_ratio": r.as_dict()}, note=note)


def contrast(ctx: StudyContext, study: str, key: Key, pick: Callable[[list[Any]], tuple[Any, Any]],
             names: tuple[str, str]) -> Measured:
    """log10(critical lr of line a) - log10(critical lr of line b), lines keyed by ``key`` and
    (a, b) picked from the study's planned line keys (its axes at this scale)."""
    got, ids = lines(ctx, study, key)
    a, b = pick(sorted({key(t.params) for t in ctx.spec(study).trials()}))
    la, lb = got.get(a), got.get(b)
    numbers: dict[str, Any] = {"horizon": horizon(ctx, study)}
    if la is None or lb is None:
        return _measured(None, ids.get(a, []) + ids.get(b, []), numbers, 0, 0)
    numbers.update(a=_record(la, names[0]), b=_record(lb, names[1]))
    return _measured(log_ratio(la.frontier, lb.frontier), ids[a] + ids[b], numbers, _seeds(la), _seeds(lb))


def wide_narrow(param: str) -> Callable[[list[Any]], tuple[Any, Any]]:
    """(the widest line of ``param``, the narrowest) among (param, width) keys."""
    def pick(keys: list[Any]) -> tuple[Any, Any]:
        mine = sorted(k for k in keys if k[0] == param)
        return mine[-1], mine[0]
    return pick


def _equivalence(m: Measured) -> Measured:
    """An equivalence's effect: its Holm p from a normal approximation with the interval's wider
    half as 1.96 standard errors (``Within.p`` needs one se): conservative, never p < 0.05 with
    the interval outside the margin."""
    e = m.effect
    if e.estimate is None or e.lo is None or e.hi is None:
        return m
    se = max(e.estimate - e.lo, e.hi - e.estimate) / Z95
    return dataclasses.replace(m, effect=dataclasses.replace(e, se=se, df=NORMAL_DF))


def _regime(source_steps: str, *extra: Any) -> Regime:
    return Regime((
        factor("lr", "the optimal lr (the papers transfer the best lr; the lab reads the largest that trains)",
               matters=False, why="the lr is the axis the critical lr is read from; the stable range is what a "
                                  "transferred lr must stay inside"),
        factor("init", "the parametrisation's own init from the base model", why="xavier, the lab's base model's "
               "init, rescaled by the parametrisation (docs/parametrisation.md)"),
        factor("steps", source_steps, inside={"cpu": True}, why="the lab reads 200, 400 and 1000 steps, resuming "
               "every run, until the critical lrs settle"),
        *extra))


WIDTH_EXP = ("studies 'transfer-width-sp' (Pre-LN, 6 blocks, no warm-up, SP at d=64 and d=256, five lrs 1.5x apart "
             "around each boundary, 6 seeds) and 'transfer-width-mup' (muP with base width 64 at d=64 and d=256, one "
             "grid of seven lrs 1.2x apart around both boundaries, 8 seeds), 4 heads, 200 steps, constant lr; read at "
             "200, 400 and 1000 steps until the critical lrs settle")


def _width_key(p: dict[str, Any]) -> tuple[str, int]:
    return str(p[PARAM]), int(p[D])


@claim(id="mup-width-transfer", quick=False, studies=[WIDTH_SP, WIDTH_MUP], experiment=WIDTH_EXP, settings=SET,
       design=width_design, regime=_regime(
           "pre-training runs (proxies from 40M parameters, targets up to 6.7B)",
           factor("width", "from a small proxy to the full-sized model", why="d=64 to d=256 (4x): a small proxy's "
                  "scale; muP's rules are stated for any width ratio"),
           factor("optimizer", "Adam (muP's Adam rules)", why="AdamW with muP's per-group lrs")),
       source="Yang et al. 2022, 'Tensor Programs V: Tuning Large Neural Networks via Zero-Shot Hyperparameter "
              "Transfer', arXiv 2203.03466, abstract",
       statement="We show that, in the recently discovered Maximal Update Parametrization (muP), many optimal HPs "
                 "remain stable even as model size changes. This leads to a new HP tuning paradigm we call "
                 "muTransfer: parametrize the target model in muP, tune the HP indirectly on a smaller model, and "
                 "zero-shot transfer them to the full-sized model, i.e., without directly tuning the latter at all.",
       parts=[Part("mup", "under muP, Pre-LN's critical lr moves less than 0.15 decades from width 64 to width 256",
                   CRIT + "muP, Pre-LN, 6 blocks, warm-up 0: d=256 minus d=64", Within(-MARGIN, MARGIN),
                   MARGIN_WHY),
              Part("sp", "under SP, Pre-LN's critical lr falls from width 64 to width 256",
                   CRIT + "SP, Pre-LN, 6 blocks, warm-up 0: d=256 minus d=64", Direction(-1),
                   "the contrast muP is built against: under SP Adam's per-coordinate steps move a wider model's "
                   "outputs more (docs/parametrisation.md, the coordinate check), so its stable lr falls; "
                   + DIRECTION_WHY)])
def mup_width_transfer(ctx: StudyContext) -> dict[str, Measured]:
    return {"mup": _equivalence(contrast(ctx, WIDTH_MUP, _width_key, wide_narrow("mup"), ("mup wide", "mup narrow"))),
            "sp": contrast(ctx, WIDTH_SP, _width_key, wide_narrow("sp"), ("sp wide", "sp narrow"))}


@claim(id="completep-depth-transfer", quick=False, studies=[DEPTH], settings=SET, design=depth_design,
       experiment="study 'transfer-depth': Post-LN under CompleteP (alpha 1, base width 64, base depth 6), warm-up "
                  "50, d=64, at 6 and 18 blocks, one grid of seven lrs 1.2x apart around both boundaries, 8 seeds, "
                  "200 steps, constant lr; read at 200, 400 and 1000 steps until the critical lrs settle",
       regime=_regime("pre-training runs (compute-efficiency studies of Pre-LN GPT models)",
                      factor("depth", "from a shallow base model to deep ones", why="6 and 18 blocks (3x)"),
                      factor("optimizer", "AdamW with CompleteP's per-group lrs and epsilons",
                             why="the lab's completep rules (docs/parametrisation.md)")),
       source="Dey et al. 2025, 'Don't be lazy: CompleteP enables compute-efficient deep transformers', "
              "arXiv 2505.01618, abstract",
       statement="Some parameterizations fail to transfer optimal base HPs (such as learning rate) across changes "
                 "in model depth, requiring practitioners to either re-tune these HPs as they scale up (expensive), "
                 "or accept sub-optimal training when re-tuning is prohibitive. [...] Finally, we identify and adopt "
                 "the parameterization we call CompleteP that achieves both depth-wise HP transfer and non-lazy "
                 "learning in all layers.",
       parts=[Part("post", "under CompleteP, Post-LN's critical lr at 18 blocks lies within 0.15 decades of its "
                   "critical lr at 6 blocks", CRIT + "CompleteP, Post-LN, warm-up 50: 18 blocks minus 6 blocks",
                   Within(-MARGIN, MARGIN),
                   "CompleteP scales each residual branch by base_depth / depth and the hidden lrs with it so that "
                   "the lr tuned at the base depth holds at any depth; Post-LN lies outside the paper's Pre-LN "
                   "analysis, so this asks whether the transfer survives the norm after the add. " + MARGIN_WHY)])
def completep_depth_transfer(ctx: StudyContext) -> dict[str, Measured]:
    return {"post": _equivalence(contrast(ctx, DEPTH, lambda p: int(p[L]), lambda ks: (ks[-1], ks[0]),
                                          ("completep deep", "completep shallow")))}  # deepest against shallowest


def _muon_key(p: dict[str, Any]) -> tuple[str, str]:
    return str(p[OPT]), str(p[P])


def gap(ctx: StudyContext) -> Measured:
    """(pre - post under Muon) - (pre - post under AdamW), log10 critical lrs, MOVER over four lines."""
    got, ids = lines(ctx, MUON, _muon_key)
    keys = [("muon", "pre"), ("muon", "post"), ("adamw", "pre"), ("adamw", "post")]
    every = [i for k in keys for i in ids.get(k, [])]
    numbers: dict[str, Any] = {"horizon": horizon(ctx, MUON)}
    if any(k not in got for k in keys):
        return _measured(None, every, numbers, 0, 0)
    ls = [got[k] for k in keys]
    g1, g2 = log_ratio(ls[0].frontier, ls[1].frontier), log_ratio(ls[2].frontier, ls[3].frontier)
    numbers.update({side: _record(x, " ".join(k)) for side, x, k in zip(("a1", "b1", "a2", "b2"), ls, keys)})
    numbers.update(gap_muon=g1.as_dict(), gap_adamw=g2.as_dict())
    return _measured(gap_difference(g1, g2), every, numbers, min(_seeds(ls[0]), _seeds(ls[1])),
                     min(_seeds(ls[2]), _seeds(ls[3])))


@claim(id="muon-placement-gap", quick=False, studies=[MUON], settings=SET, design=muon_design,
       experiment="study 'transfer-muon': Post-LN and Pre-LN at 6 blocks, d=64, no warm-up, under AdamW and under "
                  "Muon (torch.optim.Muon on the hidden matrices, match_rms_adamw scale, muon_lr = lr, weight decay "
                  "0.1; AdamW on the rest), five lrs 1.5x apart around each boundary, 6 seeds, 200 steps, constant "
                  "lr; read at 200, 400 and 1000 steps until the critical lrs settle",
       regime=_regime("pre-training of billion-parameter models",
                      factor("optimizer", "Muon with the update RMS matched to AdamW's (0.2 sqrt(max(A, B)))",
                             why="torch.optim.Muon with match_rms_adamw, the lr shared with AdamW's groups"),
                      factor("depth", "not stated for placement", matters=False,
                             why="6 blocks, the depth where both placements have a located boundary")),
       source="Liu et al. 2025, 'Muon is Scalable for LLM Training', arXiv 2502.16982, abstract (Muon with "
              "matched update RMS works out of the box, without hyper-parameter tuning)",
       statement="We identify two crucial techniques for scaling up Muon: (1) adding weight decay and (2) carefully "
                 "adjusting the per-parameter update scale. These techniques allow Muon to work out-of-the-box on "
                 "large-scale training without the need of hyper-parameter tuning.",
       parts=[Part("pre-above", "under Muon, Pre-LN's critical lr at 6 blocks is above Post-LN's (the placement "
                   "verdict made under AdamW holds)", CRIT + "Muon, 6 blocks, warm-up 0: pre minus post",
                   Direction(+1), "Pre-LN's identity path is what lets it take larger steps under AdamW; matched "
                   "update RMS leaves the residual paths as they are. " + DIRECTION_WHY),
              Part("gap", "Muon narrows the gap between Pre-LN's and Post-LN's critical lrs",
                   "(pre minus post under Muon) minus (pre minus post under AdamW), log10 critical lrs, 6 blocks, "
                   "warm-up 0", Direction(-1),
                   "orthogonalised updates bound each hidden matrix's step by its spectral norm whatever the "
                   "gradient's scale, the scale Post-LN's gradients get wrong at the output end; "
                   "a direction on MOVER's interval over the four frontiers")])
def muon_placement_gap(ctx: StudyContext) -> dict[str, Measured]:
    return {"pre-above": contrast(ctx, MUON, _muon_key, lambda _: (("muon", "pre"), ("muon", "post")),
                                  ("muon pre", "muon post")), "gap": gap(ctx)}
