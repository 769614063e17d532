"""Training claims of the placements and norms added in 2021-2026 (docs/placements.md), one per
method, decided from the study ``new-methods`` (``study/new_methods_preset.py``): every arm at
the stability map's deep cell (18 blocks, lr 1e-3, warm-up 50, xavier, unclipped, 200 steps at
cpu), where Post-LN stalls on the unigram plateau and Pre-LN trains.

Losses are :func:`~normlab.claims.studies.gain` contrasts (``map_cells.diff``: Welch, and
inconclusive when every run of both arms fails); in-training quantities come from
RUN/diagnostics.jsonl (``normlab.diagnostics.training``): ``grad_norm`` per parameter group
[embeddings, blocks 1..L, final] and ``act_var``, the variance of each stream state x_0..x_L.

Each statement is quoted from its paper's abstract (the passages the lab could retrieve); a
paper that says "outperforms" gets two parts: "not-worse" (at or below within the lab's margin,
what a practitioner needs) and "lower" (strictly, what the paper says), so the claim is
supported only where both are.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from normlab.claims.catalogue.map_cells import below_plateau, diff
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Factor, Regime, factor
from normlab.claims.rules import Direction
from normlab.claims.studies import StudyContext, last_diag, values, where
from normlab.run.dir import RunDir
from normlab.stats.effects import one_sample, welch
from normlab.study.new_methods_preset import NAME as NM
from normlab.study.new_methods_preset import PERI_LN
from normlab.study.outcome import STALL_MARGIN

P, NORM = "model.placement", "model.norm"
EXP = ("study 'new-methods': post, pre, hybridnorm, hybridnorm_star, normformer, subln, sandwich + embed_norm "
       "(Peri-LN), pre + derf, pre + seednorm, keel + rmsnorm at the stability map's deep cell: 18 blocks, d=64, lr 1e-3 constant "
       "after warm-up 50, 200 steps, 5 seeds; diagnostics every 20 steps")
SET = ("xavier init; no gradient clipping; LayerNorm in every placement arm; Derf and SeeDNorm at the inits of "
       "docs/placements.md (SeeDNorm's is the lab's choice, not verified against its paper)")
GAIN = "best val loss minus ln 65 (nats; diverged = 0), {a} minus {b}, 18 blocks, lr 1e-3, warm-up 50"
MARGIN = ("0.05 nats per character is a 5% change in perplexity, the smallest difference that would make a "
          "practitioner choose one method over the other (docs/theory.md, 'Margins')")
STEPS_WHY = "the lab reads 200 steps of 16 x 64 characters, the start of a run; the paper's runs are pre-training runs"


def arm(placement: str | dict[str, Any], norm: str = "layernorm") -> dict[str, Any]:
    """A cell of the study: a placement (a name, or a table with its options) and the norm."""
    return {"study": NM, P: placement, NORM: norm}


PRE, POST = arm("pre"), arm("post")


def _steps(source: str) -> Factor:
    return factor("steps", source, inside=False, why=STEPS_WHY)


def _vs_pre(name: str, a: str, lower_why: str) -> list[Part]:
    """The two parts of "``name`` (arm ``a``) outperforms Pre-LN": not worse within the margin, and lower."""
    q = GAIN.format(a=a, b="pre (LayerNorm)")
    return [Part("not-worse", f"{name} ends at or below Pre-LN, within the lab's margin", q, Direction(-1, 0.05),
                 MARGIN),
            Part("lower", f"{name} ends below Pre-LN", q, Direction(-1), lower_why)]


def _per(ctx: StudyContext, cell: dict[str, Any], fn: Any) -> tuple[list[float], list[str]]:
    """fn of each completed trial of the cell (a stalled run has its diagnostics; a diverged one
    stopped early and a failed one may have none)."""
    trials = where(ctx.trials(NM), {k: v for k, v in cell.items() if k != "study"})
    return values([t for t in trials if t.status == "completed"], fn)


@claim(id="hybridnorm-depth", quick=False, studies=[NM], experiment=EXP, settings=SET,
       regime=Regime((_steps("pre-training runs of up to 1T tokens (1.2B dense, 1B-7B MoE)"),
                      factor("depth", "the paper's dense models (16 layers at 1.2B, a reviewer's count)",
                             why="18 blocks: the lab's deep cell, near the paper's depth"),
                      factor("init", "Megatron-style init; the paper ablates the init and finds Pre-Norm and "
                             "HybridNorm respond differently (a reviewer's reading of its Table 3)", inside=False,
                             why="the lab runs xavier; the comparison with Pre-LN may depend on it"),
                      factor("width", "billion-parameter models", matters=False, why="the argument is about the "
                             "norms' positions, at any width"))),
       source="Zhuo et al. 2025, 'HybridNorm: Towards Stable and Efficient Transformer Training via Hybrid "
              "Normalization', arXiv 2503.04598, abstract",
       statement="While Pre-Norm structures facilitate more stable training owing to their stronger identity path, "
                 "they often lead to suboptimal performance compared to Post-Norm. [...] HybridNorm consistently "
                 "outperforms both Pre-Norm and Post-Norm approaches across multiple benchmarks.",
       parts=[Part("trains", "HybridNorm trains at 18 blocks, where Post-LN stalls",
                   "best val loss minus the unigram cross-entropy of the corpus, hybridnorm, 18 blocks, lr 1e-3, "
                   "warm-up 50, per seed", Direction(-1, -STALL_MARGIN),
                   "trains = below the unigram plateau by more than the stall margin (docs/studies.md, 'Outcomes'); "
                   "stable training is the half of the argument HybridNorm takes from Pre-Norm"),
              Part("vs-post", "HybridNorm ends below Post-LN", GAIN.format(a="hybridnorm", b="post"), Direction(-1),
                   "outperforms Post-Norm = a lower loss; at this cell Post-LN stalls, so this is Pre-Norm's "
                   "stability carried over"),
              *_vs_pre("HybridNorm", "hybridnorm", "outperforms Pre-Norm = a lower loss, by any amount")])
def hybridnorm_depth(ctx: StudyContext) -> dict[str, Measured]:
    return _trains_where_post_stalls(ctx, arm("hybridnorm"))


def _trains_where_post_stalls(ctx: StudyContext, cell: dict[str, Any]) -> dict[str, Measured]:
    """The four parts of a method said to train at depth and to beat Pre-LN: below the plateau,
    against Post-LN, and against Pre-LN (not worse within the margin; lower)."""
    m = below_plateau(ctx, cell)
    m.numbers["stall_margin"] = STALL_MARGIN
    return {"trains": m, "vs-post": diff(ctx, cell, POST), "not-worse": diff(ctx, cell, PRE),
            "lower": diff(ctx, cell, PRE)}


def early_grad_ratio(t: Any) -> float | None:
    """Mean over the diagnostic steps of the first half of the run of log10(||grad block 1|| /
    ||grad block L||), the groups' pre-clip gradient norms (None without diagnostics)."""
    recs = [r for r in RunDir(t.run_dir).diagnostics() if r.get("grad_norm")]
    if not recs:
        return None
    half = max(r["step"] for r in recs) / 2  # diagnostics run to the run's last step
    out = []
    for r in recs:
        g = r["grad_norm"][1:-1]  # [embeddings, blocks 1..L, final]: the blocks
        if r["step"] <= half and len(g) >= 2 and g[0] and g[-1] and g[0] > 0 and g[-1] > 0:
            out.append(math.log10(g[0] / g[-1]))
    return statistics.fmean(out) if out else None


