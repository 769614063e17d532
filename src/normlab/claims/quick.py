"""The quick claims: decidable at initialisation (REFERENCE.md section 4, claims 1-6; section 5).

Each ``decide`` receives the :class:`~normlab.claims.measure.QuickData` of one probe grid.
"""

from __future__ import annotations

import math

import numpy as np

from normlab.claims.catalogue import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, Verdict, claim, three_way
from normlab.claims.measure import QuickData, slope_per_layer

PROBE = ("probe at init: post, pre, deepnorm; xavier init; d=128, d_ff=128, 4 heads; "
         "L in {2,4,8,16,32}; batch 8 x 64 chars of Tiny Shakespeare; seeds 0..S-1")


def _block_spear(q: QuickData, p: str) -> dict[int, float]:
    """Spearman(layer, seed-mean block gradient norm) per depth L >= 4 (the probe's grad_spearman,
    issue 5: every parameter of the block, not only W2)."""
    return {int(L): float(v) for L, v in q.fits["grad_spearman"].get(p, {}).items() if v is not None and int(L) >= 4}


def _ref_depth(q: QuickData) -> int:
    """L = 16, the depth issue 5's direction thresholds were stated at (else the largest below it)."""
    ds = [L for L in q.probe["depths"] if L <= 16]
    return max(ds) if ds else max(q.probe["depths"])


@claim(id="xiong-thm1", quick=True, source="Xiong et al. 2020, Theorem 1",
       statement="The gradient of the last layer's W2 has Frobenius norm O(d sqrt(ln d)) for Post-LN, "
                 "independent of L, and O(d sqrt(ln d / L)) for Pre-LN.",
       experiment=PROBE, quantity="||dLoss/dW2_L||_F against L: log-log slope (pooled over seeds) and Post/Pre ratio",
       rule="issue 5's thresholds (theory: slopes 0 and -0.5): supported if slope_pre < -0.15, slope_post - "
            "slope_pre > 0.3 and the Post/Pre ratio at the largest L is > 3x the one at the smallest; not "
            "supported if slope_pre >= 0 or slope_post - slope_pre <= 0 (no depth effect, or reversed)")
def xiong_thm1(q: QuickData) -> Verdict:
    sp, sr = q.fits["w2_slope"]["post"], q.fits["w2_slope"]["pre"]
    ratio = q.fits["ratio_to_pre"]["post"]
    Ls = sorted(int(k) for k in ratio)
    r = [ratio[k] if k in ratio else ratio[str(k)] for k in Ls]
    gap = sp["slope"] - sr["slope"]
    yes = sr["slope"] < -0.15 and gap > 0.3 and r[-1] > 3 * r[0]
    no = sr["slope"] >= 0 or gap <= 0
    rtxt = ", ".join(f"L{L}: {v:.2f}" for L, v in zip(Ls, r))
    return Verdict(three_way(yes, no),
                   f"slope post {sp['slope']:+.2f} ± {sp['stderr']:.2f}, pre {sr['slope']:+.2f} ± {sr['stderr']:.2f} "
                   f"(theory 0 and -0.5; post - pre {gap:+.2f}); Post/Pre ratio {rtxt}",
                   {"slope_post": sp, "slope_pre": sr, "slope_gap": gap, "ratio_post_pre": ratio},
                   f"± = stderr of the slope over {q.seeds} seeds x {len(Ls)} depths", "xiong_w2_depth")


@claim(id="xiong-direction", quick=True, source="REFERENCE.md claim 3 (Xiong et al. 2020, Fig. 3)",
       statement="At init the Post-LN gradient norm rises with layer index (largest next to the output); "
                 "Pre-LN is much flatter.",
       experiment=PROBE, quantity="Spearman(layer index, seed-mean gradient norm of the whole block) at L = 16 "
                                  "(issue 5); reported for every L >= 4",
       rule="issue 5's threshold: supported if post's Spearman at L=16 > 0.7; not supported if it is < -0.7 "
            "(falls toward the output); otherwise inconclusive")
def xiong_direction(q: QuickData) -> Verdict:
    sp, sr = _block_spear(q, "post"), _block_spear(q, "pre")
    L = _ref_depth(q)
    rho = sp.get(L, float("nan"))
    return Verdict(three_way(rho > 0.7, rho < -0.7),
                   f"post Spearman at L={L}: {rho:+.2f} (all L: {_fmt(sp)}); pre: {_fmt(sr)}",
                   {"spearman_post": sp, "spearman_pre": sr, "L": L},
                   f"Spearman of the seed-mean profile over {q.seeds} seeds", "grad_per_layer")


