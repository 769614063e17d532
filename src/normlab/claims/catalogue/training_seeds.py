"""Training claims of seed statements the lab had left unclaimed: dropout inside Pre-LN's
sub-layers, Pre-LN beyond 48 blocks and an extra output norm there, LayerNorm against no norm,
attention under Pre-LN and Post-LN, and Pre-LN without warm-up.

Each reads a study of ``study/seed_presets.py`` (constant lr after warm-up, so that the settling
engine can stage it) or the stability map. Every part's ``why`` gives the smallest effect its
rule detects with 80% power at the planned seeds, from the prior ``claims/design_seeds.py`` states.
The loss quantities are :func:`~normlab.claims.studies.gain` and the gap below the unigram plateau
(``map_cells.below_plateau``); the rates count each run's outcome at the study's last step
(trains, stalls on the unigram plateau, diverged: ``normlab.study.outcome``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from normlab.claims.catalogue.map_cells import LR, MAP, L, P, W, below_plateau, deep, diff, shallow
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.design_seeds import claim_design
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction, Outside, Within
from normlab.claims.studies import StudyContext, last_diag, spike_ratio, values, where
from normlab.stats.effects import rate, rate_diff, welch
from normlab.study.outcome import STALL_MARGIN

DROP, INIT, FINAL = "model.dropout", "model.init", "model.final_norm"
GAIN = "best val loss minus ln 65, the uniform prediction's loss (nats; diverged = 0), "
MARGIN = ("0.05 nats per character is a 5% change in perplexity, the smallest difference that would make a "
          "practitioner choose one recipe over the other (docs/theory.md, 'Margins')")
SEED002 = "seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt)"
STEPS_WHY = "the seed states no horizon; the lab reads its study's last step (a stage the settling engine may extend)"


def _outcomes(ctx: StudyContext, study: str, cells: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The outcomes of the finished runs of ``cells`` (study ``study``) and every run's id."""
    runs = [t for c in cells for t in where(ctx.trials(study), {k: v for k, v in c.items() if k != "study"})]
    got = [ctx.outcome(t) for t in runs]
    return [o for o in got if o is not None], [t.id for t in runs]


def _trains(ctx: StudyContext, study: str, cells: list[dict[str, Any]]) -> Measured:
    """Share of the runs of ``cells`` that train (exact interval)."""
    got, ids = _outcomes(ctx, study, cells)
    counts = {o: got.count(o) for o in ("trains", "stalls", "diverged")}
    return Measured(rate(counts["trains"], len(got)), ids, {"outcomes": counts})


def _trains_diff(ctx: StudyContext, study: str, a: list[dict[str, Any]], b: list[dict[str, Any]]) -> Measured:
    """Share of a's runs that train minus b's (exact unconditional interval)."""
    ga, ia = _outcomes(ctx, study, a)
    gb, ib = _outcomes(ctx, study, b)
    k_a, k_b = ga.count("trains"), gb.count("trains")
    return Measured(rate_diff(k_a, len(ga), k_b, len(gb)), ia + ib,
                    {"a": {o: ga.count(o) for o in ("trains", "stalls", "diverged")},
                     "b": {o: gb.count(o) for o in ("trains", "stalls", "diverged")}})


DROPOUT_EXP = ("study 'pre-dropout' (`study/seed_presets.py`): Pre-LN, 6 blocks d=64, xavier, constant lr 6e-3, no "
               "warm-up, unclipped, 200 steps, model.dropout {0, 0.1} (attention weights, residual branches and "
               "embeddings), 12 seeds: 24 runs")


@claim(id="seed002-dropout", quick=False, design=claim_design,
       studies=["pre-dropout"], experiment=DROPOUT_EXP,
       settings="xavier init; no gradient clipping (a clip would hide a loss of stability)",
       regime=Regime((factor("steps", "not stated", why=STEPS_WHY),
                      factor("lr", "not stated", matters=False, why="6e-3, six times the lab's default: stability is "
                             "tested where it could be lost"),
                      factor("depth", "not stated", matters=False))),
       source=SEED002 + ", connections with other techniques",
       statement="Dropout: pre-norm can be combined with dropout inside the sub-layers without loss of stability.",
       parts=[Part("trains", "with dropout 0.1, Pre-LN without warm-up still trains in most runs",
                   "share of the Pre-LN runs with dropout 0.1 that train by step 200 (neither diverged nor on the "
                   "unigram plateau), lr 6e-3, no warm-up", Direction(+1, 0.5),
                   "stable = the run trains; 'most' = more than half, by the exact interval. Design: 12 runs detect "
                   "a true rate of 0.87 with 80% power (prior: 8 of 8 Pre-LN runs trained at 6e-3)"),
              Part("not-spikier", "dropout does not make Pre-LN's gradient spike more, beyond the margin",
                   "log10(max / median pre-clip gradient norm over training), dropout 0.1 minus dropout 0, per seed "
                   "(a diverged run has no value: the 'trains' part counts it)", Direction(-1, 0.301),
                   "no loss of stability = the largest gradient spike over the run's median grows by less than a "
                   "factor 2 (0.301 decades); unclipped 6-block Pre-LN runs spread by up to 0.25 decades a seed, so a "
                   "smaller margin would be inside their noise. Design (prior SD 0.25): 12 seeds against 12 detect "
                   "-0.00348 decades with 80% power, 79% at no effect")])
