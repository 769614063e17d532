"""Capture hooks: record the residual stream, branch outputs and norm inputs of one forward.

    with capture(model) as cap:
        logits, loss = model(idx, targets)
    cap.block_in[l]            # (B, T, d) main stream entering block l (0-based)
    cap.block_out[l]           # (B, T, d) main stream leaving block l
    cap.branch_out[(l, "ffn")] # (B, T, d) F(.) of that sub-layer, before the residual add
    cap.norm_in["blocks.3.attn.norm"]  # (..., d) what the norm module received (every registered norm)

The tensors are the ones autograd uses (not detached), so ``torch.autograd.grad(loss,
cap.block_in)`` gives dLoss/dx_l and ``cap.block_out[-1]`` can be differentiated with
respect to any ``cap.block_in[l]`` (end-to-end Jacobians). For the two-stream placement
(ResiDual) a block's state is a tuple (x, d); the main stream x = h[0] is recorded.
``block_in[l + 1] is block_out[l]`` for every placement, because blocks are chained.

Hooks are removed when the context exits, even on error. If the forward runs several
times inside the context, each call appends again (``block_in`` grows by n_layer per call)
and dict entries keep the latest call; use :meth:`Capture.clear` between calls.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

import torch
from torch import nn

from normlab.model.catalogue import norm_types

if TYPE_CHECKING:
    from normlab.model.transformer import TransformerLM


def main_stream(h: Any) -> torch.Tensor:
    """The main residual stream of a block state: ``h`` itself, or ``h[0]`` for (x, d) tuples."""
    return h[0] if isinstance(h, (tuple, list)) else h


class Capture:
    """What one ``capture(model)`` context recorded (see the module docstring)."""

    def __init__(self) -> None:
        self.block_in: list[torch.Tensor] = []
        self.block_out: list[torch.Tensor] = []
        self.branch_out: dict[tuple[int, str], torch.Tensor] = {}
        self.norm_in: dict[str, torch.Tensor] = {}

    def clear(self) -> None:
        self.block_in.clear()
        self.block_out.clear()
        self.branch_out.clear()
        self.norm_in.clear()

    @property
    def stream(self) -> list[torch.Tensor]:
        """x_0 .. x_L: the block inputs followed by the last block's output (L + 1 tensors)."""
        return [*self.block_in, self.block_out[-1]] if self.block_out else list(self.block_in)


@contextmanager
def capture(model: TransformerLM, *, blocks: bool = True, branches: bool = True,
            norms: bool = True) -> Iterator[Capture]:
    """Record activations of ``model`` (a TransformerLM) while the context is open.

    ``blocks``/``branches``/``norms`` switch the three kinds of hooks off when not needed
    (each hook keeps its tensor alive until the context's object is dropped).
    """
    cap = Capture()
    handles: list[torch.utils.hooks.RemovableHandle] = []
    try:
        if blocks:
            for block in model.blocks:
                handles.append(block.register_forward_pre_hook(
                    lambda _m, args: cap.block_in.append(main_stream(args[0]))))
                handles.append(block.register_forward_hook(
                    lambda _m, _args, out: cap.block_out.append(main_stream(out))))
        if branches:
            for i, block in enumerate(model.blocks):
                for kind in ("attn", "ffn"):
                    branch = getattr(getattr(block, kind), "branch", None)
                    if branch is not None:
                        handles.append(branch.register_forward_hook(_store(cap.branch_out, (i, kind))))
        if norms:
            kinds = norm_types()  # every registered norm and qk-norm, read now: later registrations count
            for name, mod in model.named_modules():
                if isinstance(mod, kinds):
                    handles.append(mod.register_forward_pre_hook(_store_in(cap.norm_in, name)))
        yield cap
    finally:
        for h in handles:
            h.remove()


def _store(target: dict, key: Any):
    def hook(_m: nn.Module, _args: tuple, out: torch.Tensor) -> None:
        target[key] = out

    return hook


def _store_in(target: dict, key: Any):
    def hook(_m: nn.Module, args: tuple) -> None:
        target[key] = args[0]

    return hook
