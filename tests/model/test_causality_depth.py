"""Causality for every placement; finite forward+backward over depth x norm x qk_norm x init."""

from __future__ import annotations

import itertools

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.core.errors import ConfigError
from normlab.model.build import resolve_model
from normlab.model.catalogue import LAYOUTS, NORMS, PLACEMENTS, QK_NORMS

ALL = [*PLACEMENTS.names(), *LAYOUTS.names()]
SMALL = dict(vocab_size=13, context=8, d_model=16, n_head=2)


@pytest.mark.parametrize("placement", [*ALL, "rezero", "table"])
def test_causal(placement: str) -> None:
    kw: dict = dict(placement=placement)
    if placement == "rezero":
        kw = dict(placement={"name": "none", "rezero": True})
    if placement == "table":
        kw = dict(placement=[{"attn": "sandwich", "ffn": "post"}, {"attn": "admin", "ffn": "lns"}])
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(n_layer=2, init="xavier", pos="learned", **SMALL, **kw)).eval()
    if placement == "rezero":  # open the gates, or the branches (and any leak) would be invisible
        with torch.no_grad():
            for b in model.blocks:
                b.attn.gate.fill_(0.5)
                b.ffn.gate.fill_(0.5)
    idx = torch.randint(0, 13, (2, 8))
    base, _ = model(idx)
    for t in (0, 3, 6):
        other = idx.clone()
        other[:, t + 1:] = (other[:, t + 1:] + 1 + torch.arange(7 - t)) % 13
        out, _ = model(other)
        assert torch.allclose(out[:, :t + 1], base[:, :t + 1], atol=1e-6, rtol=0), f"future leaks into t<={t}"
        assert not torch.allclose(out[:, t + 1:], base[:, t + 1:])  # the change itself is visible


def grid() -> list[tuple[str, str, int, str, str | None]]:
    """A covering sample: every placement sees every norm, qk_norm and init, at depths 1, 12 and 48."""
    norms, qks = NORMS.names(), [None, *QK_NORMS.names()]
    shapes = list(itertools.product(("gpt2", "xavier"), (1, 12, 48)))
    cases = []
    for p, placement in enumerate(ALL):
        # as many cases as it takes for every shape, norm and qk-norm to appear once per placement
        for j in range(max(len(shapes), len(norms), len(qks))):
            init, depth = shapes[j % len(shapes)]
            cases.append((placement, init, depth, norms[(j + p) % len(norms)], qks[(j + 2 * p) % len(qks)]))
    return cases


def test_grid_covers_every_value() -> None:
    cases = grid()
    for placement in ALL:
        mine = [c for c in cases if c[0] == placement]
        assert {c[3] for c in mine} == set(NORMS.names())
        assert {c[4] for c in mine} == {None, *QK_NORMS.names()}
        assert {(c[1], c[2]) for c in mine} == {(i, d) for i in ("gpt2", "xavier") for d in (1, 12, 48)}


def _finite_run(cfg: ModelConfig, seed: int = 0) -> tuple[bool, bool]:
    torch.manual_seed(seed)
    model = TransformerLM(cfg)
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.context))
    logits, loss = model(idx, idx)
    loss.backward()
    grads_ok = all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    return bool(torch.isfinite(logits).all() and torch.isfinite(loss)), grads_ok


@pytest.mark.parametrize("placement,init,depth,norm,qk_norm", grid())
def test_finite_forward_backward(placement: str, init: str, depth: int, norm: str, qk_norm: str | None) -> None:
    # Without any norm the stream overflows with depth under xavier (documented below):
    # placement 'none' is then checked in its gated form (ReZero), and model.norm='none'
    # (which turns every placement into an un-normalised residual net) at depth 12.
    rezero = placement == "none" and init == "xavier" and depth > 12
    # DeepNorm without a norm multiplies the stream by alpha = (2L)^(1/4) > 1 at every sub-layer:
    # alpha^(2L) is 10^47 at 48 blocks, past float32, under any init.
    if norm == "none" and placement != "ngpt" and (init == "xavier" or placement == "deepnorm"):
        depth = min(depth, 12)
    # refused with a reason: admin's omega and keel's alpha need the norm after the add
    if norm == "none" and placement in PLACEMENTS and PLACEMENTS.get(placement).needs_norm:
        with pytest.raises(ConfigError, match=rf"model\.norm='none': placement {placement} rescales the shortcut"):
            resolve_model(ModelConfig(n_layer=depth, placement=placement, norm=norm, **SMALL))
        return
    if qk_norm is not None and placement in PLACEMENTS and PLACEMENTS.get(placement).sets_qk_norm:
        with pytest.raises(ConfigError, match=rf"^model\.qk_norm={qk_norm!r}: placement {placement} normalises q, k"):
            resolve_model(ModelConfig(n_layer=depth, placement=placement, qk_norm=qk_norm, **SMALL))
        return
    cfg = ModelConfig(n_layer=depth, placement={"name": "none", "rezero": True} if rezero else placement,
                      init=init, norm=norm, qk_norm=qk_norm, **SMALL)
    fwd, bwd = _finite_run(cfg)
    assert fwd and bwd


def test_none_without_gate_overflows_with_depth() -> None:
    """Documents where: d=16, xavier init (branches as large as the stream), seeds 0-2.

    The stream roughly doubles its variance per sub-layer; at 12 layers everything is
    finite (loss already ~1e3-1e4), at 48 layers the backward pass overflows float32.
    GPT-2's init (residual projections 0.02/sqrt(2L)) keeps the same model finite at 48.
    """
    for seed in range(3):
        fwd, bwd = _finite_run(ModelConfig(n_layer=12, placement="none", init="xavier", **SMALL), seed)
        assert fwd and bwd
        fwd, bwd = _finite_run(ModelConfig(n_layer=48, placement="none", init="xavier", **SMALL), seed)
        assert not bwd
        assert all(_finite_run(ModelConfig(n_layer=48, placement="none", init="gpt2", **SMALL), seed))
    # model.norm='none' is the same network for pre: finite at 12, overflowing at 48
    assert all(_finite_run(ModelConfig(n_layer=12, placement="pre", norm="none", init="xavier", **SMALL)))
    assert not _finite_run(ModelConfig(n_layer=48, placement="pre", norm="none", init="xavier", **SMALL))[1]