def seed002_dropout(ctx: StudyContext) -> dict[str, Measured]:
    def spikes(p: float) -> tuple[list[float], list[str]]:
        return values([t for t in where(ctx.trials("pre-dropout"), {DROP: p}) if t.status == "completed"], spike_ratio)

    (va, ia), (vb, ib) = spikes(0.1), spikes(0.0)
    return {"trains": _trains(ctx, "pre-dropout", [{DROP: 0.1}]),
            "not-spikier": Measured(welch(va, vb), ia + ib, {"a": va, "b": vb})}


DEEP_EXP = ("study 'deep-pre' (`study/seed_presets.py`): Pre-LN with its final norm, Pre-LN without it and seed 002's "
            "Sandwich-Norm formula LN(x + F(LN(x))) (pre_post) at 48 and 96 blocks, d=64, xavier, lr 1e-3 constant "
            "after 50 warm-up steps, unclipped, 400 steps, 4 seeds: 24 runs")
DEEP_SET = "xavier init; no gradient clipping"


def _deep(depth: int, final: bool | None = True, placement: str = "pre") -> dict[str, Any]:
    return {"study": "deep-pre", P: placement, FINAL: final, L: depth}


def _depths(ctx: StudyContext) -> dict[int, int]:
    """The parts' depths (48, 96) -> the study's (the same at cpu; 2 and 4 at smoke, which checks the pipeline)."""
    got = sorted({t.params[L] for t in ctx.trials("deep-pre")})
    return dict(zip((48, 96), got))


@claim(id="seed002-any-depth", quick=False, design=claim_design,
       studies=["deep-pre"], experiment=DEEP_EXP, settings=DEEP_SET,
       regime=Regime((factor("steps", "not stated", why=STEPS_WHY),
                      factor("depth", "any depth; 'hundreds of layers' through the identity path",
                             why="48 and 96 blocks (96 and 192 sub-layers): beyond the 48 layers the seed calls very "
                                 "deep; hundreds of blocks are more than 2 cores train"))),
       source=SEED002 + ", practical advice",
       statement="For new models use pre-norm (Pre-LN). It is a safe choice that works at any depth.",
       parts=[Part(f"trains-{n}", f"Pre-LN (with its final norm) trains at {n} blocks",
                   f"best val loss minus the unigram cross-entropy of the corpus, pre, {n} blocks, lr 1e-3, warm-up "
                   "50, step 400, per seed", Direction(-1, -STALL_MARGIN),
                   "works = below the unigram plateau by more than the stall margin (docs/studies.md, 'Outcomes'). "
                   f"Design (prior: 0.8 nats below at 18 blocks; SD {sd} at {n}): 4 seeds detect {det} nats with 80% "
                   "power")
              for n, sd, det in ((48, 0.05, -0.257), (96, 0.1, -0.363))])
def seed002_any_depth(ctx: StudyContext) -> dict[str, Measured]:
    return {f"trains-{name}": below_plateau(ctx, _deep(n)) for name, n in _depths(ctx).items()}


@claim(id="seed002-deep-output-norm", quick=False, design=claim_design,
       studies=["deep-pre"], experiment=DEEP_EXP, settings=DEEP_SET,
       regime=Regime((factor("steps", "not stated", why=STEPS_WHY),
                      factor("depth", "more than 48 layers", inside=False, parts=("final-norm-48", "sandwich-48"),
                             why="48 blocks is the seed's threshold, not beyond it; 96 blocks is"))),
       source=SEED002 + ", practical advice",
       statement="For very deep models (> 48 layers): consider Sandwich-Norm or pre-norm with an additional "
                 "normalisation at the output.",
       parts=[*[Part(f"final-norm-{n}", f"at {n} blocks, an extra output norm (Pre-LN's final norm) lowers the loss",
                     GAIN + f"pre with final norm minus pre without, {n} blocks, step 400", Direction(-1),
                     "helps = a lower loss; the seed's own code has no final norm. Design (prior: +0.10 to +0.12 nats "
                     f"without it at 18 blocks; SD {sd}): 4 seeds against 4 detect {det} nats with 80% power")
                for n, sd, det in ((48, 0.02, -0.0496), (96, 0.04, -0.0992))],
              *[Part(f"sandwich-{n}", f"at {n} blocks, the seed's Sandwich-Norm ends below plain pre-norm",
                     GAIN + f"pre_post (LN(x + F(LN(x)))) minus pre without final norm, {n} blocks, step 400",
                     Direction(-1), "helps = a lower loss than the pre-norm it is offered against. Design (prior: "
                     f"pre_post stalled at 18 blocks, +0.7 nats; SD {sd}): 4 seeds against 4 detect {det} nats with "
                     "80% power")
                for n, sd, det in ((48, 0.02, -0.0496), (96, 0.04, -0.0992))]])
