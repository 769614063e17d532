"""``norm_gain`` (seed001-ln-amplifies) against the formulas computed by hand: RMS(F) / RMS(x)
and ||J_LN(x + F) F|| / ||F|| by a central finite difference, per Post-LN sub-layer."""

from __future__ import annotations

import torch

from normlab.diagnostics.sublayers import norm_gain
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM


def _model(scale: float) -> tuple[TransformerLM, torch.Tensor]:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(n_layer=2, d_model=16, n_head=2, d_ff=16, vocab_size=11, context=8,
                                      placement="post")).double()
    with torch.no_grad():
        for b in model.blocks:  # scale every sub-layer's output: the ratio scales with it
            for sub in (b.attn, b.ffn):
                for m in sub.branch.modules():
                    if isinstance(m, torch.nn.Linear) and m.out_features == 16:
                        m.weight.mul_(scale)
    return model, torch.randint(0, 11, (3, 8))


def _by_hand(model: TransformerLM, idx: torch.Tensor) -> list[tuple[float, float]]:
    inputs: list[torch.Tensor] = []
    subs = [s for b in model.blocks for s in (b.attn, b.ffn)]
    hooks = [s.register_forward_pre_hook(lambda _m, a: inputs.append(a[0].detach())) for s in subs]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    out = []
    with torch.no_grad():
        for sub, x in zip(subs, inputs):
            f = sub.branch(x)
            u = x + f
            t = 1e-5 * float(u.norm() / f.norm())  # a step 1e-5 of u's size, whatever F's size
            d = (sub.norm(u + t * f) - sub.norm(u - t * f)) / (2 * t)
            out.append((float(f.pow(2).mean().sqrt() / x.pow(2).mean().sqrt()), float(d.norm() / f.norm())))
    return out


def test_ratio_and_gain_match_the_formulas() -> None:
    for scale in (1.0, 0.1):
        model, idx = _model(scale)
        got = [(r["ratio"], r["gain"]) for r in norm_gain(model, idx)]
        want = _by_hand(model, idx)
        assert len(got) == 4
        for (r, g), (rw, gw) in zip(got, want):
            assert abs(r - rw) < 1e-9 * max(1.0, rw) and abs(g - gw) < 1e-6 * max(1.0, gw), (scale, r, rw, g, gw)


def test_a_small_output_is_small_and_the_forward_is_unchanged() -> None:
    big, idx = _model(1.0)
    small, _ = _model(0.1)
    assert max(r["ratio"] for r in norm_gain(small, idx)) < min(r["ratio"] for r in norm_gain(big, idx))
    with torch.no_grad():
        before = small(idx)[0]
    norm_gain(small, idx)
    with torch.no_grad():
        assert torch.equal(small(idx)[0], before)  # the hooks are gone and changed nothing
