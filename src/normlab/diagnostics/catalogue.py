"""The built-in statistics, registered here and nowhere else (definitions: docs/diagnostics.md).

``STATISTICS`` is the one registry the probe, the in-training diagnostics, inspect, analyze
and the report pages read. Add a statistic with ``STATISTICS.add(name, Statistic(...))``
(see ``normlab.diagnostics.statistic``); it is then computed by every tool that captures
what it needs, written under its key, and drawn on the pages as it declares.

Order matters for the files: diagnostics.jsonl keys follow it, and so do the rows of
probe.csv, inspect and analyze (``diagnostics.rows.computed``: place by place, each place's
statistics in this order), which keeps every file byte for byte what it was when each tool
computed its own. Where inspect's or analyze's estimator differs from the probe's (float64
RMS, gradients reduced by hooks) it is its own statistic under the same key.
The math lives in ``normlab.stats.tensors`` or in the shared batched tensors of
``StreamStates``; a line's ``compute`` is one expression over them, or a function of
``normlab.diagnostics.compute`` where it takes more, so each statistic stays one line here.
"""

from __future__ import annotations

import math
from typing import Any

from normlab.core import plugins
from normlab.diagnostics import compute, curvature, monitors, spikes
from normlab.diagnostics.statistic import STATISTICS, Figure, Statistic
from normlab.stats import tensors as stats

PROBE, TRAINING, COORD = frozenset({"probe"}), frozenset({"training"}), frozenset({"coord"})
INSPECT, ANALYZE, BOTH = frozenset({"inspect"}), frozenset({"analyze"}), frozenset({"inspect", "analyze"})


def _stats() -> Any:
    return stats


_STREAM, _AUX = frozenset({"stream"}), frozenset({"aux"})
_PARAM, _GRAD, _HISTORY = frozenset({"param_stats"}), frozenset({"grad_stats"}), frozenset({"history"})
BLOCKWISE = PROBE | INSPECT
PERI_LN = Figure("growth", "growth_act_var", "hidden-state variance per layer over training (as Peri-LN's Fig. 1)")
W2 = ("W_2", "W2")

# ------------------------------------------------------------ gradients: per group in training, at init in the probe
STATISTICS.add("grad_norm", Statistic("grad_norm", "groups", frozenset({"grads"}), "||grad||_F of each parameter group before clipping",
                                      monitors.grad_norm, "||grad||_F per group", TRAINING))
STATISTICS.add("update_ratio", Statistic("update_ratio", "groups", frozenset({"update"}), "||W_t+1 - W_t||_F / ||W_t+1||_F per group",
                                         monitors.update_ratio, "||ΔW|| / ||W||", TRAINING))
STATISTICS.add("weight_grad_norm", Statistic("weight_grad_norm", "labelled", frozenset({"param_grads", "loss"}),
                                             "||dLoss/dW||_F of each weight of each block (W_Q, W_K, W_V split) ", compute.weight_grad_norm,
                                             draw=(Figure("depth", "depth_w2", "last block's W2 gradient against depth",
                                                          "||∂loss/∂W2|| of the last block", "ffn", W2),
                                                   Figure("layers", "layers_w2", "W2 gradient per layer", "||∂loss/∂W2_l||", "ffn", W2)),
                                             tools=PROBE, key="grad_norm"))
STATISTICS.add("block_grad_norm", Statistic("block_grad_norm", "blocks", frozenset({"param_grads", "loss"}),
                                            "sqrt of the sum of squared gradient norms of every parameter of block l ",
                                            compute.block_grad_norm, "||∂loss/∂θ_l|| (whole block)", tools=PROBE, key="grad_norm",
                                            draw=(Figure("layers", "layers_block_grad", "block gradient per layer"),)))
STATISTICS.add("stream_grad_norm", Statistic("stream_grad_norm", "inputs", frozenset({"stream_grads"}),
                                             "||dLoss/dx_l||_F of the stream entering block l+1 ",
                                             lambda c: list(g.norm() for g in c.stream_grads), tools=PROBE, key="grad_norm", draw=("none",)))
STATISTICS.add("jac_rms_to_last", Statistic("jac_rms_to_last", "inputs", frozenset({"jacobian"}),
                                            "RMS singular value of dx_L/dx_l (Hutchinson projections; 1 = norm-preserving)", compute.jacobian,
                                            "RMS singular value of ∂x_L/∂x_l", PROBE, draw=(Figure("layers", "layers_jacobian", "end-to-end Jacobian"),)))


