"""Quick claims from the probe grid at initialisation (Xiong et al. 2020; seeds 001 and 004).

Each ``measure`` receives the :class:`~normlab.claims.measure.QuickData` of one probe grid
(post, pre, deepnorm; xavier init; d = d_ff = 128; L in {2, 4, 8, 16, 32}; 5 seeds) and
returns one per-seed effect per part. Rules are declared with the claim, before the data.
"""

from __future__ import annotations

import math

import numpy as np

from normlab.claims.claim import Measured, Part, claim
from normlab.claims.measure import Needs, QuickData, last_w2, log_spread, per_seed
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction, Within
from normlab.stats.effects import one_sample, paired, slope_per_seed, spearman_per_seed

PROBE = ("probe at init: post, pre, deepnorm; xavier init (Xiong et al.'s setting); d = d_ff = 128, 4 heads; "
         "L in {2, 4, 8, 16, 32}; batch 8 x 64 characters of Tiny Shakespeare; 5 seeds (weights and batch)")
SETTINGS = "xavier init, no training; each seed draws new weights and a new batch; effects over seeds"


# Claims about the model at initialisation: what matters is the init and the depth range.
XIONG_INIT = Regime((
    factor("init", "Xavier, N(0, 1/fan_in) (the theorems' assumption)", why="the probe uses xavier"),
    factor("steps", "at initialisation", why="the probe measures at init"),
    factor("width", "any d (bounds stated in d)", matters=False, why="d = 128; the bounds hold at every width"),
))
INIT_REGIME = Regime((
    factor("init", "not stated", matters=False, why="the probe uses xavier, the init of Xiong et al.'s analysis"),
    factor("steps", "at or near initialisation", why="the probe measures at init"),
))

@claim(id="xiong-thm1", quick=True, regime=XIONG_INIT, needs=Needs({"pre": "all", "post": "all"}), source="Xiong et al. 2020, Theorem 1", experiment=PROBE, settings=SETTINGS,
       statement="The gradient of the last layer's W2 has Frobenius norm O(d sqrt(ln d)) for Post-LN, "
                 "independent of L, and O(d sqrt(ln d / L)) for Pre-LN.", figure="xiong_w2_depth",
       parts=[Part("pre", "Pre-LN's last-layer W2 gradient scales like L^(-1/2)",
                   "slope of log ||dLoss/dW2_L||_F against log L, per seed (pre)", Within(-0.75, -0.25),
                   "the theorem's exponent is -1/2; +-0.25 separates it from 0 (no depth effect) and -1"),
              Part("post", "Post-LN's last-layer W2 gradient does not depend on L",
                   "slope of log ||dLoss/dW2_L||_F against log L, per seed (post)", Within(-0.2, 0.2),
                   "independent of L means exponent 0; +-0.2 is less than half the Pre-LN exponent")])
def xiong_thm1(q: QuickData) -> dict[str, Measured]:
    out = {}
    for p in ("pre", "post"):
        s = slope_per_seed(q.depths, last_w2(q, p))
        out[p] = Measured(one_sample(s), q.cells(p), {"per_seed": s})
    ratio = np.nanmean(last_w2(q, "post"), 0) / np.nanmean(last_w2(q, "pre"), 0)
    out["post"].numbers["post_over_pre"] = dict(zip(q.depths, ratio.round(3).tolist()))
    return out


@claim(id="forward-norms", quick=True, regime=XIONG_INIT, needs=Needs({"post": "all", "pre": "max"}), source="Xiong et al. 2020, Lemmas 1-2", experiment=PROBE,
       settings=SETTINGS, figure="forward_norms",
       statement="Post-LN: the input to the last LN has E||x||^2 about 1.5 d in every layer; Pre-LN: the stream "
                 "grows linearly, (1 + l/2) d <= E||x_l||^2 <= (1 + 3l/2) d.",
       parts=[Part("post", "Post-LN's FFN LayerNorm input has E||x||^2/d about 1.5",
                   "E||x||^2/d at the input of each FFN LayerNorm (post), mean over layers and depths, per seed",
                   Within(1.2, 1.8), "'about 1.5': within 20%"),
              Part("pre", "Pre-LN's stream grows linearly with slope between 1/2 and 3/2 per layer",
                   "slope of E||x_l||^2/d against l = 0..L at the largest L, per seed (pre)", Within(0.5, 1.5),
                   "the lemma's bounds (1 + l/2) and (1 + 3l/2) have slopes 1/2 and 3/2")])
def forward_norms(q: QuickData) -> dict[str, Measured]:
    post = np.concatenate([q.values("post", L, "mean_sq", "ffn", "norm.input") for L in q.depths], 1)
    L = max(q.depths)
    pre = q.values("pre", L, "mean_sq", "stream", "x")
    slopes = slope_per_seed(range(L + 1), pre, log_x=False, log_y=False)
    inside = int(sum((1 + i / 2) <= v <= (1 + 1.5 * i) for i, v in enumerate(np.nanmean(pre, 0)) if i >= 1))
    return {"post": Measured(one_sample(per_seed(np.mean, post)), q.cells("post"),
                             {"range": [float(np.nanmin(post)), float(np.nanmax(post))]}),
            "pre": Measured(one_sample(slopes), q.cells("pre", [L]),
                            {"layers_within_bounds": f"{inside}/{L}"})}


