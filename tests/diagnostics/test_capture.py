"""The one capture path (diagnostics/hooks.py): every placement, the second stream of
two-stream placements, norm and sub-layer inputs, a skipped block, sites in order, hooks removed."""

from __future__ import annotations

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.diagnostics.hooks import recording
from normlab.diagnostics.subject import as_subject
from normlab.model.catalogue import PLACEMENTS


def _model(placement: str, n_layer: int = 3) -> TransformerLM:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=11, context=6, n_layer=n_layer, d_model=8, n_head=2, placement=placement,
                      init="xavier")
    return TransformerLM(cfg)


def _by_hand(model: TransformerLM, idx: torch.Tensor) -> list:
    """The block states x_0..x_L with the model's pieces, block after block."""
    h = [model.stream.begin(model.embed(idx))]
    for b in model.blocks:
        h.append(b(h[-1]))
    return h


@pytest.mark.parametrize("placement", PLACEMENTS.names())
def test_recording_matches_piecewise_forward(placement: str) -> None:
    model = _model(placement)
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(1))
    with recording(as_subject(model)) as rec:
        logits, _ = model(idx)
    manual = _by_hand(model, idx)
    torch.testing.assert_close(model.head(manual[-1]), logits)
    assert len(rec.stream) == 4
    for got, h in zip(rec.stream, manual):
        assert got.shape == (2, 6, 8)
        torch.testing.assert_close(got, h[0] if isinstance(h, tuple) else h)
    # a second stream: a second tensor shaped like the first (ResiDual's d, SiameseNorm's y, mHC's
    # x_2); Attention Residuals' state carries its sources as a tuple beside the sum, not a stream
    two = all(isinstance(h, tuple) and isinstance(h[1], torch.Tensor) and h[1].shape == h[0].shape for h in manual)
    aux = rec.aux_stream()
    assert (aux is not None) == two  # a second stream exactly for the two-stream placements
    if two:
        for got, h in zip(aux, manual):
            torch.testing.assert_close(got, h[1])
    # autograd-connected: the loss reaches the first block's input
    g = torch.autograd.grad(logits.square().mean(), rec.stream[0])[0]
    assert g.abs().sum() > 0


def test_norm_inputs_are_the_formula_terms() -> None:
    model = _model("post", n_layer=2)
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(2))
    with recording(as_subject(model), norms=True) as rec:
        model(idx)
    # Post-LN: x_out = LN(x + F(x)); the norm's input is exactly x + F(x) of the attention sub-layer.
    x = rec.stream[0]
    torch.testing.assert_close(rec.norm_in["blocks.0.attn.norm"], x + model.blocks[0].attn.branch(x))
    # Post-LN has no final norm (its last block ends in one)
    assert sorted(rec.norm_in) == ["blocks.0.attn.norm", "blocks.0.ffn.norm", "blocks.1.attn.norm", "blocks.1.ffn.norm"]


def test_resi_dual_main_stream_is_x_and_the_second_is_d() -> None:
    model = _model("resi_dual", n_layer=2)
    idx = torch.randint(0, 11, (1, 6), generator=torch.Generator().manual_seed(3))
    with recording(as_subject(model)) as rec:
        model(idx)
    x0 = model.embed(idx)
    torch.testing.assert_close(rec.stream[0], x0)
    x, d = model.blocks[0]((x0, x0))
    torch.testing.assert_close(rec.stream[1], x)
    torch.testing.assert_close(rec.aux_stream()[1], d)
    assert not torch.allclose(x, d)  # so recording d instead of x would have been caught


def test_a_skipped_block_passes_its_input_on() -> None:
    model = _model("pre", n_layer=3)
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        with recording(as_subject(model), skip=1) as rec:
            logits, _ = model(idx)
        h = _by_hand(model, idx)
        want = model.head(model.blocks[2](h[1]))  # block 2 (0-based 1) deleted
    torch.testing.assert_close(logits, want)
    torch.testing.assert_close(rec.stream[2], rec.stream[1])
    assert not torch.allclose(logits, model(idx)[0])  # outside the context the block runs again


def test_sites_come_in_the_order_the_forward_ran() -> None:
    model = _model("pre", n_layer=2)
    with recording(as_subject(model), stream=False, sites=True) as rec:
        model(torch.zeros(1, 6, dtype=torch.long))
    assert [n for n, _ in rec.sites] == ["embed", "blocks.0.attn", "blocks.0.ffn", "blocks.0",
                                         "blocks.1.attn", "blocks.1.ffn", "blocks.1"]
    torch.testing.assert_close(rec.sites[3][1], rec.sites[2][1])  # a block's output is its FFN sub-layer's


def test_inputs_are_what_each_sub_layer_received() -> None:
    model = _model("post", n_layer=2)
    idx = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(1))
    with recording(as_subject(model), stream=False, sites=True, inputs=True) as rec:
        model(idx)
    assert list(rec.inputs) == ["blocks.0.attn", "blocks.0.ffn", "blocks.1.attn", "blocks.1.ffn"]
    sites = dict(rec.sites)
    x = model.embed(idx)
    for i, b in enumerate(model.blocks):  # a lab block: attention on the block's input, the FFN on its output
        torch.testing.assert_close(rec.inputs[f"blocks.{i}.attn"], x, rtol=0, atol=0)
        torch.testing.assert_close(rec.inputs[f"blocks.{i}.ffn"], sites[f"blocks.{i}.attn"], rtol=0, atol=0)
        x = b(x)
    assert not any(t.requires_grad for t in rec.inputs.values())  # values only, like the norm inputs


def test_hooks_removed_on_exit_and_on_error() -> None:
    model = _model("pre", n_layer=2)
    idx = torch.zeros(1, 6, dtype=torch.long)
    with recording(as_subject(model), norms=True) as rec:
        model(idx)
    model(idx)
    assert len(rec.stream) == 3 and len(rec.norm_in) == 5  # 2 per block + final norm
    with pytest.raises(RuntimeError), recording(as_subject(model), norms=True, sites=True, inputs=True) as rec2:
        raise RuntimeError("boom")
    model(idx)
    assert rec2.stream == []
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
