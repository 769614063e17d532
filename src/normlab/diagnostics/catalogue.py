"""The built-in statistics, registered here and nowhere else (definitions: docs/diagnostics.md).

``STATISTICS`` is the one registry the probe, the in-training diagnostics and the report
read. Add a statistic with ``STATISTICS.add(name, Statistic(...))`` (see
``normlab.diagnostics.statistic``); it is then computed by every tool that captures what it
needs, written under its key, and drawn on the report with its labels.

Order matters for the files: diagnostics.jsonl keys follow it, and so do the probe's rows
(the statistics that need the backward one after another, then the others position by
position), which keeps both files byte for byte what they were before the registry.
The math lives in ``normlab.diagnostics.stats`` or in the shared batched tensors of
``StreamStates``; torch is imported inside the functions, so reading names and labels stays light.
"""

from __future__ import annotations

import math
from typing import Any

from normlab import plugins
from normlab.diagnostics.statistic import Captured, Statistic
from normlab.registry import Registry

PROBE, TRAINING = frozenset({"probe"}), frozenset({"training"})
Rows = list[tuple[tuple[int, str, str], Any]]


def _stats() -> Any:
    from normlab.diagnostics import stats

    return stats


# ------------------------------------------------------------------ training, per parameter group
def _grad_norm(c: Captured) -> Any:
    assert c.group_norms is not None and c.grads is not None  # what the need "grads" provides
    return c.group_norms(c.grads)


def _update_ratio(c: Captured) -> Any:
    import torch

    assert c.group_norms is not None and c.params is not None and c.snapshot is not None  # need "update"
    return c.group_norms(torch._foreach_sub(c.params, c.snapshot)) / c.group_norms(c.params).clamp_min(1e-30)


# ------------------------------------------------------------------ probe, gradients at init
def _weight_grad_norm(c: Captured) -> Rows:
    import torch

    rows: Rows = []
    for (layer, sub, param), g in c.param_grads:
        if param == "qkv" and g is not None:  # one matrix holds W_Q, W_K, W_V: report each
            for i, part in enumerate(("W_Q", "W_K", "W_V")):
                rows.append(((layer, sub, part), torch.linalg.matrix_norm(g.chunk(3, dim=0)[i])))
        else:
            rows.append(((layer, sub, param), _sq(g, c).sqrt()))
    return rows


def _block_grad_norm(c: Captured) -> Any:
    import torch

    assert c.loss is not None  # a need of this statistic
    per_layer = torch.zeros(c.n_layer + 1, device=c.loss.device)
    for (layer, _, _), g in c.param_grads:
        per_layer[layer] += _sq(g, c)
    return per_layer[1:].sqrt()


def _sq(g: Any, c: Captured) -> Any:
    import torch

    assert c.loss is not None  # a need of every statistic that calls this
    return g.pow(2).sum() if g is not None else torch.zeros((), device=c.loss.device)


def _jacobian(c: Captured) -> Any:
    return _stats().jacobian_rms(c.graph[-1], c.graph[:-1], c.n_proj, c.generator)


def _norm_inputs(fn: Any) -> Any:
    def compute(c: Captured) -> Rows:
        rows: Rows = []
        for name, x in c.norm_inputs.items():
            parts = name.split(".")
            if parts[0] == "blocks":
                where = (int(parts[1]) + 1, parts[2], ".".join(parts[3:]))
            else:
                where = (c.n_layer, "final", name)
            rows.append(((where[0], where[1], where[2] + ".input"), fn(x)))
        return rows

    return compute


# ------------------------------------------------------------------ both
def _rms(s: Any) -> Any:
    return s.stacked.pow(2).mean(dim=(1, 2, 3)).sqrt()


def _cos(s: Any) -> Any:
    return s.pair_cos.mean(dim=(1, 2))


def _angle(s: Any) -> Any:
    return (s.pair_cos.clamp(-1, 1).arccos() / math.pi).mean(dim=(1, 2))


def _attention(key: str) -> Any:
    return lambda c: c.attention.get(key)


_STREAM, _AUX = frozenset({"stream"}), frozenset({"aux"})

