"""DeepNorm alpha/beta and Admin omega equal the published constants and recurrences."""

from __future__ import annotations

import math

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.model.placements import admin_closed_form_omega

SMALL = dict(vocab_size=13, context=8, d_model=16, n_head=2)


# DeepNet (Wang et al. 2022), decoder-only with M layers: alpha = (2M)^(1/4), beta = (8M)^(-1/4).
@pytest.mark.parametrize("M,alpha,beta", [
    (2, math.sqrt(2), 0.5),
    (6, 1.8612097, 0.3799178),
    (18, math.sqrt(6), 1 / math.sqrt(12)),
    (32, 2 * math.sqrt(2), 0.25),
    (128, 4.0, 1 / (4 * math.sqrt(2))),
])
def test_deepnorm_constants(M: int, alpha: float, beta: float) -> None:
    cfg = ModelConfig(n_layer=M, placement="deepnorm", **SMALL) if M <= 32 else None
    if cfg is None:  # do not build a 128-layer model: the constants are class-level arithmetic
        from normlab.model.placement import Site
        from normlab.model.placements import DeepNorm

        site = Site(ModelConfig(n_layer=M, placement="post", **SMALL), 1, "attn", 1)
        sub = DeepNorm(torch.nn.Identity(), site)
    else:
        sub = TransformerLM(cfg).blocks[0].attn
    assert sub.alpha == pytest.approx(alpha, abs=1e-6)
    assert sub.beta == pytest.approx(beta, abs=1e-6)


def test_deepnorm_beta_scales_v_o_ffn_not_q_k() -> None:
    L = 8
    torch.manual_seed(0)
    base = TransformerLM(ModelConfig(n_layer=L, placement="post", init="xavier", **SMALL))
    torch.manual_seed(0)
    deep = TransformerLM(ModelConfig(n_layer=L, placement="deepnorm", init="xavier", **SMALL))
    beta, d = (8 * L) ** -0.25, 16
    a0, a1 = base.blocks[3].attn.branch, deep.blocks[3].attn.branch
    assert torch.equal(a0.qkv.weight[:2 * d], a1.qkv.weight[:2 * d])            # W_Q, W_K untouched
    assert torch.allclose(a0.qkv.weight[2 * d:] * beta, a1.qkv.weight[2 * d:])  # W_V
    assert torch.allclose(a0.proj.weight * beta, a1.proj.weight)                # W_O
    f0, f1 = base.blocks[3].ffn.branch, deep.blocks[3].ffn.branch
    assert torch.allclose(f0.fc.weight * beta, f1.fc.weight)                    # W_1
    assert torch.allclose(f0.proj.weight * beta, f1.proj.weight)                # W_2
    # with gpt2 init, beta replaces GPT-2's 1/sqrt(2L) on W_O, W_2: std 0.02 * beta, not 0.02*beta/sqrt(2L)
    torch.manual_seed(0)
    g = TransformerLM(ModelConfig(n_layer=L, placement="deepnorm", init="gpt2", d_model=64, n_head=2,
                                  vocab_size=13, context=8))
    assert g.blocks[0].ffn.branch.proj.weight.std().item() == pytest.approx(0.02 * beta, rel=0.05)


# admin-torch (microsoft/admin-torch, calculate_init 'O(logn)'): omega = sqrt((N+1)/ln(N+1) - 1), N = 2L.
@pytest.mark.parametrize("L,omega", [(1, 1.3155674), (6, 2.0170092), (12, 2.6012856), (18, 3.0408390),
                                     (48, 4.4948332)])
def test_admin_closed_form(L: int, omega: float) -> None:
    assert admin_closed_form_omega(2 * L) == pytest.approx(omega, abs=1e-6)
    if L <= 6:
        model = TransformerLM(ModelConfig(n_layer=L, placement={"name": "admin", "omega": "closed_form"}, **SMALL))
        assert all(float(b.attn.omega) == pytest.approx(omega, abs=1e-6) for b in model.blocks)


def _ln(x: torch.Tensor, m) -> torch.Tensor:
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + m.eps) * m.weight + m.bias


