"""Keel (Chen & Wei 2026, arXiv 2601.19895): x <- LN_out(alpha x + F(LN_in(x))) per sub-layer.

The block is checked by hand with the sources' norm (RMSNorm, no bias), alpha's counting
(default 2L: the paper's L counted in sub-layers), the option's errors, per-layer mixing and
the refusal without a norm. The formula at the default settings is also in test_formulas.SINGLE.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.core.errors import ConfigError
from normlab.model.build import resolve_model
from normlab.model.placements_keel import Keel, keel_alpha

sys.path.insert(0, str(Path(__file__).parent))
from test_formulas import F_, SINGLE, TOL, build, ln, run_model  # noqa: E402 - the hand-made norms and branches

SMALL = dict(vocab_size=13, context=8, d_model=16, n_head=2)


def keel_by_hand(sub, x: torch.Tensor, alpha: float) -> torch.Tensor:
    return ln(alpha * x + F_(sub, ln(x, sub.norm_in)), sub.norm_out)


@pytest.mark.parametrize("alpha,expected", [("sublayers", 6.0), ("blocks", 3.0), (2.5, 2.5)])
def test_each_block_is_the_formula_with_rmsnorm(alpha, expected: float) -> None:
    """RMSNorm without bias, as the sources describe; both sub-layers of every block by hand."""
    model = build({"name": "keel", "alpha": alpha}, L=3, norm="rmsnorm", bias=False)
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    for block in model.blocks:
        assert block.attn.alpha == block.ffn.alpha == expected
        assert block.attn.norm_in is not block.attn.norm_out  # two norms, two gains
        h = keel_by_hand(block.attn, x, expected)
        assert torch.allclose(block.attn(x), h, atol=TOL, rtol=0)
        ref = keel_by_hand(block.ffn, h, expected)
        assert torch.allclose(block(x), ref, atol=TOL, rtol=0)
        x = ref
    assert isinstance(model.norm_f, torch.nn.Identity)  # post-style: LN_out ends the last sub-layer
    assert torch.allclose(model(idx)[0], x @ model.wte.weight.T, atol=TOL, rtol=0)


@pytest.mark.parametrize("n_layer", [1, 2, 6, 12])
def test_alpha_default_counts_sub_layers(n_layer: int) -> None:
    model = TransformerLM(ModelConfig(n_layer=n_layer, placement="keel", **SMALL))
    assert {s.alpha for b in model.blocks for s in (b.attn, b.ffn)} == {2.0 * n_layer}
    blocks = TransformerLM(ModelConfig(n_layer=n_layer, placement={"name": "keel", "alpha": "blocks"}, **SMALL))
    assert blocks.blocks[0].ffn.alpha == float(n_layer)
    fixed = TransformerLM(ModelConfig(n_layer=n_layer, placement={"name": "keel", "alpha": 7}, **SMALL))
    assert fixed.blocks[-1].attn.alpha == 7.0 and isinstance(fixed.blocks[-1].attn.options.alpha, float)
    assert keel_alpha("sublayers", 1000) == 2000.0  # the paper's depths, without building them


@pytest.mark.parametrize("value,fix", [
    ("L", "use 'sublayers' (alpha = 2L), 'blocks' (alpha = L) or a number > 0"),
    ("layers", "use 'sublayers' (alpha = 2L), 'blocks' (alpha = L) or a number > 0"),
    (0.0, "use 'sublayers' (alpha = 2L), 'blocks' (alpha = L) or a number > 0"),
    (-2.0, "use 'sublayers' (alpha = 2L), 'blocks' (alpha = L) or a number > 0"),
    (True, "expected a string or a number"),
])
def test_a_wrong_alpha_names_the_option_and_its_values(value, fix: str) -> None:
    with pytest.raises(ConfigError) as e:
        resolve_model(ModelConfig(n_layer=2, placement={"name": "keel", "alpha": value}, **SMALL))
    assert str(e.value) == f"model.placement.alpha={value!r}: {fix}"
    with pytest.raises(ConfigError, match=r"^model\.placement\[1\]\.alpha='L': use 'sublayers'"):
        resolve_model(ModelConfig(n_layer=2, placement=["pre", {"name": "keel", "alpha": "L"}], **SMALL))


def test_keel_composes_per_layer() -> None:
    layout = [{"attn": "pre", "ffn": "keel"}, "keel", {"attn": {"name": "keel", "alpha": "blocks"}, "ffn": "post"}]
    model = build(layout, L=3)
    assert model.layout == [("pre", "keel"), ("keel", "keel"), ("keel", "post")]
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    for (a, f), block in zip(model.layout, model.blocks):
        for name, sub in ((a, block.attn), (f, block.ffn)):
            if name == "keel":  # alpha counts the model's sub-layers (2L = 6) unless set
                x = keel_by_hand(sub, x, 3.0 if sub.options.alpha == "blocks" else 6.0)
            else:
                x = SINGLE[name](sub, x)
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)


def test_the_ports_block_1_is_a_per_layer_list() -> None:
    """docs/placements.md: third-party ports run block 1 as x + F(LN(x)), then LN_out(x + F(LN_in(x)))
    (no alpha), every later block as Keel with alpha = 2L, and a final norm."""
    model = build([{"attn": "pre", "ffn": "pre_post"}, "keel", "keel"], L=3, norm="rmsnorm", bias=False,
                  final_norm=True)
    idx = torch.randint(0, 11, (2, 6))
    b1 = model.blocks[0]
    x = model.embed(idx)
    x = x + F_(b1.attn, ln(x, b1.attn.norm))
    x = ln(x + F_(b1.ffn, ln(x, b1.ffn.norm_in)), b1.ffn.norm_out)
    for block in model.blocks[1:]:
        x = keel_by_hand(block.ffn, keel_by_hand(block.attn, x, 6.0), 6.0)
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)
    assert torch.allclose(model(idx)[0], ln(x, model.norm_f) @ model.wte.weight.T, atol=TOL, rtol=0)


def test_keel_needs_a_norm_and_changes_no_weight_at_init() -> None:
    with pytest.raises(ConfigError, match=r"^model\.norm='none': placement keel rescales the shortcut"):
        resolve_model(ModelConfig(n_layer=2, placement="keel", norm="none", **SMALL))
    # No special init (the paper needs none): the same draws as Post-LN, both norms' gains at 1.
    cfg = dict(n_layer=3, init="xavier", **SMALL)
    torch.manual_seed(0)
    post = TransformerLM(ModelConfig(placement="post", **cfg)).state_dict()
    torch.manual_seed(0)
    keel = TransformerLM(ModelConfig(placement="keel", **cfg)).state_dict()
    for name, value in keel.items():
        if ".norm_in." in name or ".norm_out." in name:
            assert bool((value == (1.0 if name.endswith("weight") else 0.0)).all()), name
        else:
            assert torch.equal(value, post[name]), name
    assert Keel.final_norm is False and Keel.needs_norm is True