# ------------------------------------------------------------ both
# The stream, attention and logits, in training, at init and in inspect. A helper that one new
# statistic alone needs goes above this line (docs/architecture.md's example, placed here by
# tests/architecture/test_walkthroughs.py); compute.py holds those of the built-ins.
STATISTICS.add("rms", Statistic("rms", "states", _STREAM, "sqrt(E||x_l||^2 / d) of the stream", lambda c: compute.rms(c.stream),
                                "RMS of x_l", TRAINING | COORD))
STATISTICS.add("rms_of_mean_sq", Statistic("rms_of_mean_sq", "states", _STREAM, "sqrt(E||x_l||^2 / d) of the stream, in float64",
                                           lambda c: [math.sqrt(float(_stats().mean_sq(x))) for x in c.stream.states], "RMS of x_l", INSPECT,
                                           key="rms", draw=("none",)))
STATISTICS.add("mean_sq", Statistic("mean_sq", "states", _STREAM, "E||x_l||^2 / d of the stream (Xiong et al. 2020)",
                                    lambda c: [_stats().mean_sq(x) for x in c.stream.states], "E||x_l||² / d", PROBE | INSPECT,
                                    draw=(Figure("layers", "layers_stream", "forward norm of the residual stream"),)))
STATISTICS.add("max_abs", Statistic("max_abs", "states", _STREAM, "max |x_l| over every entry (fp16 overflows at 65504)",
                                    lambda c: c.stream.stacked.abs().amax(dim=(1, 2, 3)), "max |x_l|", PROBE | TRAINING | INSPECT))
STATISTICS.add("token_cos", Statistic("token_cos", "states", _STREAM, "mean pairwise cosine between positions (rank collapse)",
                                      lambda c: [compute.token_cos(x) for x in c.stream.states], "mean pairwise token cosine", PROBE | INSPECT,
                                      draw=(Figure("depth", "depth_token_cos", "rank collapse against depth",
                                                   "mean pairwise token cosine at x_L"),)))
STATISTICS.add("state_grad_norm", Statistic("state_grad_norm", "states", frozenset({"state_grads"}), "||dLoss/dx_l||_F of each stream state",
                                            lambda c: c.measured["state_grads"], tools=INSPECT, key="grad_norm", draw=("none",)))
STATISTICS.add("angular_distance_to_last", Statistic("angular_distance_to_last", "states", _STREAM, "arccos(cos(x_l, x_L)) / π, mean over tokens",
                                                     lambda c: [_stats().angular_distance(x, c.stream.states[-1]) for x in c.stream.states],
                                                     "angle to x_L", INSPECT, draw=("none",)))
# One key per quantity for every tool: the cosine and the angle across block l are the same
# numbers whether training, the probe, inspect or analyze asks (they were "cos"/"cos_next" and
# "angle"/"angular_distance" before).
STATISTICS.add("cos", Statistic("cos", "blocks", _STREAM, "mean_t cos(x_{l-1}, x_l) of block l's input and output",
                                lambda c: compute.cos(c.stream), "cos(block input, output)", TRAINING | PROBE | INSPECT))
STATISTICS.add("cos_aux", Statistic("cos_aux", "blocks", _AUX, "cos of the second stream (ResiDual's d) across block l",
                                    lambda c: compute.cos(c.aux), "cos(d_{l-1}, d_l)", TRAINING))
STATISTICS.add("angular_distance_aux", Statistic("angular_distance_aux", "blocks", _AUX,
                                                 "angular distance of the second stream (ResiDual's d) across block l",
                                                 lambda c: compute.angle(c.aux), "arccos(cos(d_{l-1}, d_l))/π", TRAINING))
STATISTICS.add("rms_aux", Statistic("rms_aux", "states", _AUX, "RMS of the second stream d_l", lambda c: compute.rms(c.aux), "RMS of d_l",
                                    TRAINING))
STATISTICS.add("attn_max_logit", Statistic("attn_max_logit", "blocks", frozenset({"attention"}), "max |q·k| * scale per block",
                                           compute.attention("max_logit"), "max |q·k|/√d_head", TRAINING))
STATISTICS.add("attn_min_entropy", Statistic("attn_min_entropy", "blocks", frozenset({"attention"}),
                                             "minimum attention entropy (nats) over queries 1..", compute.attention("min_entropy"),
                                             "min entropy (nats)", TRAINING))
STATISTICS.add("attn_mean_entropy", Statistic("attn_mean_entropy", "blocks", frozenset({"attention"}), "mean attention entropy (nats)",
                                              compute.attention("mean_entropy"), "mean entropy (nats)", TRAINING))
