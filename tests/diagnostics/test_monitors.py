"""Known answers of the optimizer, curvature and attention monitors (diagnostics/monitors.py,
curvature.py, attention_record.py): a quadratic's Hessian, a known preconditioner, one SGD and
one Adam step with known gradients, uniform and one-hot attention."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.diagnostics.attention_record import head_entropy, lab_attention
from normlab.diagnostics.curvature import Curvature, precond_sharpness, sharpness, top_eigenvalue
from normlab.diagnostics.monitors import AdamView
from normlab.diagnostics.training import TrainingDiagnostics


def _spd(eigs: list[float], seed: int = 1) -> torch.Tensor:
    """Q diag(eigs) Q^T with a random orthogonal Q: a symmetric matrix of known spectrum."""
    q, _ = torch.linalg.qr(torch.randn(len(eigs), len(eigs), generator=torch.Generator().manual_seed(seed),
                                       dtype=torch.float64))
    return q @ torch.diag(torch.tensor(eigs, dtype=torch.float64)) @ q.T


def _quadratic(a: torch.Tensor) -> tuple[torch.nn.Parameter, Curvature]:
    """0.5 x^T A x over one parameter x (its Hessian is A wherever x is)."""
    x = torch.nn.Parameter(torch.randn(a.size(0), dtype=a.dtype, generator=torch.Generator().manual_seed(2)))
    return x, Curvature(lambda: 0.5 * x @ a @ x, [x], iters=20)


def test_sharpness_of_a_quadratic_is_the_top_eigenvalue_of_a() -> None:
    x, cur = _quadratic(_spd([5.0, 2.0, 1.0, 0.5, -1.0]))
    got = sharpness(SimpleNamespace(curvature=cur))
    assert got is not None and got.item() == pytest.approx(5.0, rel=1e-6)
    assert x.grad is None  # Hessian-vector products never accumulate into .grad
    # a dominant negative eigenvalue (a saddle): the shifted iteration still finds the top one
    _, cur = _quadratic(_spd([-10.0, 3.0, 1.0]))
    assert top_eigenvalue(cur.loss, cur.params, 100).item() == pytest.approx(3.0, rel=1e-4)
    # the start is seeded: the same call gives the same number, bit for bit
    assert top_eigenvalue(cur.loss, cur.params, 5, seed=7).item() == top_eigenvalue(cur.loss, cur.params, 5, seed=7).item()
    with pytest.raises(ValueError, match="iters=0"):
        top_eigenvalue(cur.loss, cur.params, 0)


def test_preconditioned_sharpness_with_a_known_diagonal_preconditioner() -> None:
    a, p = torch.tensor([4.0, 9.0, 1.0], dtype=torch.float64), torch.tensor([2.0, 0.5, 0.1], dtype=torch.float64)
    _, cur = _quadratic(torch.diag(a))
    got = top_eigenvalue(cur.loss, cur.params, 50, scale=[p.rsqrt()])  # P^-1/2 A P^-1/2 = diag(a / p)
    assert got.item() == pytest.approx(max(a / p).item(), rel=1e-6)  # 18, not A's 9
    full = _spd([6.0, 3.0, 2.0, 1.0])
    p4 = torch.tensor([0.5, 1.0, 2.0, 4.0], dtype=torch.float64)
    _, cur = _quadratic(full)
    want = torch.linalg.eigvalsh(torch.diag(p4.rsqrt()) @ full @ torch.diag(p4.rsqrt())).max()
    assert top_eigenvalue(cur.loss, cur.params, 200, scale=[p4.rsqrt()]).item() == pytest.approx(want.item(), rel=1e-5)


def test_adam_preconditioner_after_one_step_with_a_known_gradient() -> None:
    """After one Adam step with gradient g: v = (1 - b2) g^2, v_hat = g^2, so P = |g| + eps."""
    a = torch.diag(torch.tensor([4.0, 9.0, 1.0]))
    x, cur = _quadratic(a)
    opt = torch.optim.Adam([x], lr=0.1, betas=(0.9, 0.99), eps=1e-3)
    view = AdamView(opt, [x])
    assert view.inverse_sqrt_preconditioner() is None  # no step yet: no preconditioner
    g = torch.tensor([2.0, 0.5, 0.1], dtype=x.dtype)
    x.grad = g.clone()
    opt.step()
    view = AdamView(opt, [x])
    state = opt.state[x]
    torch.testing.assert_close(state["exp_avg"], 0.1 * g)
    torch.testing.assert_close(state["exp_avg_sq"], 0.01 * g * g)
    p = g.abs() + 1e-3
    torch.testing.assert_close(view.inverse_sqrt_preconditioner()[0], p.rsqrt())
    got = precond_sharpness(SimpleNamespace(curvature=Curvature(cur.loss, [x], 50), optimizer=view))
    assert got.item() == pytest.approx((torch.diag(a) / p).max().item(), rel=1e-5)
    # another optimizer's state (Muon's momentum) is not Adam's: no preconditioned sharpness
    view.state[0] = {"momentum_buffer": torch.zeros(3)}
    assert precond_sharpness(SimpleNamespace(curvature=cur, optimizer=view)) is None


def _tiny(seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(ModelConfig(vocab_size=17, context=8, n_layer=2, d_model=16, n_head=2, placement="pre",
                                     init="xavier"))


def _step(tmp_path, opt_of, grad: float):
    """One optimizer step of a tiny model with every gradient entry ``grad``, under the diagnostics."""
    model = _tiny()
    g = torch.Generator().manual_seed(1)
    fixed = (torch.randint(0, 17, (3, 8), generator=g), torch.randint(0, 17, (3, 8), generator=g))
    opt = opt_of(model)
    diag = TrainingDiagnostics(model, tmp_path, fixed, every=1, optimizer=opt)
    for p in model.parameters():
        p.grad = torch.full_like(p, grad)
    diag.after_backward(1)
    opt.step()
    return model, diag.after_step(1)


def _matrices_rms(tensors) -> float:
    return math.sqrt(sum(t.pow(2).sum().item() for t in tensors) / sum(t.numel() for t in tensors))


def test_update_rms_of_one_sgd_step_with_a_known_gradient(tmp_path) -> None:
    lr, grad = 0.05, 0.3
    model, r = _step(tmp_path, lambda m: torch.optim.SGD(m.parameters(), lr=lr), grad)
    # groups: embeddings, blocks 1, 2, final norm/head (the head is tied: no matrix there)
    assert r["update_rms"][:3] == pytest.approx([lr * grad] * 3, rel=1e-5) and r["update_rms"][3] is None
    block1 = [p.detach() for n, p in model.named_parameters() if n.startswith("blocks.0.") and p.dim() == 2]
    assert len(block1) == 4  # qkv, W_O, W_1, W_2; the norm gains and biases are left out
    assert r["update_rms_ratio"][1] == pytest.approx(lr * grad / _matrices_rms(block1), rel=1e-5)
    assert "adam_m_rms" not in r  # SGD has no Adam state: nothing to write


def test_adam_moments_after_one_step_with_a_known_gradient(tmp_path) -> None:
    b1, b2, grad = 0.8, 0.95, 0.3
    _, r = _step(tmp_path, lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(b1, b2), weight_decay=0.0), grad)
    # m = (1 - b1) g, v = (1 - b2) g^2 entrywise
    assert r["adam_m_rms"][:3] == pytest.approx([(1 - b1) * grad] * 3, rel=1e-5)
    assert r["adam_sqrt_v_rms"][:3] == pytest.approx([math.sqrt(1 - b2) * grad] * 3, rel=1e-5)
    # Adam's first step moves every entry by lr * g / (|g| + eps): lr
    assert r["update_rms"][:3] == pytest.approx([1e-3] * 3, rel=1e-4)


def test_head_entropy_of_uniform_and_one_hot_attention() -> None:
    T = 6
    uniform = torch.ones(T, T).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(2, 3, T, T)  # (B, H, T, T)
    mean = sum(math.log(i + 1) for i in range(T)) / T  # query i spreads over i + 1 keys: log(i + 1)
    assert mean == pytest.approx(math.lgamma(T + 1) / T)
    assert head_entropy(uniform).tolist() == pytest.approx([mean] * 3, rel=1e-6)
    assert head_entropy(torch.eye(T).expand(2, 3, T, T)).tolist() == [0.0] * 3


def test_lab_attention_records_head_entropy_of_uniform_and_one_hot_rows() -> None:
    """W_Q = 0: every query attends uniformly to the keys it sees; a huge scale and q = k of unit
    norm per head: each query attends to itself alone (entropy 0)."""
    model = _tiny()
    a = model.blocks[0].attn.branch
    d, T = model.cfg.d_model, 6
    with torch.no_grad():
        a.qkv.weight[:d].zero_()
        if a.qkv.bias is not None:
            a.qkv.bias[:d].zero_()
    x = torch.randn(2, T, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    model.double()
    with lab_attention(model) as rec:
        a(x)
    assert rec.head_entropy[0].tolist() == pytest.approx([math.lgamma(T + 1) / T] * 2, rel=1e-9)
    assert not a.record  # the recording is switched off again
    with torch.no_grad():  # q = k = x, per head of unit norm; scale 1e4: softmax is one-hot
        a.qkv.weight[:2 * d] = torch.cat([torch.eye(d), torch.eye(d)]).double()
        if a.qkv.bias is not None:
            a.qkv.bias.zero_()
    a.scale = 1e4
    unit = x.view(2, T, 2, d // 2)
    unit = (unit / unit.norm(dim=-1, keepdim=True)).view(2, T, d)
    with lab_attention(model) as rec:
        a(unit)
    assert rec.head_entropy[0].tolist() == pytest.approx([0.0, 0.0], abs=1e-12)
