"""The residual designs of 2026 (issue 43) against their formulas, recomputed by hand with the
model's weights (to 1e-6, float64): SiameseNorm, Attention Residuals (Full), mHC, and gated
attention (``model.attn_gate``). The norms, attention and FFN by hand are test_formulas' own.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.core.errors import ConfigError
from normlab.model.build import resolve_model
from normlab.model.streams_mhc import STREAMS, sinkhorn

sys.path.insert(0, str(Path(__file__).parent))
from test_formulas import F_, SINGLE, TOL, build, ln, run_model, sublayers  # noqa: E402 - the hand-made pieces


def _logits(model: TransformerLM, out: torch.Tensor) -> torch.Tensor:
    return ln(out, model.norm_f) @ model.wte.weight.T  # every design here keeps the final norm


def test_siamese_formula() -> None:
    """u = LN_post(x); z = F(LN_in(u + LN_pre(y))); x <- u + z/sqrt(2l); y <- y + z; out LN_x(x) + LN_y(y)."""
    model = build("siamese")
    idx = torch.randint(0, 11, (2, 6))
    x = y = model.embed(idx)
    for sub in sublayers(model):
        c = math.sqrt(2 * sub.site.layer)  # one c per block: both sub-layers of block l
        u = ln(x, sub.norm_post)
        z = F_(sub, ln(u + ln(y, sub.norm_pre), sub.norm_in))
        x, y = u + z / c, y + z
    h = run_model(model, idx)
    assert torch.allclose(h[0], x, atol=TOL, rtol=0) and torch.allclose(h[1], y, atol=TOL, rtol=0)
    out = ln(x, model.stream.norm_x) + ln(y, model.stream.norm_y)
    assert torch.allclose(model(idx)[0], _logits(model, out), atol=TOL, rtol=0)
    assert [b.attn.c for b in model.blocks] == [math.sqrt(2), 2.0]  # c = sqrt(2l), l = 1-based block
    assert not torch.allclose(x, y)  # the two streams differ, so swapping them would be caught


def _depth_attention(sources: list[torch.Tensor], w: torch.Tensor, key_norm) -> torch.Tensor:
    """sum_i softmax_i(w . RMSNorm(v_i)) v_i, the softmax written out."""
    scores = [torch.exp((ln(v, key_norm) * w).sum(-1, keepdim=True)) for v in sources]
    total = sum(scores)
    return sum(s / total * v for s, v in zip(scores, sources))


def test_attn_res_formula() -> None:
    """h_l = sum_{i<l} softmax_i(w_l . RMSNorm(v_i)) v_i; v_0 = embedding, v_l = F(LN(h_l)); the
    head reads one more depth attention; s, the state's first part, is the plain sum of the v_i."""
    model = build("attn_res")  # build perturbs the pseudo-queries away from 0 (else every weight is uniform)
    idx = torch.randint(0, 11, (2, 6))
    sources = [model.embed(idx)]
    for sub in sublayers(model):
        assert sub.query.abs().sum() > 0
        sources.append(F_(sub, ln(_depth_attention(sources, sub.query, sub.key_norm), sub.norm)))
    s, got = run_model(model, idx)
    assert len(got) == len(sources) == 5  # the embedding and 4 sub-layer outputs
    for a, b in zip(got, sources):
        assert torch.allclose(a, b, atol=TOL, rtol=0)
    assert torch.allclose(s, sum(sources), atol=TOL, rtol=0)
    out = _depth_attention(sources, model.stream.query, model.stream.key_norm)
    assert torch.allclose(model(idx)[0], _logits(model, out), atol=TOL, rtol=0)