@pytest.mark.parametrize("init", ["xavier", "gpt2"])
def test_admin_profile_recurrence(init: str) -> None:
    """omega_1 = 1; omega_{i+1}^2 = Var[omega_i x_i] + Var[F_i(x_i)] (Transformer-Clinic's profiling),
    with the embedding x_1 counted at unit variance (the authors' scale) whatever the init."""
    torch.manual_seed(1)
    model = TransformerLM(ModelConfig(n_layer=3, placement="admin", init=init, **SMALL)).double()
    idx = torch.randint(0, 13, (4, 8))
    model.calibrate(idx)
    om, x = 1.0, model.embed(idx).detach()
    seen = []
    with torch.no_grad():
        for b in model.blocks:
            for sub in (b.attn, b.ffn):
                seen.append(float(sub.omega))
                assert float(sub.omega) == pytest.approx(om, rel=1e-9)
                f = sub.branch(x)
                shortcut = om**2 if not seen[:-1] else float((om * x).var(unbiased=False))
                om_next = math.sqrt(shortcut + float(f.var(unbiased=False)))
                x = _ln(om * x + f, sub.norm)
                om = om_next
    assert seen[0] == 1.0 and len(set(seen)) == 6
    if init == "xavier":  # unit-variance embedding: omega^2 grows by Var[F] per sub-layer
        assert all(b > a for a, b in zip(seen, seen[1:]))


def test_admin_profile_keeps_global_rng_and_is_deterministic() -> None:
    cfgs = [ModelConfig(n_layer=2, placement={"name": "admin", "omega": o}, **SMALL) for o in ("profile", "closed_form")]
    draws, weights = [], []
    for cfg in cfgs:
        torch.manual_seed(5)
        m = TransformerLM(cfg)
        draws.append(torch.rand(3))
        weights.append(m.blocks[1].ffn.branch.fc.weight.detach().clone())
    assert torch.equal(draws[0], draws[1]) and torch.equal(weights[0], weights[1])
    torch.manual_seed(6)
    again = TransformerLM(cfgs[0])
    torch.manual_seed(5)
    first = TransformerLM(cfgs[0])
    # same weights -> same profiled omegas; other weights -> other omegas
    assert float(first.blocks[1].attn.omega) != float(again.blocks[1].attn.omega)
    torch.manual_seed(5)
    assert float(TransformerLM(cfgs[0]).blocks[1].attn.omega) == float(first.blocks[1].attn.omega)
    assert "omega" in dict(first.blocks[0].attn.named_buffers())
    assert "blocks.0.attn.omega" in first.state_dict()  # persistent: checkpoints carry it


def _dependence(model: TransformerLM, idx: torch.Tensor) -> list[float]:
    """Var[omega x] / Var[F(x)] at every sub-layer (omega = 1 for Post-LN): Liu et al. 2020's
    measure of how much the output depends on the residual branch (small = strong)."""
    out: list[float] = []
    x = model.embed(idx)
    with torch.no_grad():
        for b in model.blocks:
            for sub in (b.attn, b.ffn):
                om = float(getattr(sub, "omega", 1.0))
                f = sub.branch(x)
                out.append(float((om * x).var(unbiased=False) / f.var(unbiased=False)))
                x = sub(x)
    return out


@pytest.mark.parametrize("L", [6, 24])
@pytest.mark.parametrize("init", ["xavier", "gpt2"])
def test_admin_depends_on_its_branches_no_more_than_post_ln(init: str, L: int) -> None:
    """What Admin exists for: its shortcut-to-branch variance ratio is never (much) below Post-LN's
    at the same init and weights (under GPT-2's init omega ~ 0.993, from the first LayerNorm's
    eps, so ~1% below is allowed), and under the paper's (xavier) init it grows with depth like
    Pre-LN's, where Post-LN's stays flat. The literal recurrence under GPT-2's init gave ratios
    of 3-55 against Post-LN's 4,000-56,000 (the bug this guards against)."""
    cfg = dict(n_layer=L, d_model=64, n_head=4, context=32, vocab_size=65, init=init)
    idx = torch.randint(0, 65, (4, 32), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    admin = TransformerLM(ModelConfig(placement="admin", **cfg)).double()
    admin.calibrate(idx)
    post = TransformerLM(ModelConfig(placement="post", **cfg)).double()
    post.load_state_dict({k: v for k, v in admin.state_dict().items() if not k.endswith("omega")}, strict=False)
    ra, rp = _dependence(admin, idx), _dependence(post, idx)
    assert all(a >= 0.95 * p for a, p in zip(ra, rp)), (ra, rp)
    if init == "xavier":
        def growth(r: list[float]) -> float:  # deep half over shallow half
            return sum(r[len(r) // 2:]) / sum(r[:len(r) // 2])

        assert growth(ra) > 2.0 and growth(rp) < 1.5, (growth(ra), growth(rp))
