"""What a model costs: its parameter count and the FLOPs of a training step, read off the
built model (the one owner of both numbers; the step budget and the bench call it).

Every function takes a ``TransformerLM`` or a ``ModelConfig``. A config is built on the
``meta`` device (``meta_model``: no memory, no arithmetic), so the numbers come from the modules the
config really resolves to: grouped-query attention's narrower W_K and W_V, SwiGLU's
two input matrices, RoPE's missing position table, a tied head counted once, each
placement's own norms and gains.

FLOPs count matrix products only, 2 per multiply-add, for one sequence of T tokens:

| tensor                        | forward FLOPs per sequence                  |
|-------------------------------|---------------------------------------------|
| every ``nn.Linear`` (in, out) | 2 * T * in * out  (qkv: out = d + 2 * n_kv_head * d_head; SwiGLU fc: out = 2 d_ff; the head: d x V) |
| attention scores q k^T        | 2 * T * T * d  (n_head heads of d_head, the full T x T square) |
| attention values p v          | 2 * T * T * d                               |

Backward is twice the forward (gradients of the input and of the weight of each
product; for attention, 4 products against the forward's 2), so a training step is
``3 * forward * B``. Embedding lookups, norms, biases, activations, RoPE rotations,
softmax and the loss are not counted: they are element-wise work, not products,
and ``torch.utils.flop_counter`` does not count them either. The T x T square is counted
whole, as the flop counter counts ``scaled_dot_product_attention`` (and as PaLM, appendix
B, does), although a causal kernel may skip the masked half. Every linear layer is taken
to see every token once (true of every built-in placement and FFN).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from torch import nn

from normlab.model.attention import CausalSelfAttention
from normlab.model.build import ResolvedModel
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM

if TYPE_CHECKING:
    from normlab.model.transformer import TransformerLM

Model = Union["TransformerLM", ModelConfig]


def meta_model(what: Model, plan: ResolvedModel | None = None) -> TransformerLM:
    """``what`` itself if it is a model, else the TransformerLM of a config built on the meta
    device (shapes only; build once to ask it several questions); ``plan``: the config resolved."""

    if isinstance(what, TransformerLM):
        return what
    if not isinstance(what, ModelConfig):
        raise TypeError(f"expected a TransformerLM or a ModelConfig, got {type(what).__name__}")
    import torch

    with torch.device("meta"):
        return TransformerLM(what, plan)


def count(module: nn.Module) -> int:
    """Trainable and frozen parameters of any module (a lab model, a Hugging Face one, a list of
    blocks), a tied tensor counted once: the one parameter count of the lab."""
    return sum(p.numel() for p in module.parameters())


def parameters(what: Model) -> int:
    """Parameters of a model or config (a config is built on the meta device), as ``count``."""
    return count(meta_model(what))


def forward_flops(what: Model, context: int | None = None) -> dict[str, float]:
    """Forward FLOPs of one sequence of ``context`` tokens (default the model's context), by
    kind of tensor: ``linear`` (every nn.Linear, the head included) and ``attention`` (scores
    and values); see the module docstring for the formula per tensor."""

    model = meta_model(what)
    T = context if context is not None else model.cfg.context
    linear = attention = 0.0
    for m in model.modules():
        if isinstance(m, nn.Linear):
            linear += 2.0 * T * m.in_features * m.out_features
        elif isinstance(m, CausalSelfAttention):
            attention += 2 * (2.0 * T * T * m.n_head * m.head_dim)  # q k^T and p v
    return {"linear": linear, "attention": attention}


def step_flops(what: Model, batch: int, context: int | None = None) -> float:
    """FLOPs of one training step (forward + backward) on ``batch`` sequences of ``context``
    tokens: 3 * the forward matrix products."""
    return 3.0 * batch * sum(forward_flops(what, context).values())


def flops_per_token(what: Model, context: int | None = None) -> float:
    """Training FLOPs per token at sequence length ``context`` (attention makes it grow with T)."""
    model = meta_model(what)
    T = context if context is not None else model.cfg.context
    return step_flops(model, 1, T) / T
