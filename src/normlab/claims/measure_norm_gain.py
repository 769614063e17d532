"""What a Post-LN LayerNorm does to the sub-layer output it normalises, at initialisation
(seed 001: "the sub-layer's output is relatively small, and LayerNorm over-amplifies it").

Per sub-layer x <- LN(x + F(x)) of a probe-sized Post-LN model, measured on one forward pass:

- ``ratio``: RMS(F(x)) / RMS(x), how small the sub-layer's output is against the stream;
- ``gain``: ||J_LN(x + F) F|| / ||F||, the LayerNorm's Jacobian at the point it normalises,
  applied to the sub-layer's own output (forward mode, ``torch.func.jvp``): above 1 the norm
  amplifies F's contribution, below 1 it shrinks it. Linearised: F is the small term.
"""

from __future__ import annotations

from typing import Any, Callable

import torch


def per_sublayer(model: Any, idx: torch.Tensor, fn: Callable[[Any, torch.Tensor], Any]) -> list[Any]:
    """``fn(sub, x)`` for every sub-layer placement of the lab model ``model`` (2 per block, in
    forward order) at the input ``x`` it sees in one no-grad forward pass on ``idx``."""
    subs = [s for b in model.blocks for s in (b.attn, b.ffn)]
    got: list[Any] = []

    def hook(sub: Any) -> Any:
        def keep(_m: Any, a: tuple, _o: Any) -> None:  # returns None: the output is left alone
            got.append(fn(sub, a[0]))
        return keep

    hooks = [s.register_forward_hook(hook(s)) for s in subs]
    try:
        with torch.no_grad():
            model(idx)
    finally:
        for h in hooks:
            h.remove()
    return got


def norm_gain(model: Any, idx: torch.Tensor) -> list[dict[str, float]]:
    """``{"ratio", "gain"}`` per sub-layer (2 per block, in forward order) of the Post-LN lab
    model ``model`` on the batch ``idx``."""

    def measure(sub: Any, x: torch.Tensor) -> dict[str, float]:
        f = sub.branch(x)
        moved = torch.func.jvp(sub.norm, (x + f,), (f,))[1]
        return {"ratio": float(f.pow(2).mean().sqrt() / x.pow(2).mean().sqrt()),
                "gain": float(moved.norm() / f.norm())}

    return per_sublayer(model, idx, measure)