def seed002_deep_output_norm(ctx: StudyContext) -> dict[str, Measured]:
    out = {}
    for name, n in _depths(ctx).items():
        out[f"final-norm-{name}"] = diff(ctx, _deep(n, True), _deep(n, False))
        out[f"sandwich-{name}"] = diff(ctx, _deep(n, None, "pre_post"), _deep(n, False))
    return out


NONE_EXP = ("study 'norm-vs-none' (`study/seed_presets.py`): Pre-LN against the same blocks with no norm (`none`, no "
            "final norm), 6 blocks d=64, no warm-up, constant lr, unclipped, 200 steps, cells (placement, init, lr): "
            "both at 1e-3 under xavier and under GPT-2's init, both at 6e-3 under GPT-2's init; 10 seeds: 60 runs")


def _none(placement: str, init: str, lr: float = 1e-3) -> dict[str, Any]:
    return {"study": "norm-vs-none", P: placement, INIT: init, LR: lr}


@claim(id="seed002-layernorm", quick=False, design=claim_design,
       studies=["norm-vs-none"], experiment=NONE_EXP,
       settings="xavier and GPT-2 init (N(0, 0.02), residual projections scaled by 1/sqrt(2L)); no clipping",
       regime=Regime((factor("steps", "not stated", why=STEPS_WHY),
                      factor("init", "not stated", matters=False, why="the two inits the lab has"),
                      factor("lr", "not stated", matters=False, why="the default 1e-3 and 6e-3"))),
       source=SEED002 + ", 'Why LayerNorm is needed in a Transformer'",
       statement="It stabilises training, preventing the explosion or vanishing of activations. It reduces the "
                 "dependence on the weight initialisation. It allows higher learning rates.",
       parts=[Part("stabler", "with LayerNorm more runs train than without any norm",
                   "share of runs that train by step 200, pre minus none, lr 1e-3, xavier and GPT-2 init pooled",
                   Direction(+1), "activations that explode end in a diverged run, signals that vanish in a run on "
                   "the plateau: stabler = fewer such runs. Design (pilot: no norm diverged under xavier, trained "
                   "under GPT-2's init; control rate 0.5): 20 runs against 20 detect +0.393 with 80% power"),
              Part("init-none", "without a norm the outcome depends on the init",
                   GAIN + "none, lr 1e-3: xavier minus GPT-2 init", Outside(-0.05, 0.05),
                   "depends = the two inits differ by more than the margin; " + MARGIN + ". Design (prior SD 0.05): "
                   "10 seeds against 10 detect +0.116 nats with 80% power"),
              Part("init-pre", "with LayerNorm it does not", GAIN + "pre, the same cells", Within(-0.05, 0.05),
                   "reduces the dependence = within the margin; " + MARGIN + ". Design (seen: -0.035, SD 0.012): 10 "
                   "seeds against 10 show equivalence with 80% power for a truth within +-0.0343 nats of 0 (76% at "
                   "-0.035)"),
              Part("higher-lr", "at a higher lr, LayerNorm trains where no norm does not",
                   "share of runs that train by step 200 at lr 6e-3 (GPT-2 init, where no norm trains at 1e-3), pre "
                   "minus none", Direction(+1), "allows a higher lr = trains at an lr where the model without norm "
                   "fails; the cell is the pilot's first lr above no norm's last that trained. Design (control rate "
                   "0.2): 10 runs against 10 detect +0.597 with 80% power")])
def seed002_layernorm(ctx: StudyContext) -> dict[str, Measured]:
    inits = ("xavier", "gpt2")
    return {"stabler": _trains_diff(ctx, "norm-vs-none", [_none("pre", i) for i in inits],
                                    [_none("none", i) for i in inits]),
            "init-none": diff(ctx, _none("none", "xavier"), _none("none", "gpt2")),
            "init-pre": diff(ctx, _none("pre", "xavier"), _none("pre", "gpt2")),
            "higher-lr": _trains_diff(ctx, "norm-vs-none", [_none("pre", "gpt2", 6e-3)], [_none("none", "gpt2", 6e-3)])}


