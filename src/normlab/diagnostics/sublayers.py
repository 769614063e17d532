"""Measurements of one lab model's sub-layers, norms and blocks on one batch, each captured
through the one capture path (:func:`normlab.diagnostics.hooks.recording`):

- :func:`norm_gain`: what a Post-LN LayerNorm does to the sub-layer output it normalises
  (seed 001: "the sub-layer's output is relatively small, and LayerNorm over-amplifies it").
  Per sub-layer x <- LN(x + F(x)): ``ratio`` = RMS(F(x)) / RMS(x), how small the sub-layer's
  output is against the stream, and ``gain`` = ||J_LN(x + F) F|| / ||F||, the LayerNorm's
  Jacobian at the point it normalises applied to the sub-layer's own output (forward mode,
  ``torch.func.jvp``): above 1 the norm amplifies F's contribution, below 1 it shrinks it.
- :func:`branch_share`: DeepNorm's mean log(Var[F(x)] / Var[alpha x]) over sub-layers.
- :func:`identity_coefficients`: v . J_l v / v . v per block l, the mean diagonal of the
  block's Jacobian (the weight of the identity in it).
- :func:`identity_path`: the per-norm factor of Post-LN's identity term prod_k J_LN_k.

The model is a lab ``TransformerLM`` (its blocks hold the sub-layers ``attn`` and ``ffn``,
each with ``branch`` and ``norm``); the measurements that build one are in
:mod:`normlab.diagnostics.measurements`. :func:`per_block` applies every one that fits a
given model (``normlab inspect --measure``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from normlab.diagnostics.hooks import norm_names, recording
from normlab.diagnostics.subject import as_subject

SUBLAYERS = ("attn", "ffn")  # a lab block's sub-layers, in forward order


def per_sublayer(model: Any, idx: torch.Tensor, fn: Callable[[Any, torch.Tensor], Any]) -> list[Any]:
    """``fn(sub, x)`` for every sub-layer placement of the lab model ``model`` (2 per block, in
    forward order) at the input ``x`` it sees in one no-grad forward pass on ``idx``."""
    with torch.no_grad():
        with recording(as_subject(model), stream=False, inputs=True) as rec:
            model(idx)
        return [fn(getattr(b, name), rec.inputs[f"blocks.{i}.{name}"])
                for i, b in enumerate(model.blocks) for name in SUBLAYERS]


def norm_gain(model: Any, idx: torch.Tensor) -> list[dict[str, float]]:
    """``{"ratio", "gain"}`` per sub-layer (2 per block, in forward order) of the Post-LN lab
    model ``model`` on the batch ``idx``."""

    def measure(sub: Any, x: torch.Tensor) -> dict[str, float]:
        f = sub.branch(x)
        moved = torch.func.jvp(sub.norm, (x + f,), (f,))[1]
        return {"ratio": float(f.pow(2).mean().sqrt() / x.pow(2).mean().sqrt()),
                "gain": float(moved.norm() / f.norm())}

    return per_sublayer(model, idx, measure)


def branch_share(model: Any, idx: torch.Tensor) -> list[float]:
    """log(Var[F(x)] / Var[alpha x]) per sub-layer of a DeepNorm lab model (x <- LN(alpha x + F(x)))."""
    import math

    def log_share(sub: Any, x: torch.Tensor) -> float:
        return math.log(float(sub.branch(x).var()) / float((sub.alpha * x).var()))

    return per_sublayer(model, idx, log_share)


def identity_coefficients(model: Any, idx: torch.Tensor, targets: torch.Tensor, gen: torch.Generator) -> list[float]:
    """v . J_l v / v . v for each block l (one Rademacher v per block from ``gen``, over all
    B x T x d entries): the mean diagonal of the block's Jacobian, from the recorded stream
    (block l maps x_{l-1} to x_l). Pre-LN: 1 + tr(J_F J_LN)/n; Post-LN: tr(J_LN (I + J_F))/n,
    where J_LN divides by the std of x + F(x)."""
    with recording(as_subject(model)) as rec:  # the stream states keep their graph
        model(idx, targets)
    out = []
    for x, y in zip(rec.stream[:-1], rec.stream[1:]):
        # drawn on the CPU (the generator's), then moved: the same tangents on every device
        v = torch.randint(0, 2, y.shape, generator=gen).to(device=y.device, dtype=y.dtype) * 2 - 1
        (g,) = torch.autograd.grad(y, x, v, retain_graph=True)
        out.append(float((g * v).sum() / v.numel()))
    return out


def identity_path(model: Any, idx: torch.Tensor, targets: torch.Tensor, gen: torch.Generator) -> list[float]:
    """The identity ("first") term of Post-LN's end-to-end Jacobian: the product of the
    LayerNorm Jacobians alone, prod_k J_LN_k, with every J_F term dropped. Each J_LN_k is
    taken at the input its norm sees in the forward pass (recorded); a Gaussian tangent v
    from ``gen`` is pushed through them in order (forward mode, ``torch.func.jvp``) and the
    return is ||v_k|| / ||v_{k-1}|| per norm (2 per block: after attention and after the FFN)."""
    subject = as_subject(model)
    norms = [getattr(b, name).norm for b in model.blocks for name in SUBLAYERS]
    names = norm_names(subject)
    with torch.no_grad(), recording(subject, stream=False, norms=True) as rec:
        model(idx, targets)
    ins = [rec.norm_in[names[id(n)]] for n in norms]
    v = torch.randn(ins[0].shape, generator=gen).to(ins[0])  # (drawn on the CPU, as above)
    out = []
    for n, u in zip(norms, ins):
        w = torch.func.jvp(n, (u,), (v,))[1].detach()
        out.append(float(w.norm() / v.norm()))
        v = w
    return out


PER_BLOCK = ("identity_coefficients", "norm_gain", "branch_share", "identity_path")  # per_block's, in order


def not_applicable(model: Any) -> dict[str, str]:
    """The measurements of :data:`PER_BLOCK` that do not fit the lab model ``model``, each with
    why: ``norm_gain`` and ``identity_path`` read Post-LN's x <- LN(x + F(x)) and
    ``branch_share`` DeepNorm's alpha, so each needs that placement in every sub-layer;
    ``identity_coefficients`` fits any lab model."""
    from normlab.model.placements import DeepNorm, Post

    kinds = {type(getattr(b, name)) for b in model.blocks for name in SUBLAYERS}
    has = f"in every sub-layer; this model's sub-layers: {', '.join(sorted(k.__name__ for k in kinds))}"
    out = {}
    if kinds != {Post}:
        out["norm_gain"] = out["identity_path"] = f"needs Post-LN (x <- LN(x + F(x))) {has}"
    if kinds != {DeepNorm}:
        out["branch_share"] = f"needs DeepNorm (x <- LN(alpha x + F(x))) {has}"
    return {k: out[k] for k in PER_BLOCK if k in out}


def per_block(model: Any, idx: torch.Tensor, targets: torch.Tensor, seed: int = 0) -> dict[str, list[Any]]:
    """Every measurement of :data:`PER_BLOCK` that fits the lab model ``model``
    (:func:`not_applicable`) on the batch ``idx``, one entry per block: a number
    (``identity_coefficients``) or ``{"attn": ..., "ffn": ...}`` (the two sub-layers;
    ``norm_gain``'s each ``{"ratio", "gain"}``). The random tangents come from generators
    seeded with ``seed``, one per measurement (as :mod:`normlab.diagnostics.measurements` draws them)."""
    skip = not_applicable(model)

    def pairs(values: list[Any]) -> list[dict[str, Any]]:
        return [dict(zip(SUBLAYERS, values[i:i + len(SUBLAYERS)])) for i in range(0, len(values), len(SUBLAYERS))]

    out: dict[str, list[Any]] = {}
    for name in PER_BLOCK:
        if name in skip:
            continue
        if name == "identity_coefficients":
            out[name] = identity_coefficients(model, idx, targets, torch.Generator().manual_seed(seed))
        elif name == "identity_path":
            out[name] = pairs(identity_path(model, idx, targets, torch.Generator().manual_seed(seed)))
        else:
            out[name] = pairs((norm_gain if name == "norm_gain" else branch_share)(model, idx))
    return out