BUILTIN: tuple[Statistic, ...] = (
    Statistic("grad_norm", "groups", frozenset({"grads"}), "||grad||_F of each parameter group before clipping",
              _grad_norm, "||grad||_F per group", TRAINING),
    Statistic("update_ratio", "groups", frozenset({"update"}), "||W_t+1 - W_t||_F / ||W_t+1||_F per group",
              _update_ratio, "||ΔW|| / ||W||", TRAINING),
    Statistic("weight_grad_norm", "labelled", frozenset({"param_grads", "loss"}),
              "||dLoss/dW||_F of each weight of each block (W_Q, W_K, W_V split) ", _weight_grad_norm,
              tools=PROBE, key="grad_norm"),
    Statistic("block_grad_norm", "blocks", frozenset({"param_grads", "loss"}),
              "sqrt of the sum of squared gradient norms of every parameter of block l ",
              _block_grad_norm, tools=PROBE, key="grad_norm"),
    Statistic("stream_grad_norm", "inputs", frozenset({"stream_grads"}),
              "||dLoss/dx_l||_F of the stream entering block l+1 ",
              lambda c: list(g.norm() for g in c.stream_grads), tools=PROBE, key="grad_norm"),
    Statistic("jac_rms_to_last", "inputs", frozenset({"jacobian"}),
              "RMS singular value of dx_L/dx_l (Hutchinson projections; 1 = norm-preserving)", _jacobian,
              "RMS singular value of ∂x_L/∂x_l", PROBE),
    Statistic("rms", "states", _STREAM, "sqrt(E||x_l||^2 / d) of the stream", lambda c: _rms(c.stream),
              "RMS of x_l", TRAINING),
    Statistic("mean_sq", "states", _STREAM, "E||x_l||^2 / d of the stream (Xiong et al. 2020)",
              lambda c: [_stats().mean_sq(x) for x in c.stream.states], "E||x_l||² / d", PROBE),
    Statistic("max_abs", "states", _STREAM, "max |x_l| over every entry (fp16 overflows at 65504)",
              lambda c: c.stream.stacked.abs().amax(dim=(1, 2, 3)), "max |x_l|"),
    Statistic("token_cos", "states", _STREAM, "mean pairwise cosine between positions (rank collapse)",
              lambda c: [_stats().token_cosine(x) for x in c.stream.states], "mean pairwise token cosine", PROBE),
    Statistic("cos", "blocks", _STREAM, "mean_t cos(x_{l-1}, x_l) of block l's input and output",
              lambda c: _cos(c.stream), "cos(block input, output)", TRAINING),
    Statistic("cos_next", "inputs", _STREAM, "mean_t cos(x_l, x_{l+1})",
              lambda c: [_stats().cosine(a, b) for a, b in zip(c.stream.states[:-1], c.stream.states[1:])],
              "cos(x_l, x_l+1)", PROBE),
    Statistic("angle", "blocks", _STREAM, "mean_t arccos(cos(x_{l-1}, x_l)) / π (Gromov et al. 2024)",
              lambda c: _angle(c.stream), "arccos(cos)/π", TRAINING),
    Statistic("cos_aux", "blocks", _AUX, "cos of the second stream (ResiDual's d) across block l",
              lambda c: _cos(c.aux), "cos(d_{l-1}, d_l)", TRAINING),
    Statistic("angle_aux", "blocks", _AUX, "angle of the second stream across block l",
              lambda c: _angle(c.aux), "arccos(cos)/π of d", TRAINING),
    Statistic("rms_aux", "states", _AUX, "RMS of the second stream d_l", lambda c: _rms(c.aux), "RMS of d_l",
              TRAINING),
    Statistic("attn_max_logit", "blocks", frozenset({"attention"}), "max |q·k| * scale per block",
              _attention("max_logit"), "max |q·k|/√d_head", TRAINING),
    Statistic("attn_min_entropy", "blocks", frozenset({"attention"}),
              "minimum attention entropy (nats) over queries 1..", _attention("min_entropy"),
              "min entropy (nats)", TRAINING),
    Statistic("attn_mean_entropy", "blocks", frozenset({"attention"}), "mean attention entropy (nats)",
              _attention("mean_entropy"), "mean entropy (nats)", TRAINING),
    Statistic("log_z", "scalar", frozenset({"logits"}), "mean log Z of the output softmax",
              lambda c: c.logits.float().logsumexp(dim=-1).mean(), "mean log Z", TRAINING),
    Statistic("output_change", "scalar", frozenset({"logits", "reference"}),
              "||F(x;W_t) - F(x;W_0)|| / ||F(x;W_0)||, F = logits on the fixed batch (Liu et al. 2020)",
              lambda c: (c.logits - c.reference).norm() / c.reference.norm().clamp_min(1e-30),
              "output change", TRAINING),
    Statistic("norm_input_mean_sq", "labelled", frozenset({"norm_inputs"}), "E||x||^2 / d of each norm's input",
              _norm_inputs(lambda x: _stats().mean_sq(x)), tools=PROBE, key="mean_sq"),
    Statistic("norm_input_max_abs", "labelled", frozenset({"norm_inputs"}), "max |x| of each norm's input",
              _norm_inputs(lambda x: _stats().max_abs(x)), tools=PROBE, key="max_abs"),
    Statistic("loss", "scalar", frozenset({"loss"}), "mean cross-entropy of the batch (nats/token)",
              lambda c: c.loss, "loss", PROBE),
)


def _catalogue() -> Registry[Statistic]:
    reg: Registry[Statistic] = Registry("statistic", "statistics")
    for s in BUILTIN:
        reg.add(s.name, s)
    reg.fill_later(plugins.filler("statistics", Statistic))  # installed plugins' (docs/plugins.md), after these
    return reg


STATISTICS = _catalogue()


def by_key(tool: str) -> dict[str, Statistic]:
    """{key: statistic} of the statistics ``tool`` writes (for readers of its files)."""
    out: dict[str, Statistic] = {}
    for _, s in STATISTICS.items():
        if tool in s.tools:
            out.setdefault(s.key, s)
    return out