@claim(id="seed001-lower-layers", quick=True, source="seed 001 (Korean paper summary of Xiong et al. 2020)",
       statement="In Post-LN at the start of training lower layers get much larger gradients than upper "
                 "layers: dL/dx_l = O(L - l + 1) dL/dx_L.",
       experiment=PROBE, quantity="Spearman(layer index, seed-mean block gradient norm of post) at L = 16 "
       "(issue 5) and the block gradient of layer 1 over layer L; the stream gradient ||dLoss/dx_l|| alongside",
       rule="issue 5's threshold on the same statistic as xiong-direction: supported if post's Spearman at L=16 "
            "< -0.7 (lower layers larger); not supported if it is > 0.7 (rises toward the output)")
def seed001_lower_layers(q: QuickData) -> Verdict:
    sp = _block_spear(q, "post")
    L = _ref_depth(q)
    rho = sp.get(L, float("nan"))
    Ls = [x for x in q.probe["depths"] if x >= 4]
    blk = {x: np.nanmean(q.values("post", x, "grad_norm", "block"), 0) for x in Ls}
    ratio = {x: float(v[0] / v[-1]) for x, v in blk.items()}
    xs = {x: np.nanmean(q.values("post", x, "grad_norm", "stream", "x"), 0) for x in Ls}
    xr = {x: float(v[0] / v[-1]) for x, v in xs.items()}
    return Verdict(three_way(rho < -0.7, rho > 0.7),
                   f"measured layer trend of post's block gradient: Spearman at L={L} {rho:+.2f} (all L: {_fmt(sp)}); "
                   f"layer 1 / layer L {_fmt(ratio)}: gradients {'rise' if rho > 0 else 'fall'} toward the output. "
                   f"Stream gradient ||dL/dx_0||/||dL/dx_L||: {_fmt(xr)} (seed formula: L+1)",
                   {"spearman_post": sp, "spearman_at_L": rho, "L": L, "first_over_last": ratio,
                    "stream_grad_first_over_last": xr},
                   f"seed mean over {q.seeds} seeds", "grad_per_layer")


@claim(id="forward-norms", quick=True, source="Xiong et al. 2020, Lemma 1-2 (REFERENCE.md claim 2)",
       statement="Post-LN: the input to the last LN has E||x||^2 about 1.5 d in every layer; Pre-LN: the stream "
                 "grows linearly, (1 + l/2) d <= E||x_l||^2 <= (1 + 3l/2) d.",
       experiment=PROBE, quantity="E||x||^2/d of the FFN's post-LN input (post) and of the stream x_l (pre)",
       rule="supported if every post value is in [1.2, 1.8] and every pre x_l (l >= 1) is within the "
            "bounds, at every depth; not supported if more than a quarter of either fails")
def forward_norms(q: QuickData) -> Verdict:
    post, pre_in, pre_n = [], 0, 0
    for L in q.probe["depths"]:
        m = np.nanmean(q.values("post", L, "mean_sq", "ffn", "norm.input"), 0)
        post += list(m)
        s = np.nanmean(q.values("pre", L, "mean_sq", "stream", "x"), 0)
        for i in range(1, L + 1):
            pre_n += 1
            pre_in += (1 + i / 2) <= s[i] <= (1 + 1.5 * i)
    post_ok = sum(1.2 <= v <= 1.8 for v in post)
    fit = q.fits["stream_fit"]["pre"][max(q.probe["depths"])]
    yes = post_ok == len(post) and pre_in == pre_n
    no = post_ok < 0.75 * len(post) or pre_in < 0.75 * pre_n
    return Verdict(three_way(yes, no),
                   f"post: E||x||²/d = {np.mean(post):.2f} (range {min(post):.2f}..{max(post):.2f}, "
                   f"{post_ok}/{len(post)} in [1.2, 1.8]); pre: {pre_in}/{pre_n} layers within Xiong's bounds, "
                   f"slope {fit['slope']:.2f} per layer at L={max(q.probe['depths'])}",
                   {"post_mean": float(np.mean(post)), "post_min": float(min(post)), "post_max": float(max(post)),
                    "pre_within": pre_in, "pre_total": pre_n, "pre_slope": fit["slope"]},
                   f"seed mean over {q.seeds} seeds; range over layers and depths", "forward_norms")


def _jac(q: QuickData, p: str) -> np.ndarray:
    return np.nanmean(q.values(p, max(q.probe["depths"]), "jac_rms_to_last", "stream", "x"), 0)