@claim(id="normformer-early-grad", quick=False, studies=[NM], experiment=EXP, settings=SET,
       regime=Regime((_steps("pre-training of 125M to 2.7B-parameter models"),
                      factor("depth", "GPT-3's shapes from 125M to 2.7B parameters (12 to 32 layers)", matters=False,
                             why="the mismatch is between the first and the last layer of any stack"),
                      factor("width", "d = 768 to 2560", matters=False))),
       source="Shleifer, Weston & Ott 2021, 'NormFormer: Improved Transformer Pretraining with Extra "
              "Normalization', arXiv 2110.09456, abstract",
       statement="During pretraining, the Pre-LayerNorm transformer suffers from a gradient magnitude mismatch: "
                 "gradients at early layers are much larger than at later layers. These issues can be alleviated "
                 "by our proposed NormFormer architecture.",
       parts=[Part("pre-mismatch", "in Pre-LN, the first block's gradient is much larger than the last's",
                   "log10(||grad of block 1|| / ||grad of block 18||), mean over the diagnostic steps of the first "
                   "half of training (20 to 100), pre, per seed", Direction(+1, 0.301),
                   "'much larger' = at least twice as large (log10 2 = 0.301), as the quick claim normformer-pre-early "
                   "reads it at initialisation; the paper gives no factor"),
              Part("normformer-less", "NormFormer's mismatch is smaller than Pre-LN's",
                   "that log ratio, normformer minus pre", Direction(-1),
                   "alleviated = a smaller ratio of the first block's gradient to the last's")])
def normformer_early_grad(ctx: StudyContext) -> dict[str, Measured]:
    pre, ip = _per(ctx, PRE, early_grad_ratio)
    nf, inf = _per(ctx, arm("normformer"), early_grad_ratio)
    return {"pre-mismatch": Measured(one_sample(pre), ip, {"per_seed": pre}),
            "normformer-less": Measured(welch(nf, pre), inf + ip, {"normformer": nf, "pre": pre})}


