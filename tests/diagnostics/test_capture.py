"""Capture hooks: every placement, main stream of two-stream placements, hooks removed."""

from __future__ import annotations

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.model.capture import capture
from normlab.model.catalogue import PLACEMENTS


def _model(placement: str, n_layer: int = 3) -> TransformerLM:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=11, context=6, n_layer=n_layer, d_model=8, n_head=2, placement=placement,
                      init="xavier")
    return TransformerLM(cfg)


def _placements() -> list[str]:
    return PLACEMENTS.names()


@pytest.mark.parametrize("placement", _placements())
def test_capture_matches_piecewise_forward(placement: str) -> None:
    model = _model(placement)
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(1))
    with capture(model) as cap:
        logits, _ = model(idx)
    # Recompute by hand with the piecewise API of the model contract.
    h = model.stream.begin(model.embed(idx))
    manual_in, manual_out = [], []
    for b in model.blocks:
        manual_in.append(h[0] if isinstance(h, tuple) else h)
        h = b(h)
        manual_out.append(h[0] if isinstance(h, tuple) else h)
    torch.testing.assert_close(model.head(h), logits)
    assert len(cap.block_in) == len(cap.block_out) == 3
    for a, b in zip(cap.block_in + cap.block_out, manual_in + manual_out):
        assert a.shape == (2, 6, 8)
        torch.testing.assert_close(a, b)
    for li in range(2):
        assert cap.block_in[li + 1] is cap.block_out[li]  # blocks are chained
    assert set(cap.branch_out) == {(li, k) for li in range(3) for k in ("attn", "ffn")}
    # autograd-connected: the loss reaches the first block's input
    g = torch.autograd.grad(logits.square().mean(), cap.block_in[0])[0]
    assert g.abs().sum() > 0


def test_branch_and_norm_inputs_are_the_formula_terms() -> None:
    model = _model("post", n_layer=2)
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(2))
    with capture(model) as cap:
        model(idx)
    # Post-LN: x_out = LN(x + F(x)); the norm's input is exactly x + F(x) of the attention sub-layer.
    x = cap.block_in[0]
    f = cap.branch_out[(0, "attn")]
    torch.testing.assert_close(f, model.blocks[0].attn.branch(x))
    torch.testing.assert_close(cap.norm_in["blocks.0.attn.norm"], x + f)


def test_resi_dual_records_main_stream_x() -> None:
    model = _model("resi_dual", n_layer=2)
    idx = torch.randint(0, 11, (1, 6), generator=torch.Generator().manual_seed(3))
    with capture(model) as cap:
        model(idx)
    x0 = model.embed(idx)
    torch.testing.assert_close(cap.block_in[0], x0)
    x, d = model.blocks[0]((x0, x0))
    torch.testing.assert_close(cap.block_out[0], x)
    assert not torch.allclose(x, d)  # so recording d instead of x would have been caught


def test_hooks_removed_on_exit_and_on_error() -> None:
    model = _model("pre", n_layer=2)
    idx = torch.zeros(1, 6, dtype=torch.long)
    with capture(model) as cap:
        model(idx)
    model(idx)
    assert len(cap.block_in) == 2 and len(cap.norm_in) == 5  # 2 per block + final norm
    with pytest.raises(RuntimeError), capture(model) as cap2:
        raise RuntimeError("boom")
    model(idx)
    assert cap2.block_in == []
    assert all(not b._forward_hooks and not b._forward_pre_hooks for b in model.blocks)