@claim(id="jacobian-identity", quick=True, source="seed 000 (lecture notes); REFERENCE.md claims 4 and 16",
       statement="Post-LN dx_{l+1}/dx_l = J_LN (I + J_F): the identity path passes through J_LN; Pre-LN "
                 "I + J_F J_LN keeps a direct identity term.",
       experiment=PROBE + "; 1 random projection per seed", quantity="RMS singular value of d x_L / d x_l "
       "(autograd vector-Jacobian products) across l at the largest L",
       rule="supported if pre's end-to-end gain stays >= 1 for every l (the identity term) while post's "
            "falls below 1; not supported if post's gain is >= pre's at l = 0")
def jacobian_identity(q: QuickData) -> Verdict:
    jp, jr = _jac(q, "post"), _jac(q, "pre")
    yes = bool(np.all(jr >= 0.99)) and float(np.min(jp)) < 1.0
    no = jp[0] >= jr[0]
    return Verdict(three_way(yes, no),
                   f"pre: min gain {jr.min():.2f} (x_0 -> x_L {jr[0]:.2f}); post: min {jp.min():.2f} "
                   f"(x_0 -> x_L {jp[0]:.2f})",
                   {"pre": jr.tolist(), "post": jp.tolist()}, f"seed mean over {q.seeds} seeds", "jacobian")


@claim(id="seed004-decay", quick=True, source="seed 004 (Chinese survey)",
       statement="Post-LN's identity path decays like (1/sqrt(2))^L through the layers, exponentially: "
                 "a toll booth on every layer, at 32 layers almost 0.",
       experiment=PROBE + "; 1 random projection per seed", quantity="per-layer factor exp(slope of log gain "
       "against l) of the end-to-end Jacobian of post at the largest L, and the gain from x_0",
       rule="supported if the factor is in [0.65, 0.76] (1/sqrt 2 = 0.707) or the gain from x_0 is < 0.01; "
            "not supported if the factor is > 0.85 and the gain from x_0 is > 0.1")
def seed004_decay(q: QuickData) -> Verdict:
    jp = _jac(q, "post")
    L = max(q.probe["depths"])
    r = slope_per_layer(jp[::-1])  # reversed: index = layers between x_l and x_L
    yes = 0.65 <= r <= 0.76 or jp[0] < 0.01
    no = r > 0.85 and jp[0] > 0.1
    return Verdict(three_way(yes, no),
                   f"measured factor per layer {r:.3f} (seed: 0.707); gain x_0 -> x_{L} = {jp[0]:.3f} "
                   f"(seed predicts {(2 ** -0.5) ** L:.1e})",
                   {"factor_per_layer": r, "gain_first": float(jp[0]), "predicted": (2 ** -0.5) ** L},
                   f"seed mean over {q.seeds} seeds", "jacobian")


@claim(id="rank-collapse", quick=True, source="Noci et al. 2022 (REFERENCE.md claim 5)",
       statement="The mean pairwise cosine between tokens at the last layer rises toward 1 with depth, faster "
                 "for Post-LN.",
       experiment=PROBE, quantity="mean pairwise token cosine of x_L against L",
       rule="supported if it rises with L for post and pre (Spearman > 0.5) and post > pre at the largest L; "
            "not supported if it falls for both")
def rank_collapse(q: QuickData) -> Verdict:
    from normlab.diagnostics.stats import spearman

    tc = q.fits["token_cos_last"]
    Ls = q.probe["depths"]
    vals = {p: [tc[p].get(L, tc[p].get(str(L))) for L in Ls] for p in ("post", "pre")}
    rho = {p: spearman(Ls, v) for p, v in vals.items()}
    yes = rho["post"] > 0.5 and rho["pre"] > 0.5 and vals["post"][-1] > vals["pre"][-1]
    no = rho["post"] < -0.5 and rho["pre"] < -0.5
    return Verdict(three_way(yes, no),
                   "token cosine at x_L, " + "; ".join(f"{p}: " + ", ".join(f"L{L} {v:.2f}" for L, v in zip(Ls, vals[p]))
                                                       for p in vals),
                   {"token_cos": vals, "spearman_vs_L": rho}, f"seed mean over {q.seeds} seeds", "rank_collapse")