STATISTICS.add("log_z", Statistic("log_z", "scalar", frozenset({"logits"}), "mean log Z of the output softmax",
                                  lambda c: c.logits.float().logsumexp(dim=-1).mean(), "mean log Z", TRAINING))
STATISTICS.add("output_change", Statistic("output_change", "scalar", frozenset({"logits", "reference"}),
                                          "||F(x;W_t) - F(x;W_0)|| / ||F(x;W_0)||, F = logits on the fixed batch (Liu et al. 2020)",
                                          lambda c: (c.logits - c.reference).norm() / c.reference.norm().clamp_min(1e-30),
                                          "output change", TRAINING))
STATISTICS.add("norm_input_mean_sq", Statistic("norm_input_mean_sq", "labelled", frozenset({"norm_inputs"}), "E||x||^2 / d of each norm's input",
                                               compute.norm_inputs(lambda x: _stats().mean_sq(x)), tools=PROBE, key="mean_sq"))
STATISTICS.add("norm_input_max_abs", Statistic("norm_input_max_abs", "labelled", frozenset({"norm_inputs"}), "max |x| of each norm's input",
                                               compute.norm_inputs(lambda x: _stats().max_abs(x)), tools=PROBE, key="max_abs"))
STATISTICS.add("loss", Statistic("loss", "scalar", frozenset({"loss"}), "mean cross-entropy of the batch (nats/token)",
                                 lambda c: c.loss, "loss", PROBE | INSPECT, draw=("none",)))
# ------------------------------------------------------------ one trained model (inspect, analyze)
STATISTICS.add("measured_log_z", Statistic("measured_log_z", "scalar", frozenset({"log_z"}), "mean log Z of the output softmax",
                                           lambda c: c.measured["log_z"], "mean log Z", INSPECT, key="log_z", param="logits", draw=("none",)))
STATISTICS.add("val_loss", Statistic("val_loss", "scalar", frozenset({"loss"}), "mean validation cross-entropy (nats/token)",
                                     lambda c: c.loss, "validation loss", ANALYZE, param="all", draw=("none",)))
STATISTICS.add("measured_block_grad_norm", Statistic("measured_block_grad_norm", "blocks", frozenset({"block_grads"}),
                                                     "||dLoss/dθ_l||_F of every parameter of block l", lambda c: c.measured["block_grads"],
                                                     tools=INSPECT, key="grad_norm", draw=("none",)))
STATISTICS.add("deletion_loss", Statistic("deletion_loss", "blocks", frozenset({"deletion"}), "loss with block l skipped (its input passed on)",
                                          lambda c: c.measured["deletion"], "loss without block l", BOTH, draw=("none",)))
STATISTICS.add("deletion_delta", Statistic("deletion_delta", "blocks", frozenset({"deletion", "loss"}),
                                           "loss increase when block l is skipped (Gromov et al. 2024)",
                                           lambda c: [d - c.loss for d in c.measured["deletion"]], "loss increase when block l is skipped", BOTH,
                                           draw=(Figure("layers", "layers_deletion", "block deletion"), Figure("bars", "layer_deletion", "layer deletion: loss increase when one block is skipped"))))
STATISTICS.add("block_influence", Statistic("block_influence", "blocks", _STREAM, "1 - mean_t cos(x_{l-1}, x_l) (ShortGPT, Men et al. 2024)",
                                            compute.adjacent(lambda a, b: _stats().block_influence(a, b)), "block influence", BOTH, draw=("none",)))
STATISTICS.add("angular_distance_pairs", Statistic("angular_distance_pairs", "pairs", _STREAM, "arccos(cos(x_i, x_j)) / π between stream states",
                                                   compute.pairs(lambda a, b: _stats().angular_distance(a, b)), "angular distance", BOTH, key="angular_distance",
                                                   draw=(Figure("matrix", "layer_similarity", "angular distance between layer outputs"),)))
STATISTICS.add("angular_distance", Statistic("angular_distance", "blocks", _STREAM, "arccos(cos(x_{l-1}, x_l)) / π of block l (Gromov et al. 2024)",
                                             lambda c: compute.angle(c.stream), "arccos(cos(x_{l-1}, x_l)) / π", TRAINING | BOTH,
                                             draw=(Figure("layers", "layers_angle", "angular distance between each block's input and output"),)))
STATISTICS.add("cka", Statistic("cka", "pairs", _STREAM, "linear CKA between stream states, tokens as samples (Kornblith et al. 2019)",
                                compute.pairs(lambda a, b: _stats().linear_cka(a.flatten(0, 1), b.flatten(0, 1))), "linear CKA", ANALYZE,
                                draw=("none",)))