@claim(id="subln-vs-pre", quick=False, studies=[NM], experiment=EXP, settings=SET + "; Sub-LN's gamma = "
       "sqrt(log 2L) on W_V, W_O, W_1, W_2 at init", regime=Regime((
           _steps("pre-training (BERT, GPT) to convergence"),
           factor("init", "Xavier scaled by gamma = sqrt(log 2L) (DeepNet-derived)",
                  why="the lab's subln arm applies torchscale's gamma to a xavier init, as the paper"),
           factor("depth", "not stated in the retrieved text", matters=False,
                  why="Sub-LN's expressivity argument is per sub-layer"))),
       source="Wang et al. 2022, 'Foundation Transformers' (Magneto), arXiv 2210.06423, abstract",
       statement="We propose Sub-LayerNorm for good expressivity, and the initialization strategy theoretically "
                 "derived from DeepNet for stable scaling up. Extensive experiments demonstrate its superior "
                 "performance and better stability than the de facto Transformer variants designed for various "
                 "applications, including language modeling (i.e., BERT, and GPT).",
       parts=_vs_pre("Sub-LN", "subln", "superior performance than GPT's Pre-LN = a lower loss, by any amount"))
def subln_vs_pre(ctx: StudyContext) -> dict[str, Measured]:
    return {"not-worse": diff(ctx, arm("subln"), PRE), "lower": diff(ctx, arm("subln"), PRE)}


def var_slope(t: Any) -> float | None:
    """Least-squares slope of log10 Var(x_l) against l = 1..L at the last diagnostic step (decades
    per block). x_0 is left out: it is the raw embedding in every arm (Peri-LN's embedding norm
    sits inside block 1, docs/placements.md), so only the blocks' outputs are compared."""
    v = ((last_diag(t.run_dir) or {}).get("act_var") or [])[1:]
    if len(v) < 2 or any(x is None or not x > 0 for x in v):
        return None
    return float(np.polyfit(np.arange(1, len(v) + 1), np.log10(v), 1)[0])


@claim(id="peri-ln-variance", quick=False, studies=[NM], experiment=EXP, settings=SET + "; Peri-LN = sandwich "
       "with embed_norm (the embedding normalised before block 1)", regime=Regime((
           _steps("pre-training of 400M to 3.2B-parameter models (the variance is shown growing over training)"),
           factor("depth", "the paper's 400M to 3.2B models", matters=False,
                  why="a per-block growth rate, comparable at any depth"),
           factor("precision", "fp16 / bf16", matters=False, why="the lab measures the variance in float32"))),
       source="Kim et al. 2025, 'Peri-LN: Revisiting Layer Normalization in the Transformer Architecture', "
              "arXiv 2502.02732, abstract (v2)",
       statement="Our in-depth analysis shows that Peri-LN strikes an ideal balance in variance growth—unlike "
                 "Pre-LN and Post-LN, which are prone to vanishing gradients and 'massive activations.' [...] "
                 "Peri-LN consistently achieves more balanced variance growth, steadier gradient flow, and "
                 "convergence stability.",
       parts=[Part("pre-grows", "Pre-LN's hidden-state variance grows with depth",
                   "slope of log10 Var(x_l) against l = 1..18 at the last diagnostic step (decades per block), "
                   "pre, per seed", Direction(+1), "'massive activations' = a variance that rises along the stack"),
              Part("peri-slower", "Peri-LN's variance grows more slowly with depth than Pre-LN's",
                   "that slope, sandwich with embed_norm minus pre", Direction(-1),
                   "more balanced variance growth = a smaller rise per block")])
def peri_ln_variance(ctx: StudyContext) -> dict[str, Measured]:
    pre, ip = _per(ctx, PRE, var_slope)
    peri, ii = _per(ctx, arm(PERI_LN), var_slope)
    return {"pre-grows": Measured(one_sample(pre), ip, {"per_seed": pre}),
            "peri-slower": Measured(welch(peri, pre), ii + ip, {"peri_ln": peri, "pre": pre})}


