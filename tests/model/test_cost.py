"""model/cost.py: parameter counts equal the built model's, FLOPs equal torch's flop counter.

Tolerance: none beyond float rounding (rel 1e-9). ``torch.utils.flop_counter`` counts
matrix products only (mm, addmm without its bias, bmm, attention) and so does
``cost.step_flops``; element-wise work (norms, softmax, RoPE, GELU, AdamW) is outside
both, so the two must agree exactly. The counter has no formula for CPU's fused
attention kernel in this torch (it would count attention as 0), so the counted pass
runs attention on the math backend, whose two bmm's per direction it does count.
"""

from __future__ import annotations

import pytest
import torch

from normlab.model import cost
from normlab.model.catalogue import PLACEMENTS
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM

SHAPE = dict(vocab_size=97, context=32, n_layer=2, d_model=64, n_head=4)
CONFIGS = {
    "gpt2": ModelConfig(**SHAPE),
    "llama-gqa-rope": ModelConfig(**SHAPE, n_kv_head=1, pos="rope", ffn="swiglu", norm="rmsnorm", bias=False,
                                  tie_embeddings=False, d_ff=96),
    "swiglu": ModelConfig(**SHAPE, ffn="swiglu"),
}


def _counted(model: TransformerLM, batch: int) -> int:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.randint(0, model.cfg.vocab_size, (batch, model.cfg.context), generator=torch.Generator().manual_seed(0))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        _, loss = model(x, x)
        loss.backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_step_flops_equal_the_flop_counter_on_forward_and_backward(name: str) -> None:
    cfg = CONFIGS[name]
    torch.manual_seed(0)
    model = TransformerLM(cfg)
    counted = _counted(model, batch=3)
    assert counted > 0
    assert cost.step_flops(cfg, batch=3) == pytest.approx(counted, rel=1e-9)
    assert cost.step_flops(model, batch=3) == cost.step_flops(cfg, batch=3)  # model or config: one answer
    assert cost.flops_per_token(cfg) == pytest.approx(counted / (3 * cfg.context), rel=1e-9)


def test_gqa_swiglu_and_context_change_the_count_as_the_shapes_say() -> None:
    d, T, L = 64, 32, 2
    mha, gqa = CONFIGS["gpt2"], ModelConfig(**SHAPE, n_kv_head=1)
    # W_K and W_V shrink from d x d to d x d_head each: 2 * T * d * 2 * (d - d_head) per layer, per direction x3
    saved = 3 * L * 2 * T * d * 2 * (d - d // 4)
    assert cost.step_flops(mha, 1) - cost.step_flops(gqa, 1) == saved
    assert cost.parameters(mha) - cost.parameters(gqa) == L * 2 * (d * (d - d // 4) + (d - d // 4))
    att = cost.forward_flops(mha)["attention"]
    assert att == L * 4 * T * T * d
    assert cost.forward_flops(mha, context=T // 2)["attention"] == att / 4  # quadratic in T
    swi = ModelConfig(**SHAPE, ffn="swiglu")
    assert cost.forward_flops(swi)["linear"] - cost.forward_flops(mha)["linear"] == L * 2 * T * d * 4 * d


@pytest.mark.parametrize("placement", PLACEMENTS.names())
def test_parameters_of_a_config_equal_the_built_model(placement: str) -> None:
    cfg = ModelConfig(**{**SHAPE, "n_layer": 2}, placement=placement, qk_norm="l2" if placement == "pre" else None)
    built = TransformerLM(cfg)
    assert cost.parameters(cfg) == sum(p.numel() for p in built.parameters()) == cost.parameters(built)


def test_tied_head_counts_once_and_rope_has_no_position_table() -> None:
    V, d, T = 97, 64, 32
    tied, untied = ModelConfig(**SHAPE), ModelConfig(**SHAPE, tie_embeddings=False)
    assert cost.parameters(untied) - cost.parameters(tied) == V * d
    assert cost.parameters(tied) - cost.parameters(ModelConfig(**SHAPE, pos="rope")) == T * d
    assert cost.forward_flops(tied) == cost.forward_flops(untied)  # the head is one product either way


def test_anything_else_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="TransformerLM or a ModelConfig"):
        cost.parameters({"d_model": 64})