STATISTICS.add("measured_max_logit", Statistic("measured_max_logit", "labelled", frozenset({"max_logit"}), "max attention logit of block l",
                                               lambda c: [((li, "attn", "all"), v) for li, v in enumerate(c.measured["max_logit"], start=1)],
                                               "max attention logit", INSPECT, key="max_logit",
                                               draw=(Figure("layers", "layers_max_logit", "attention max logit per layer", sublayer="attn",
                                                            params=("all",)),)))
# ------------------------------------------------------------ the coordinate check across widths (train/coord.py)
STATISTICS.add("change_rms", Statistic("change_rms", "states", frozenset({"stream", "reference_stream"}),
                                       "RMS of x_l(W_t) - x_l(W_0) on one batch: each layer's change after t steps "
                                       "(muP's coordinate check, Yang et al. 2022)", compute.change, "RMS of x_l - x_l at init",
                                       COORD, draw=("none",)))
STATISTICS.add("logit_rms", Statistic("logit_rms", "scalar", frozenset({"logits"}), "RMS of the logits",
                                      lambda c: c.logits.float().pow(2).mean().sqrt(), "RMS of the logits", COORD,
                                      draw=("none",)))
STATISTICS.add("logit_change_rms", Statistic("logit_change_rms", "scalar", frozenset({"logits", "reference"}),
                                             "RMS of z(W_t) - z(W_0), z the logits on one batch (the output's change)",
                                             lambda c: (c.logits.float() - c.reference.float()).pow(2).mean().sqrt(),
                                             "RMS of the logits' change", COORD, draw=("none",)))
# ------------------------------------------------------------ stability monitors (OLMo-core's, Peri-LN's figure)
STATISTICS.add("act_mean", Statistic("act_mean", "states", _STREAM, "mean entry of x_l, per sequence then averaged (OLMo-core GAP)",
                                     compute.act(0), "mean of x_l", PROBE | TRAINING | INSPECT))
STATISTICS.add("act_var", Statistic("act_var", "states", _STREAM, "variance of x_l's entries per sequence, averaged over sequences "
                                    "(OLMo-core GAP; Peri-LN's hidden-state variance)", compute.act(1), "Var(x_l)", PROBE | TRAINING | INSPECT,
                                    draw=("layers", PERI_LN)))
STATISTICS.add("param_max", Statistic("param_max", "groups", _PARAM, "max |w| over each parameter group (OLMo-core GAP)",
                                      compute.moment("param", 2), "max |w|", TRAINING))
STATISTICS.add("param_mean", Statistic("param_mean", "groups", _PARAM, "mean of each parameter group's entries (OLMo-core GAP)",
                                       compute.moment("param", 0), "mean of w", TRAINING))
STATISTICS.add("param_var", Statistic("param_var", "groups", _PARAM, "variance of each parameter group's entries (OLMo-core GAP)",
                                      compute.moment("param", 1), "Var(w)", TRAINING))
STATISTICS.add("grad_max", Statistic("grad_max", "groups", _GRAD, "max |g| of each group's gradient before clipping (OLMo-core GAP)",
                                     compute.moment("grad", 2), "max |grad|", TRAINING))
STATISTICS.add("grad_mean", Statistic("grad_mean", "groups", _GRAD, "mean entry of each group's gradient before clipping (OLMo-core GAP)",
                                      compute.moment("grad", 0), "mean of grad", TRAINING))
STATISTICS.add("grad_var", Statistic("grad_var", "groups", _GRAD, "variance of each group's gradient before clipping (OLMo-core GAP)",
                                     compute.moment("grad", 1), "Var(grad)", TRAINING))
STATISTICS.add("block_param_max", Statistic("block_param_max", "blocks", _PARAM, "max |w| over block l's parameters (OLMo-core GAP)",
                                            compute.moment("param", 2), "max |w|", BLOCKWISE, key="param_max", draw=("none",)))
STATISTICS.add("block_param_mean", Statistic("block_param_mean", "blocks", _PARAM, "mean of block l's parameter entries (OLMo-core GAP)",
                                             compute.moment("param", 0), "mean of w", BLOCKWISE, key="param_mean", draw=("none",)))
STATISTICS.add("block_param_var", Statistic("block_param_var", "blocks", _PARAM, "variance of block l's parameter entries (OLMo-core GAP)",
                                            compute.moment("param", 1), "Var(w)", BLOCKWISE, key="param_var", draw=("none",)))
STATISTICS.add("block_grad_max", Statistic("block_grad_max", "blocks", _GRAD, "max |g| of block l's gradient (OLMo-core GAP)",
                                           compute.moment("grad", 2), "max |grad|", BLOCKWISE, key="grad_max", draw=("none",)))
