"""Init ``torch_default`` (seed 002's code: PyTorch's modules at their defaults) against its
formula and against PyTorch's own modules; and the per-module hooks leave gpt2's and xavier's
draws as they were."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from normlab.model.catalogue import INITS
from normlab.model.config import ModelConfig
from normlab.model.init import TorchDefaultInit, init_weights
from normlab.model.placement import Placement
from normlab.model.transformer import TransformerLM

D, H, V = 64, 4, 65


def _model(tie: bool = False, init: str = "torch_default", seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    m = TransformerLM(ModelConfig(n_layer=3, d_model=D, n_head=H, vocab_size=V, context=64, placement="pre",
                                  init=init, tie_embeddings=tie))
    return m.requires_grad_(False)


def _uniform(w: torch.Tensor, bound: float) -> None:
    """Drawn from U(-bound, bound): inside it, reaching near it, with the uniform's std."""
    a = w.detach().abs()
    assert float(a.max()) <= bound and float(a.max()) > 0.95 * bound, (float(a.max()), bound)
    assert abs(float(w.std()) / (bound / math.sqrt(3)) - 1) < 0.06, (float(w.std()), bound)


def test_every_tensor_follows_the_formula() -> None:
    m = _model()
    assert isinstance(INITS.get("torch_default"), TorchDefaultInit) and m.embed_scale == 1.0
    for emb in (m.wte, m.wpe):  # nn.Embedding: N(0, 1)
        assert abs(float(emb.weight.std()) - 1) < 0.05 and abs(float(emb.weight.mean())) < 0.05
    for b in m.blocks:
        att, ffn = b.attn.branch, b.ffn.branch
        _uniform(att.qkv.weight, math.sqrt(6 / (D + 3 * D)))  # xavier_uniform_ over the fused (3d, d) matrix
        assert not att.qkv.bias.any() and not att.proj.bias.any()  # nn.MultiheadAttention zeroes both biases
        _uniform(att.proj.weight, 1 / math.sqrt(D))
        _uniform(ffn.fc.weight, 1 / math.sqrt(D))
        _uniform(ffn.fc.bias, 1 / math.sqrt(D))  # nn.Linear's bias: U(+-1/sqrt(fan_in)), like its weight
        _uniform(ffn.proj.weight, 1 / math.sqrt(4 * D))
        assert float(ffn.proj.bias.abs().max()) <= 1 / math.sqrt(4 * D) and ffn.proj.bias.any()
    _uniform(m.lm_head.weight, 1 / math.sqrt(D))


def test_the_formula_is_pytorchs_own() -> None:
    """The same bounds and spreads as the modules seed 002's code builds (nn.MultiheadAttention,
    nn.Linear, nn.Embedding), so a change of PyTorch's defaults shows here."""
    torch.manual_seed(1)
    mha, lin, emb = (x.requires_grad_(False) for x in (nn.MultiheadAttention(D, H), nn.Linear(D, 4 * D), nn.Embedding(V, D)))
    m = _model()
    att, ffn = m.blocks[0].attn.branch, m.blocks[0].ffn.branch
    uniform = [(mha.in_proj_weight, att.qkv.weight), (mha.out_proj.weight, att.proj.weight),
               (lin.weight, ffn.fc.weight), (lin.bias, ffn.fc.bias)]
    for theirs, ours in [*uniform, (emb.weight, m.wte.weight)]:
        assert theirs.shape == ours.shape
        assert abs(float(ours.std()) / float(theirs.std()) - 1) < 0.1, (theirs.shape, float(ours.std()), float(theirs.std()))
    for theirs, ours in uniform:  # the same bound: both reach about the same largest value
        assert abs(float(ours.abs().max()) / float(theirs.abs().max()) - 1) < 0.05, theirs.shape
    assert not mha.in_proj_bias.any() and not mha.out_proj.bias.any()


def test_a_tied_head_is_the_embedding() -> None:
    m = _model(tie=True)
    assert m.lm_head.weight is m.wte.weight and abs(float(m.wte.weight.std()) - 1) < 0.05


def _old_loop(model: TransformerLM) -> None:
    """init_weights before the per-module hooks: every Linear N(0, linear_std), bias 0; every
    Embedding N(0, embed_std)."""
    scheme, cfg = model.init_scheme, model.cfg
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, scheme.linear_std(module, cfg))
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, scheme.embed_std(cfg))
        for module in model.modules():
            if isinstance(module, Placement):
                module.init_()
        model.stream.init_(model)


@pytest.mark.parametrize("init", ["gpt2", "xavier"])
def test_gpt2_and_xavier_draw_what_they_drew_before(init: str) -> None:
    a, b = _model(init=init), _model(init=init)
    torch.manual_seed(7)
    init_weights(a, a.init_scheme)
    torch.manual_seed(7)
    _old_loop(b)
    for (n, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), n