@claim(id="xiong-direction", quick=True, regime=XIONG_INIT, needs=Needs({"post": "ref", "pre": "ref"}), experiment=PROBE, settings=SETTINGS, figure="grad_per_layer",
       source="Xiong et al. 2020, Fig. 3; seed 004 (Chinese survey, 004_d24365e98fdce59d.txt)",
       statement="At init the Post-LN gradient norm of the parameters rises with the layer index (largest next "
                 "to the output); Pre-LN's is much flatter. (Seed 004: 'Post Norm's expected gradient grows "
                 "with the layer index, while Pre Norm's stays almost unchanged.')",
       parts=[Part("post-rises", "Post-LN's W2 gradient rises toward the output",
                   "Spearman(layer, ||dLoss/dW2_l||) at L = 16, per seed (post)", Direction(+1),
                   "a rising profile has a positive rank correlation with the layer index"),
              Part("pre-flatter", "Pre-LN's per-layer W2 gradient is flatter than Post-LN's",
                   "log(max/min over layers of ||dLoss/dW2_l||), pre minus post, paired by seed, L = 16",
                   Direction(-1), "flatter = a smaller spread across layers than Post-LN's")])
def xiong_direction(q: QuickData) -> dict[str, Measured]:
    L = q.ref_depth()
    g = {p: q.values(p, L, "grad_norm", "ffn", "W_2") for p in ("post", "pre")}
    rho = spearman_per_seed(range(1, L + 1), g["post"])
    spread = {p: per_seed(log_spread, m) for p, m in g.items()}
    return {"post-rises": Measured(one_sample(rho), q.cells("post", [L]), {"per_seed": rho}),
            "pre-flatter": Measured(paired(spread["pre"], spread["post"]), q.cells("pre", [L]) + q.cells("post", [L]),
                                    {"max_over_min_pre": float(np.exp(np.mean(spread["pre"]))),
                                     "max_over_min_post": float(np.exp(np.mean(spread["post"]))),
                                     "pre_profile": np.nanmean(g["pre"], 0).round(3).tolist()})}


@claim(id="seed000-grad-scale", quick=True, regime=INIT_REGIME, needs=Needs({"post": "ref", "pre": "ref"}),
       experiment=PROBE, settings=SETTINGS, figure="grad_per_layer",
       source="seed 000 (Korean lecture notes, 000_ca64de5e8bef631c.txt), 'Following the Gradient'",
       statement="This difference (Pre-LN's identity term that bypasses the norm) helps keep the gradient scale "
                 "between the layers more stable at initialisation.",
       parts=[Part("pre-stabler", "at init, the gradient reaching each layer's input varies less from layer to "
                   "layer in Pre-LN than in Post-LN",
                   "log(max/min over l of ||dLoss/dx_l||), x_l the input of block l, pre minus post, paired by seed, "
                   "L = 16", Direction(-1),
                   "the sentence's reason is the stream's Jacobian (the identity term that bypasses the norm), so "
                   "the gradient of the stream itself. Exploration before registering (probe seeds 0-4): Pre-LN "
                   "spread more on this reading (max/min 4.4 against 3.2) and on the per-block parameter gradients "
                   "(2.7 against 1.6, normformer-pre-early's early-layer excess); decided on unseen seeds")])
def seed000_grad_scale(q: QuickData) -> dict[str, Measured]:
    L = q.ref_depth()
    spread = {p: per_seed(log_spread, q.values(p, L, "grad_norm", "stream", "x")) for p in ("post", "pre")}
    return {"pre-stabler": Measured(paired(spread["pre"], spread["post"]), q.cells("pre", [L]) + q.cells("post", [L]),
                                    {"max_over_min_pre": float(np.exp(np.mean(spread["pre"]))),
                                     "max_over_min_post": float(np.exp(np.mean(spread["post"])))})}


@claim(id="seed001-lower-layers", quick=True, regime=INIT_REGIME, needs=Needs({"post": "ref"}),
       experiment=PROBE, settings=SETTINGS, figure="grad_per_layer",
       source="seed 001 (Korean paper summary, 001_362ada3767c69b55.txt)",
       statement="In Post-LN at the start of training the gradients of the lower layers are much larger than "
                 "those of the upper layers: dL/dx_l = O(L - l + 1) dL/dx_L.",
       parts=[Part("params", "Post-LN's parameter gradients fall toward the output (lower layers larger)",
                   "Spearman(layer, ||dLoss/d block parameters||) at L = 16, per seed (post)", Direction(-1),
                   "'lower layers larger' is a negative rank correlation with the layer index"),
              Part("stream", "Post-LN's stream gradient is larger at the input than at the last block",
                   "log(||dL/dx_0|| / ||dL/dx_{L-1}||) at L = 16, x_{L-1} the last block's input, per seed",
                   Direction(+1), "x_l in the formula is the input of layer l, so x_L is normlab's x_{L-1}"),
              Part("linear", "... growing like L - l + 1",
                   "slope of log(||dL/dx_{l-1}|| / ||dL/dx_{L-1}||) against log(L - l + 1), l = 1..L, at L = 16",
                   Within(0.75, 1.25), "O(L - l + 1) hides a constant but not the exponent 1; +-25%")])