STATISTICS.add("block_grad_mean", Statistic("block_grad_mean", "blocks", _GRAD, "mean entry of block l's gradient (OLMo-core GAP)",
                                            compute.moment("grad", 0), "mean of grad", BLOCKWISE, key="grad_mean", draw=("none",)))
STATISTICS.add("block_grad_var", Statistic("block_grad_var", "blocks", _GRAD, "variance of block l's gradient entries (OLMo-core GAP)",
                                           compute.moment("grad", 1), "Var(grad)", BLOCKWISE, key="grad_var", draw=("none",)))
STATISTICS.add("spike_score", Statistic("spike_score", "scalar", _HISTORY, "spike steps / steps so far: OLMo-core's SpikeScore (total), "
                                        f"a spike {spikes.THRESHOLD:g} sigma above the trailing {spikes.WINDOW} steps",
                                        lambda c: c.history.score(), "spike score", TRAINING))
STATISTICS.add("spikes", Statistic("spikes", "scalar", _HISTORY, "loss or gradient-norm spike steps so far (OLMo-core's definition)",
                                   lambda c: c.history.count, "spike steps", TRAINING))
STATISTICS.add("loss_spike_z", Statistic("loss_spike_z", "scalar", _HISTORY, "largest z-score of the step loss since the last line, "
                                         f"against the trailing {spikes.WINDOW} steps", lambda c: c.history.largest_z(0), "loss z-score", TRAINING))
STATISTICS.add("grad_norm_spike_z", Statistic("grad_norm_spike_z", "scalar", _HISTORY, "largest z-score of the gradient norm since the last "
                                              f"line, against the trailing {spikes.WINDOW} steps", lambda c: c.history.largest_z(1),
                                              "gradient-norm z-score", TRAINING))

# ------------------------------------------------------------ optimizer, curvature and attention monitors (monitors.py, curvature.py)
_OPT, _HESSIAN = frozenset({"optimizer"}), frozenset({"hessian"})
STATISTICS.add("update_rms", Statistic("update_rms", "groups", frozenset({"update"}), "RMS of W_t+1 - W_t over each group's matrices",
                                       monitors.update_rms, "RMS(ΔW)", TRAINING))
STATISTICS.add("update_rms_ratio", Statistic("update_rms_ratio", "groups", frozenset({"update"}), "RMS(W_t+1 - W_t) / RMS(W_t+1) over "
                                             "each group's matrices", monitors.update_rms_ratio, "RMS(ΔW) / RMS(W)", TRAINING))
STATISTICS.add("adam_m_rms", Statistic("adam_m_rms", "groups", _OPT, "RMS of Adam's exp_avg over each group's matrices",
                                       monitors.adam_rms("exp_avg"), "RMS(m)", TRAINING))
STATISTICS.add("adam_sqrt_v_rms", Statistic("adam_sqrt_v_rms", "groups", _OPT, "RMS of sqrt(exp_avg_sq) (Adam) over each group's matrices",
                                            monitors.adam_rms("exp_avg_sq"), "RMS(√v)", TRAINING))
STATISTICS.add("sharpness", Statistic("sharpness", "scalar", _HESSIAN, "top eigenvalue of the loss Hessian (power iteration)",
                                      curvature.sharpness, "λ_max(H)", PROBE | TRAINING | INSPECT))
STATISTICS.add("precond_sharpness", Statistic("precond_sharpness", "scalar", _HESSIAN | _OPT, "top eigenvalue of P^-1/2 H P^-1/2, "
                                              "P = diag(sqrt(v_hat) + eps) of Adam (Cohen et al. 2022)",
                                              curvature.precond_sharpness, "λ_max(P⁻¹H)", TRAINING))
STATISTICS.add("attn_head_entropy", Statistic("attn_head_entropy", "labelled", frozenset({"attention"}), "mean over queries of each "
                                              "head's attention entropy (nats; Zhai et al. 2023)", monitors.head_entropy_rows,
                                              "entropy (nats)", PROBE | TRAINING | INSPECT))


# Installed plugins add theirs at the first lookup, after these (docs/plugins.md); none is imported here.
STATISTICS.fill_later(plugins.filler("statistics", Statistic))


def by_key(tool: str) -> dict[str, Statistic]:
    """{key: statistic} of the statistics ``tool`` writes (for readers of its files)."""
    out: dict[str, Statistic] = {}
    for _, s in STATISTICS.items():
        if tool in s.tools:
            out.setdefault(s.key, s)
    return out
