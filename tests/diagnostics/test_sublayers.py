"""The measurements of diagnostics/sublayers.py, recorded through the one capture path, against
the same quantities computed by hand on a tiny float64 model: the block Jacobians' identity
coefficients and Post-LN's identity path by central finite differences with the same random
tangents, and DeepNorm's branch share from hand-hooked sub-layer inputs."""

from __future__ import annotations

import math

import torch

from normlab.diagnostics import sublayers
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM


def _model(placement: str, n_layer: int = 3) -> tuple[TransformerLM, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(n_layer=n_layer, d_model=16, n_head=2, d_ff=16, vocab_size=11, context=8,
                                      placement=placement)).double()
    g = torch.Generator().manual_seed(1)
    return model, torch.randint(0, 11, (3, 8), generator=g), torch.randint(0, 11, (3, 8), generator=g)


def _central(f, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """J_f(x) v by a central difference (float64)."""
    t = 1e-6
    with torch.no_grad():
        return (f(x + t * v) - f(x - t * v)) / (2 * t)


def test_identity_coefficients_are_v_J_v_of_each_block() -> None:
    for placement in ("pre", "post"):
        model, idx, tgt = _model(placement)
        got = sublayers.identity_coefficients(model, idx, tgt, torch.Generator().manual_seed(5))
        gen = torch.Generator().manual_seed(5)  # the same Rademacher tangents, block after block
        x = model.embed(idx).detach()
        want = []
        for b in model.blocks:
            v = torch.randint(0, 2, x.shape, generator=gen).to(x.dtype) * 2 - 1
            want.append(float((v * _central(b, x, v)).sum() / v.numel()))
            with torch.no_grad():
                x = b(x)
        assert len(got) == 3
        for g, w in zip(got, want):
            assert abs(g - w) < 1e-6, (placement, got, want)
        assert len({round(g, 6) for g in got}) == 3  # three different blocks, not one measured thrice


def test_identity_path_pushes_the_tangent_through_each_norm() -> None:
    model, idx, tgt = _model("post")
    got = sublayers.identity_path(model, idx, tgt, torch.Generator().manual_seed(7))
    norms = [s.norm for b in model.blocks for s in (b.attn, b.ffn)]
    ins: list[torch.Tensor] = []
    hooks = [n.register_forward_pre_hook(lambda _m, a: ins.append(a[0].detach())) for n in norms]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    v = torch.randn(ins[0].shape, generator=torch.Generator().manual_seed(7), dtype=torch.float32).double()
    want = []
    for n, u in zip(norms, ins):
        w = _central(n, u, v)
        want.append(float(w.norm() / v.norm()))
        v = w
    assert len(got) == 6
    for g, w in zip(got, want):
        assert abs(g - w) < 1e-6 * max(1.0, w), (got, want)


def test_branch_share_is_log_var_F_over_var_alpha_x() -> None:
    model, idx, _ = _model("deepnorm", n_layer=2)
    subs = [s for b in model.blocks for s in (b.attn, b.ffn)]
    ins: list[torch.Tensor] = []
    hooks = [s.register_forward_pre_hook(lambda _m, a: ins.append(a[0].detach())) for s in subs]
    with torch.no_grad():
        model(idx)
        for h in hooks:
            h.remove()
        want = [math.log(float(s.branch(x).var()) / float((s.alpha * x).var())) for s, x in zip(subs, ins)]
    got = sublayers.branch_share(model, idx)
    assert got == want
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