@claim(id="derf-vs-layernorm", quick=False, studies=[NM], experiment=EXP, settings=SET, regime=Regime((
           _steps("full training in each domain (GPT-2 124M on OpenWebText for language)"),
           factor("data", "ImageNet, speech, DNA; GPT-2 on OpenWebText for language (a summary of the paper "
                  "reads Derf there as matching or surpassing the normalization baselines)", inside=False,
                  why="the paper credits Derf's gains to generalization, which depends on the data regime; the "
                  "lab's is character-level Tiny Shakespeare"),
           factor("depth", "GPT-2 small (12 layers)", matters=False, why="a norm swapped in every position"))),
       source="Chen et al. 2025, 'Stronger Normalization-Free Transformers', arXiv 2512.10938, abstract",
       statement="Derf outperforms LayerNorm, RMSNorm, and DyT across a wide range of domains, including visual "
                 "recognition and generation, speech representation, and DNA sequence modeling. [...] Its "
                 "simplicity and stronger performance make Derf a practical choice for normalization-free "
                 "Transformer architectures.",
       parts=[Part("not-worse", "in Pre-LN, Derf in place of LayerNorm ends at or below LayerNorm's loss, "
                   "within the lab's margin", GAIN.format(a="pre + derf", b="pre + layernorm"),
                   Direction(-1, 0.05), MARGIN + "; the abstract's domains leave language out, and a summary of "
                   "the paper reads its GPT-2 result as matching LayerNorm, so 'a practical choice' is tested, not "
                   "'outperforms'")])
def derf_vs_layernorm(ctx: StudyContext) -> dict[str, Measured]:
    return {"not-worse": diff(ctx, arm("pre", "derf"), PRE)}


@claim(id="seednorm-vs-layernorm", quick=False, studies=[NM], experiment=EXP, settings=SET, regime=Regime((
           _steps("large-language-model pre-training at several sizes"),
           factor("init", "not verified: gamma = 1, alpha = 1, beta = 0 is the lab's reading (no code published)",
                  matters=False, why="docs/placements.md: the paper's init could not be read"),
           factor("depth", "the paper's LLM sizes", matters=False, why="a norm swapped in every position"))),
       source="Cai, Zhu, Liu & Min 2025, 'SeeDNorm: Self-Rescaled Dynamic Normalization', arXiv 2510.22777, "
              "abstract",
       statement="By introducing a minimal number of parameters and with negligible impact on model efficiency, "
                 "SeeDNorm achieves consistently superior performance compared to previously commonly used "
                 "normalization layers such as RMSNorm and LayerNorm, as well as element-wise activation "
                 "alternatives to normalization layers like DyT.",
       parts=[Part("not-worse", "in Pre-LN, SeeDNorm in place of LayerNorm ends at or below LayerNorm's loss, "
                   "within the lab's margin", GAIN.format(a="pre + seednorm", b="pre + layernorm"),
                   Direction(-1, 0.05), MARGIN),
              Part("lower", "... and below it", GAIN.format(a="pre + seednorm", b="pre + layernorm"), Direction(-1),
                   "consistently superior to LayerNorm = a lower loss, by any amount (the lab's arms compare with "
                   "LayerNorm, which the statement names; its RMSNorm base is not an arm)")])
def seednorm_vs_layernorm(ctx: StudyContext) -> dict[str, Measured]:
    s = arm("pre", "seednorm")
    return {"not-worse": diff(ctx, s, PRE), "lower": diff(ctx, s, PRE)}


@claim(id="keel-depth", quick=False, studies=[NM], experiment=EXP + "; keel with RMSNorm, alpha = 2L", settings=SET,
       regime=Regime((_steps("pre-training at depths up to more than 1000 layers"),
                      factor("depth", "deep stacks (the paper: from tens to over 1000 layers)",
                             why="18 blocks: the lab's deep cell, where Post-LN stalls"),
                      factor("init", "no special init ('without requiring specialized initialization')",
                             matters=False, why="the paper's point is that the init does not matter"))),
       source="Chen & Wei 2026, 'Post-LayerNorm Is Back: Stable, ExpressivE, and Deep', arXiv 2601.19895, "
              "abstract",
       statement="We present Keel, a Post-LN Transformer that replaces this residual path with a Highway-style "
                 "connection. [...] Keel trains robustly at depths exceeding 1000 layers and consistently improves "
                 "perplexity and depth-scaling characteristics over Pre-LN.",
       parts=[Part("trains", "Keel trains at 18 blocks, where Post-LN stalls",
                   "best val loss minus the unigram cross-entropy of the corpus, keel (RMSNorm), 18 blocks, lr "
                   "1e-3, warm-up 50, per seed", Direction(-1, -STALL_MARGIN),
                   "trains = below the unigram plateau by more than the stall margin; 'robustly at depth' is "
                   "Keel's answer to Post-LN's failure there"),
              Part("vs-post", "Keel ends below Post-LN", GAIN.format(a="keel", b="post"), Direction(-1),
                   "the highway skip is what separates Keel from the Post-LN that stalls here"),
              *_vs_pre("Keel", "keel", "improves perplexity over Pre-LN = a lower loss, by any amount")])
def keel_depth(ctx: StudyContext) -> dict[str, Measured]:
    return _trains_where_post_stalls(ctx, arm("keel", "rmsnorm"))