def _entropy(t: Any, first: bool = False) -> float | None:
    """Mean over blocks of the mean attention entropy (nats) at the last (or first) diagnostics line."""
    d = last_diag(t.run_dir) or {}
    line = d.get("first") or {} if first else d
    vals = [v for v in line.get("attn_mean_entropy") or [] if v is not None]
    return float(np.mean(vals)) if vals else None


@claim(id="seed002-attention-focus", quick=False, design=claim_design,
       studies=["attention-focus"],
       experiment="study 'attention-focus' (`study/seed_presets.py`): Post-LN and Pre-LN at the stability map's "
                  "shallow cell (6 blocks d=64, xavier, lr 1e-3 constant after 50 warm-up steps, unclipped), 200 "
                  "steps, in-training diagnostics every 20 steps, 6 seeds: 12 runs",
       settings="xavier init; no gradient clipping",
       regime=Regime((factor("steps", "not stated", why=STEPS_WHY),)),
       source=SEED002 + ", effect on attention and FFN",
       statement="Attention: pre-norm normalises the input queries (Q), keys (K) and values (V) through LayerNorm. "
                 "This reduces internal covariate shift and lets attention focus better on the relevant tokens. "
                 "Post-norm normalises after attention, which can 'smear' information.",
       parts=[Part(f"sharper{sfx}", f"Pre-LN's attention is sharper than Post-LN's {when}",
                   f"mean attention entropy (nats), mean over heads, positions and blocks, at the {line} diagnostics "
                   "line, pre minus post, per seed", Direction(-1),
                   "focus better = a lower entropy of the attention weights (which tokens are relevant is not "
                   "measured); 'smears' = a higher one. Design (stated prior SD 0.05 nats): 6 seeds against 6 detect "
                   "-0.0917 nats with 80% power")
              for sfx, when, line in (("", "at the end of training", "last (step 200)"),
                                      ("-early", "early in training", "first (step 20)"))])
def seed002_attention_focus(ctx: StudyContext) -> dict[str, Measured]:
    out = {}
    for sfx, first in (("", False), ("-early", True)):
        def fn(t: Any, first: bool = first) -> float | None:
            return _entropy(t, first) if t.status == "completed" else None

        va, ia = values(where(ctx.trials("attention-focus"), {P: "pre"}), fn)
        vb, ib = values(where(ctx.trials("attention-focus"), {P: "post"}), fn)
        out[f"sharper{sfx}"] = Measured(welch(va, vb), ia + ib, {"pre": va, "post": vb})
    return out


@claim(id="seed001-pre-no-warmup", quick=False, design=claim_design,
       studies=[MAP],
       experiment="study 'stability-map': Pre-LN without warm-up at lr {5e-4, 1e-3, 3e-3} and 6 and 18 blocks, d=64, "
                  "xavier, constant lr, unclipped, 200 steps, 4 seeds: 24 runs",
       settings="xavier init; no gradient clipping",
       regime=Regime((factor("steps", "trained to convergence (WikiText-103)", inside=False,
                             why="'converges' is about the end of training; the lab reads the map's step 200"),
                      factor("lr", "not stated in the seed (Xiong et al.: their language-model lr)", matters=False),
                      factor("depth", "not stated", matters=False, why="6 and 18 blocks, the map's depths"))),
       source="seed 001 (Korean paper summary, 001_362ada3767c69b55.txt), on Xiong et al.'s language modelling",
       statement="Language modelling (WikiText-103): [...] In particular, that training does not diverge and converges "
                 "even without learning-rate warm-up stood out as the key advantage.",
       parts=[Part("converges", "Pre-LN without warm-up trains (neither diverges nor stays on the plateau) in most runs",
                   "share of the map's Pre-LN runs without warm-up (lr 5e-4, 1e-3, 3e-3; 6 and 18 blocks) that train "
                   "by step 200", Direction(+1, 0.5),
                   "converges without diverging = the run leaves the unigram plateau and does not diverge, read at "
                   "the map's horizon; 'most' = more than half, by the exact interval. Design (prior: 48 of 48 seen "
                   "runs trained): 24 runs detect a true rate of 0.797 with 80% power")])
def seed001_pre_no_warmup(ctx: StudyContext) -> dict[str, Measured]:
    depths = (shallow(ctx), deep(ctx))
    return {"converges": _trains(ctx, MAP, [{P: "pre", W: 0, LR: lr, L: n} for lr in (5e-4, 1e-3, 3e-3) for n in depths])}