@claim(id="deepnorm-constants", quick=True, source="DeepNet (Wang et al. 2022); REFERENCE.md claim 6",
       statement="Decoder-only DeepNorm with M layers: alpha = (2M)^(1/4), beta = (8M)^(-1/4) on W_V, W_O, W_1, "
                 "W_2 (not W_Q, W_K); the residual stream norm stays O(1) with depth.",
       experiment=PROBE + "; plus the built models' alpha, beta and init std of W_V / W_Q",
       quantity="|alpha - (2L)^(1/4)|, |beta - (8L)^(-1/4)|, std(W_V)/std(W_Q) / beta, E||x_L||^2/d against L",
       rule="supported if the constants match to 1e-6, the std ratio is within 10% of beta and E||x_L||^2/d "
            "stays in [0.5, 2] at every depth; not supported if a constant differs")
def deepnorm_constants(q: QuickData) -> Verdict:
    c = q.extra["deepnorm"]
    da = max(abs(a - b) for a, b in zip(c["alpha_model"], c["alpha_formula"]))
    db = max(abs(a - b) for a, b in zip(c["beta_model"], c["beta_formula"]))
    sr = [r / b for r, b in zip(c["std_ratio_v_q"], c["beta_formula"])]
    last = [float(np.nanmean(q.values("deepnorm", L, "mean_sq", "stream", "x")[:, -1])) for L in q.probe["depths"]]
    yes = da < 1e-6 and db < 1e-6 and all(abs(v - 1) < 0.1 for v in sr) and all(0.5 <= v <= 2 for v in last)
    return Verdict(three_way(yes, da >= 1e-6 or db >= 1e-6),
                   f"max |alpha - formula| {da:.1e}, |beta - formula| {db:.1e}; std(W_V)/std(W_Q)/beta "
                   f"{min(sr):.3f}..{max(sr):.3f}; E||x_L||²/d {min(last):.2f}..{max(last):.2f} over L",
                   {**c, "stream_last_mean_sq": last}, "one init per depth (constants are exact)", "rank_collapse")


@claim(id="seed001-rms", quick=True, source="seed 001 (Korean paper summary)",
       statement="RMSNorm(x) = x / RMS(x) * g, where RMS(x) = (1/n) sum x_i^2.",
       experiment="x = s z with unit-RMS z (64 x 128), s in {0.1, 0.5, 1, 2, 10}; normlab RMSNorm (g = 1) vs the "
                  "seed's formula", quantity="output RMS and max |difference| per input scale",
       rule="the seed's formula is supported if it matches normlab's RMSNorm (max diff < 1e-3) at every "
            "scale; not supported if it differs at any scale other than s = 1")
def seed001_rms(q: QuickData) -> Verdict:
    r = q.extra["rms"]
    off = [d for s, d in zip(r["scale"], r["max_abs_diff"]) if s != 1.0]
    v = SUPPORTED if max(r["max_abs_diff"]) < 1e-3 else NOT_SUPPORTED if max(off) >= 1e-3 else INCONCLUSIVE
    return Verdict(v, "output RMS, normlab vs seed: " + ", ".join(
        f"s={s:g}: {a:.3g} vs {b:.3g}" for s, a, b in zip(r["scale"], r["rms_normlab"], r["rms_seed"]))
        + " (without the square root the output scales as 1/s)", r, "exact (one draw)", "rms_formula")


@claim(id="seed002-gpt2", quick=True, source="seed 002 (Russian Q&A)",
       statement="Example: GPT-2 uses post-norm.",
       experiment="a random 3-layer transformers GPT-2 (d=64, no download) loaded into normlab's pre and post "
                  "placements", quantity="max |logit difference| to GPT-2's own forward",
       rule="supported if post reproduces GPT-2 (diff < 1e-4) and pre does not; not supported if pre does "
            "and post does not; inconclusive without transformers")
def seed002_gpt2(q: QuickData) -> Verdict:
    r = q.extra.get("gpt2")
    if r is None:
        return Verdict(INCONCLUSIVE, "transformers is not installed (pip install 'normlab[hf]')")
    pre_ok, post_ok = r["max_abs_logit_diff_pre"] < 1e-4, r["max_abs_logit_diff_post"] < 1e-4
    return Verdict(three_way(post_ok and not pre_ok, pre_ok and not post_ok),
                   f"max |logit diff| pre {r['max_abs_logit_diff_pre']:.1e}, post {r['max_abs_logit_diff_post']:.2f} "
                   f"(logits up to {r['logit_scale']:.2f}): GPT-2 is {'Pre' if pre_ok else 'Post' if post_ok else '?'}-LN",
                   r, "exact (one random model)")


def _fmt(d: dict[int, float]) -> str:
    return ", ".join(f"L{L} {v:+.2f}" for L, v in sorted(d.items()) if not math.isnan(v))
