"""The optimizer step around clipping, shared by the solo loop and the batched loop.

Both loops take the learning rate of a step from :func:`lr_now`, the clipping threshold
from :func:`clip_limit` and clip with :func:`clip_grads_`, ``clip_grad_norm_``'s two
halves (``torch.nn.utils.get_total_norm``, then one foreach scaling) applied to gradient
tensors, so that the batched loop applies them to one trial's slices of its stack
(``normlab.train.stack``).

The update itself differs only in its container: the solo loop calls its
``torch.optim.AdamW(fused=True)`` (:func:`optimizer_step`); the batched loop calls that
optimizer's kernel, ``torch._fused_adamw_``, on each trial's slices, per parameter group.
Same kernels, same operand order, so a batched trial rounds as its solo run does
(tests/bench/test_batched.py).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn

from normlab.run.schedules import factor_at, lr_at
from normlab.run.train_config import OptimConfig

if TYPE_CHECKING:
    from normlab.model.transformer import TransformerLM


def lr_now(o: OptimConfig, step: int, total: int) -> float:
    """Learning rate of 0-based step ``step`` of a ``total``-step run (AdamW's groups)."""
    return lr_at(o.schedule, step, o.lr, o.warmup_steps, total, o.min_lr, **_options(o))


def muon_lr_now(o: OptimConfig, step: int, total: int) -> float:
    """The Muon group's learning rate at that step: ``optim.muon_lr`` times the factor that
    :func:`lr_now` applies to ``optim.lr`` (so its floor is muon_lr * min_lr / lr)."""
    return o.muon_lr * factor_at(o.schedule, step, o.warmup_steps, total, o.min_lr / o.lr, **_options(o))


def _options(o: OptimConfig) -> dict[str, float | str]:
    return {"decay_frac": o.decay_frac, "decay_shape": o.decay_shape}


def clip_limit(o: OptimConfig) -> float:
    """``optim.grad_clip`` as a threshold: 0 (off) is no limit, the norm is computed anyway."""
    return o.grad_clip if o.grad_clip > 0 else math.inf


@torch.no_grad()
def clip_grads_(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale ``grads`` in place to global L2 norm <= ``max_norm``; returns the unclipped norm.

    ``clip_grad_norm_(params, max_norm)`` on the parameters owning ``grads``, computed
    the same way (the total of foreach norms, coefficient max_norm / (norm + 1e-6) capped at 1).
    """
    total = torch.nn.utils.get_total_norm(grads, 2.0)
    if grads:
        torch._foreach_mul_(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))
    return total


def diverged(loss: torch.Tensor, grad_norm: torch.Tensor, limit: float | torch.Tensor) -> torch.Tensor:
    """Whether a step diverged (elementwise, on the device): a non-finite or too large loss,
    or a non-finite gradient with a finite loss (the update has just poisoned the weights)."""
    return ~torch.isfinite(loss) | ~torch.isfinite(grad_norm) | (loss > limit)


def optimizer_step(model: TransformerLM, opt: torch.optim.Optimizer, params: list[nn.Parameter],
                   clip: float) -> torch.Tensor:
    """One solo update: clip, AdamW, drop the gradients, the placements' weight hooks
    (nGPT re-normalises). Returns the global gradient norm before clipping."""
    grad_norm = clip_grads_([p.grad for p in params if p.grad is not None], clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    model.after_step()
    return grad_norm
