"""Each statistic against a direct computation on small inputs or a tiny model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.diagnostics.hooks import recording
from normlab.diagnostics.probe import probe_model
from normlab.diagnostics.subject import as_subject
from normlab.stats import tensors as stats


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_mean_sq_and_max_abs() -> None:
    x = torch.tensor([[[3.0, -4.0], [0.0, 1.0]]])  # one sequence, two tokens, d=2
    assert stats.mean_sq(x).item() == pytest.approx((9 + 16 + 0 + 1) / 4)  # E||x||^2/d = (25+1)/2/2
    assert stats.max_abs(x).item() == 4.0


def test_cosine_angle_and_block_influence_by_hand() -> None:
    a, b = _x(2, 3, 5, seed=1), _x(2, 3, 5, seed=2)
    cos = [float(a[i, t] @ b[i, t] / (a[i, t].norm() * b[i, t].norm())) for i in range(2) for t in range(3)]
    assert stats.cosine(a, b).item() == pytest.approx(np.mean(cos), rel=1e-5)
    assert stats.angular_distance(a, b).item() == pytest.approx(np.mean(np.arccos(cos)) / math.pi, rel=1e-5)
    assert stats.block_influence(a, b).item() == pytest.approx(1 - np.mean(cos), rel=1e-5)
    assert stats.angular_distance(a, a).item() == pytest.approx(0.0, abs=1e-3)
    assert stats.angular_distance(a, -a).item() == pytest.approx(1.0, abs=1e-3)


def test_token_cosine_by_hand_and_collapse() -> None:
    x = _x(2, 4, 6, seed=3)
    pairs = [float(x[b, i] @ x[b, j] / (x[b, i].norm() * x[b, j].norm()))
             for b in range(2) for i in range(4) for j in range(4) if i != j]
    assert stats.token_cosine(x).item() == pytest.approx(np.mean(pairs), rel=1e-5)
    same = x[:, :1].expand(2, 4, 6) * torch.arange(1, 5, dtype=torch.float64).view(1, 4, 1)
    assert stats.token_cosine(same).item() == pytest.approx(1.0, abs=1e-6)  # full rank collapse


def test_linear_cka_against_hsic_formula() -> None:
    x, y = _x(20, 5, seed=4), _x(20, 7, seed=5)
    n = 20
    H = torch.eye(n, dtype=torch.float64) - 1.0 / n
    K, Lm = x @ x.T, y @ y.T

    def hsic(A: torch.Tensor, B: torch.Tensor) -> float:
        return float(torch.trace(A @ H @ B @ H))

    want = hsic(K, Lm) / math.sqrt(hsic(K, K) * hsic(Lm, Lm))
    assert stats.linear_cka(x, y).item() == pytest.approx(want, rel=1e-5)
    q, _ = torch.linalg.qr(_x(5, 5, seed=6))  # invariant to rotation, scale and shift
    assert stats.linear_cka(x, 3 * x @ q + 1).item() == pytest.approx(1.0, rel=1e-6)


def test_spearman_and_ols() -> None:
    assert stats.spearman([1, 2, 3, 4], [10, 20, 25, 100]) == pytest.approx(1.0)
    assert stats.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert stats.spearman([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)  # 1 - 6*2/(3*8)
    x = np.arange(10.0)
    y = 2.0 - 0.5 * x + np.where(x % 2 == 0, 0.1, -0.1)
    f = stats.ols(x, y)
    b, a = np.polyfit(x, y, 1)
    assert f["slope"] == pytest.approx(b) and f["intercept"] == pytest.approx(a)
    resid = y - (a + b * x)
    assert f["stderr"] == pytest.approx(math.sqrt((resid**2).sum() / 8 / ((x - x.mean()) ** 2).sum()))


def _tiny(placement: str, n_layer: int = 1, d: int = 8, T: int = 4) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(ModelConfig(vocab_size=13, context=T, n_layer=n_layer, d_model=d, n_head=2,
                                     placement=placement, init="xavier"))


@pytest.mark.parametrize("placement", ["post", "pre"])
def test_jacobian_estimate_matches_exact_jacobian(placement: str) -> None:
    model = _tiny(placement, n_layer=1)
    idx = torch.randint(0, 13, (1, 4), generator=torch.Generator().manual_seed(7))
    x0 = model.stream.begin(model.embed(idx)).detach()
    J = torch.autograd.functional.jacobian(lambda x: model.blocks[0](x), x0)  # (1,4,8,1,4,8)
    N = x0.numel()
    exact = torch.linalg.matrix_norm(J.reshape(N, N)).item() / math.sqrt(N)
    with recording(as_subject(model)) as rec:
        model(idx)
    est = stats.jacobian_rms(rec.stream[-1], rec.stream[:-1], n_proj=256,
                             generator=torch.Generator().manual_seed(0))
    assert est[0].item() == pytest.approx(exact, rel=0.05)
    assert abs(exact - 1.0) > 0.05  # the block is not norm-preserving, so a constant 1 would fail


def test_probe_grad_norms_equal_grad_of_parameters() -> None:
    model = _tiny("post", n_layer=2, d=8, T=4)
    g = torch.Generator().manual_seed(8)
    idx, tgt = torch.randint(0, 13, (2, 4), generator=g), torch.randint(0, 13, (2, 4), generator=g)
    rows = {(li, s, p, m): v for li, s, p, m, v in probe_model(model, idx, tgt, n_proj=0)}
    model.zero_grad()
    _, loss = model(idx, tgt)
    loss.backward()
    b = model.blocks[1]
    norm = torch.linalg.norm
    qkv = b.attn.branch.qkv.weight.grad
    assert rows[(2, "attn", "W_Q", "grad_norm")] == pytest.approx(norm(qkv[:8]).item(), rel=1e-5)
    assert rows[(2, "attn", "W_K", "grad_norm")] == pytest.approx(norm(qkv[8:16]).item(), rel=1e-5)
    assert rows[(2, "attn", "W_V", "grad_norm")] == pytest.approx(norm(qkv[16:]).item(), rel=1e-5)
    assert rows[(2, "attn", "W_O", "grad_norm")] == pytest.approx(norm(b.attn.branch.proj.weight.grad).item(), rel=1e-5)
    assert rows[(2, "ffn", "W_1", "grad_norm")] == pytest.approx(norm(b.ffn.branch.fc.weight.grad).item(), rel=1e-5)
    assert rows[(2, "ffn", "W_2", "grad_norm")] == pytest.approx(norm(b.ffn.branch.proj.weight.grad).item(), rel=1e-5)
    assert rows[(2, "ffn", "norm.weight", "grad_norm")] == pytest.approx(norm(b.ffn.norm.weight.grad).item(), rel=1e-5)
    block = math.sqrt(sum(norm(p.grad).item() ** 2 for p in b.parameters()))
    assert rows[(2, "block", "all", "grad_norm")] == pytest.approx(block, rel=1e-5)
    assert rows[(0, "model", "loss", "loss")] == pytest.approx(loss.item(), rel=1e-6)
    # dLoss/dx_l of the stream entering block 2, by a hook-free recomputation
    x1 = model.blocks[0](model.embed(idx)).detach().requires_grad_()
    logits = model.head(model.blocks[1](x1))
    l2 = torch.nn.functional.cross_entropy(logits.view(-1, 13), tgt.view(-1))
    gx = torch.autograd.grad(l2, x1)[0]
    assert rows[(1, "stream", "x", "grad_norm")] == pytest.approx(gx.norm().item(), rel=1e-5)
    assert rows[(1, "stream", "x", "mean_sq")] == pytest.approx(x1.pow(2).mean().item(), rel=1e-5)