def seed001_lower_layers(q: QuickData) -> dict[str, Measured]:
    L = q.ref_depth()
    blk = q.values("post", L, "grad_norm", "block")
    st = q.values("post", L, "grad_norm", "stream", "x")  # columns x_0 .. x_{L-1} (block inputs)
    rel = st / st[:, -1:]
    dist = np.arange(L, 0, -1)  # L - l + 1 for l = 1..L (x_{l-1} is the input of layer l)
    cells = q.cells("post", [L])
    return {"params": Measured(one_sample(spearman_per_seed(range(1, L + 1), blk)), cells),
            "stream": Measured(one_sample(per_seed(lambda r: math.log(r[0]), rel)), cells,
                               {"ratio_first_over_last": float(np.exp(np.mean(np.log(rel[:, 0])))),
                                "formula_L": L}),
            "linear": Measured(one_sample(slope_per_seed(dist, rel)), cells)}


@claim(id="normformer-pre-early", quick=True, regime=INIT_REGIME, needs=Needs({"pre": "ref"}), source="NormFormer (Shleifer et al. 2021)", experiment=PROBE,
       settings=SETTINGS, figure="grad_per_layer",
       statement="In Pre-LN, gradients at early layers are much larger than at later layers.",
       parts=[Part("falls", "Pre-LN's parameter gradient falls with the layer index",
                   "Spearman(layer, ||dLoss/d block parameters||) at L = 16, per seed (pre)", Direction(-1),
                   "larger early = a negative rank correlation with the layer index"),
              Part("much", "... by much: layer 1 at least twice layer L",
                   "log(||grad block 1|| / ||grad block L||) at L = 16, per seed (pre)", Direction(+1, math.log(2)),
                   "'much larger' read as at least twice as large")])
def normformer(q: QuickData) -> dict[str, Measured]:
    L = q.ref_depth()
    blk = q.values("pre", L, "grad_norm", "block")
    cells = q.cells("pre", [L])
    return {"falls": Measured(one_sample(spearman_per_seed(range(1, L + 1), blk)), cells),
            "much": Measured(one_sample(per_seed(lambda r: math.log(r[0] / r[-1]), blk)), cells)}


@claim(id="rank-collapse", quick=True, regime=INIT_REGIME, needs=Needs({"post": "all", "pre": "all"}), source="Noci et al. 2022", experiment=PROBE, settings=SETTINGS,
       figure="rank_collapse",
       statement="The mean pairwise cosine between tokens at the last layer rises toward 1 with depth, faster "
                 "for Post-LN.",
       parts=[Part("post", "Post-LN's token cosine at x_L rises with depth",
                   "slope of the mean pairwise token cosine at x_L against log2 L, per seed (post)", Direction(+1),
                   "rises = positive slope"),
              Part("pre", "Pre-LN's rises too", "the same slope (pre)", Direction(+1), "rises = positive slope"),
              Part("faster", "faster for Post-LN", "token cosine at x_L at the largest L, post minus pre, paired",
                   Direction(+1), "faster toward 1 = higher at the same depth")])
def rank_collapse(q: QuickData) -> dict[str, Measured]:
    tc = {p: np.stack([q.values(p, L, "token_cos", "stream", "x")[:, -1] for L in q.depths], 1)
          for p in ("post", "pre")}
    lg = np.log2(q.depths)
    out = {p: Measured(one_sample(slope_per_seed(lg, tc[p], log_x=False, log_y=False)), q.cells(p),
                       {"seed_mean": dict(zip(q.depths, np.nanmean(tc[p], 0).round(3).tolist()))})
           for p in ("post", "pre")}
    out["faster"] = Measured(paired(tc["post"][:, -1], tc["pre"][:, -1]), q.cells("post", [max(q.depths)]))
    return out



@claim(id="seed001-pre-flat", quick=True, needs=Needs({"pre": "ref"}), experiment=PROBE, settings=SETTINGS,
       regime=INIT_REGIME, source="seed 001 (Korean paper summary, 001_362ada3767c69b55.txt)",
       statement="In Pre-LN the gradient passes directly through the residual path: dL/dx_l ~ dL/dx_L, so its size "
                 "stays almost constant whatever the depth.",
       parts=[Part("flat", "Pre-LN's stream gradient at the input is within a factor 2 of the last block's",
                   "log10(||dL/dx_0|| / ||dL/dx_{L-1}||) at L = 16, per seed (pre)", Within(-0.3, 0.3),
                   "'almost constant' = within a factor 2 (log10 2 = 0.3) from the first block to the last")])
def seed001_pre_flat(q: QuickData) -> dict[str, Measured]:
    L = q.ref_depth()
    st = q.values("pre", L, "grad_norm", "stream", "x")
    return {"flat": Measured(one_sample(per_seed(lambda r: math.log10(r[0] / r[-1]), st)), q.cells("pre", [L]))}