def test_attn_res_pseudo_queries_start_at_zero_so_the_first_weights_are_uniform() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=11, context=6, n_layer=2, d_model=8, n_head=2, placement="attn_res"))
    queries = [s.query for s in sublayers(model)] + [model.stream.query]
    assert all(bool((q == 0).all()) for q in queries)
    idx = torch.randint(0, 11, (1, 6))
    x0 = model.embed(idx)
    a = model.blocks[0].attn
    v1 = a.branch(a.norm(x0))  # the first sub-layer reads the embedding alone
    _, got = model.blocks[0].attn((x0, (x0,)))
    assert torch.allclose(got[1], v1, atol=1e-6)
    f = model.blocks[0].ffn
    v2 = f.branch(f.norm((x0 + v1) / 2))  # the second, the mean of the two sources
    _, got = f((x0 + v1, (x0, v1)))
    assert torch.allclose(got[2], v2, atol=1e-6)


def _sinkhorn_by_hand(logits: list[list[torch.Tensor]], iters: int = 20) -> list[list[torch.Tensor]]:
    n = len(logits)
    m = [[torch.exp(logits[i][j]) for j in range(n)] for i in range(n)]
    for _ in range(iters):  # M <- T_c(T_r(M)): rows to sum 1, then columns
        m = [[m[i][j] / sum(m[i]) for j in range(n)] for i in range(n)]
        col = [sum(m[i][j] for i in range(n)) for j in range(n)]
        m = [[m[i][j] / col[j] for j in range(n)] for i in range(n)]
    return m


def test_mhc_formula() -> None:
    """x_i <- sum_j H_res[i, j] x_j + H_post[i] F(LN(sum_j H_pre[j] x_j)), the three maps from
    r = vec(x) / RMS(vec(x)): H_pre = sigmoid(a_pre r phi + b), H_post = 2 sigmoid(.), H_res = Sinkhorn(.)."""
    model = build("mhc")
    n = STREAMS
    with torch.no_grad():  # phi starts at 0: make the dynamic part of every map visible
        for sub in sublayers(model):
            sub.phi.normal_(0.0, 0.3)
    idx = torch.randint(0, 11, (2, 6))
    xs = [model.embed(idx)] * n
    for sub in sublayers(model):
        vec = torch.cat(xs, -1)
        r = vec / torch.sqrt((vec * vec).mean(-1, keepdim=True) + model.cfg.norm_eps)
        m = r @ sub.phi
        a, b = sub.a, sub.b
        pre = [1 / (1 + torch.exp(-(a[0] * m[..., i:i + 1] + b[i]))) for i in range(n)]
        post = [2 / (1 + torch.exp(-(a[1] * m[..., n + i:n + i + 1] + b[n + i]))) for i in range(n)]
        res = _sinkhorn_by_hand([[a[2] * m[..., 2 * n + i * n + j:2 * n + i * n + j + 1] + b[2 * n + i * n + j]
                                  for j in range(n)] for i in range(n)])
        f = F_(sub, ln(sum(p * x for p, x in zip(pre, xs)), sub.norm))
        xs = [sum(res[i][j] * xs[j] for j in range(n)) + post[i] * f for i in range(n)]
    got = run_model(model, idx)
    assert len(got) == n
    for a_, b_ in zip(got, xs):
        assert torch.allclose(a_, b_, atol=TOL, rtol=0)
    assert torch.allclose(model(idx)[0], _logits(model, sum(xs)), atol=TOL, rtol=0)
    assert not torch.allclose(xs[0], xs[1])  # the streams differ, so a mix-up would show


def test_sinkhorn_is_doubly_stochastic_and_mhc_starts_with_equal_streams() -> None:
    # 20 iterations end on the columns (exact); the rows are near 1 for logits of order 1 (the
    # approximation gap mHC-lite, arXiv 2601.05732, points out grows with the logits' spread)
    h = sinkhorn(torch.randn(1000, 4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    assert torch.allclose(h.sum(-2), torch.ones(1000, 4, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(h.sum(-1), torch.ones(1000, 4, dtype=torch.float64), atol=1e-3)
    assert bool((h > 0).all())
    one = sinkhorn(torch.zeros(4, 4))  # b_res's exp(I) aside, equal logits give the uniform mixing 1/n
    assert torch.allclose(one, torch.full((4, 4), 0.25))
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=11, context=6, n_layer=2, d_model=8, n_head=2, placement="mhc"))
    sub = model.blocks[0].attn
    assert bool((sub.phi == 0).all()) and torch.allclose(sub.a, torch.full((3,), 0.01))
    assert sub.b[:STREAMS].tolist() == [1.0, 0.0, 0.0, 0.0]            # b_pre: sub-layer 1 reads stream 1 most
    assert model.blocks[0].ffn.b[:STREAMS].tolist() == [0.0, 1.0, 0.0, 0.0]  # sub-layer 2, stream 2
    assert sub.b[STREAMS:2 * STREAMS].tolist() == [1.0] * STREAMS and sub.b[2 * STREAMS:].tolist() == \
        torch.eye(STREAMS).flatten().tolist()                              # b_post = 1, b_res = I
    h0 = model.stream.begin(model.embed(torch.randint(0, 11, (1, 6))))
    for block in model.blocks:  # H_res's rows sum to 1: copies of one state stay copies until phi learns
        h0 = block(h0)
        assert all(torch.allclose(h0[0], x, atol=1e-5) for x in h0[1:])


@pytest.mark.parametrize("gate", ["elementwise", "headwise"])
def test_gated_attention_formula(gate: str) -> None:
    """Y_h <- Y_h * sigmoid(x W_g + b_g) after SDPA, before W_O (the hand attention of
    test_formulas applies it); Pre-LN around it, as in every other placement."""
    model = build("pre", attn_gate=gate, d_head=3)
    a = model.blocks[0].attn.branch
    assert a.gate.w.weight.shape == ((2 * 3, 8) if gate == "elementwise" else (2, 8))  # n_head * d_head or n_head
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    for sub in sublayers(model):
        x = SINGLE["pre"](sub, x)
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)
    ungated = model(idx)[0]
    with torch.no_grad():  # the record path (explicit softmax) gates the same way
        for block in model.blocks:
            block.attn.branch.record = True
        assert torch.allclose(model(idx)[0], ungated, atol=TOL, rtol=0)
        for block in model.blocks:
            block.attn.branch.gate = None
        assert not torch.allclose(model(idx)[0], ungated, atol=1e-3)  # the gate did something


def test_attn_gate_values_and_the_mixing_refusal() -> None:
    with pytest.raises(ConfigError, match=r"^model\.attn_gate='sigmoid': use elementwise, headwise or none"):
        ModelConfig(attn_gate="sigmoid")
    assert "attn_gate" not in ModelConfig().to_dict()  # left out at its default: stored configs are unchanged
    for name in ("siamese", "attn_res", "mhc"):
        with pytest.raises(ConfigError, match=rf"{name} brings its own residual stream"):
            resolve_model(ModelConfig(n_layer=2, d_model=8, n_head=2, placement=[name, "pre"]))


def test_export_refuses_the_new_designs() -> None:
    """No transformers family computes them: the gate fails the config round trip by name."""
    pytest.importorskip("transformers")
    from normlab.core.errors import UserError
    from normlab.model.hf_export import family_for

    assert family_for(ModelConfig(n_layer=2, d_model=8, n_head=2)) == "gpt2"  # the same model without them exports
    with pytest.raises(UserError, match=r"^model\.attn_gate='elementwise'.*computes only attn_gate=None"):
        family_for(ModelConfig(n_layer=2, d_model=8, n_head=2, attn_gate="elementwise"))
    for name, why in (("siamese", "keeps two"), ("attn_res", "attention over depth"), ("mhc", "keeps four")):
        with pytest.raises(UserError, match=rf"^placement {name}: .*{why}"):
            family_for(ModelConfig(n_layer=2, d_model=8, n_head=2, placement=name))
