"""Every placement's block equals its formula written out by hand, with the same weights.

Norms, attention and the FFN are re-implemented here from their definitions (REFERENCE.md
§1-2), so a wrong placement, a wrong norm or a wrong attention would all show up.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from normlab import ModelConfig, TransformerLM
from normlab.core.errors import ConfigError
from normlab.model import norms
from normlab.model.build import resolve_model
from normlab.model.catalogue import NORMS, PLACEMENTS
from normlab.model.placements_inner import HeadScale

TOL = 1e-6


def ln(x: torch.Tensor, m: torch.nn.Module) -> torch.Tensor:
    """The configured norm, by hand."""
    if isinstance(m, norms.LayerNorm):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        y = (x - mu) / torch.sqrt(var + m.eps) * m.weight
        return y + m.bias if m.bias is not None else y
    if isinstance(m, norms.RMSNorm):
        return m.weight * x / torch.sqrt((x * x).mean(-1, keepdim=True) + m.eps)
    if isinstance(m, norms.RMSNorm1p):  # Gemma's gain, stored as its offset from 1
        return (1 + m.weight) * x / torch.sqrt((x * x).mean(-1, keepdim=True) + m.eps)
    if isinstance(m, norms.ScaleNorm):
        return m.weight * x / torch.sqrt((x * x).sum(-1, keepdim=True))
    if isinstance(m, norms.DyT):
        return m.weight * torch.tanh(m.alpha * x) + m.bias
    if isinstance(m, norms.Derf):
        return m.weight * torch.erf(m.alpha * x + m.shift) + m.bias
    if isinstance(m, norms.SeeDNorm):
        gate = torch.tanh((x * m.beta).sum(-1, keepdim=True))  # x . beta, one scalar per token
        return (m.alpha * gate + m.weight) * x / torch.sqrt((x * x).mean(-1, keepdim=True) + m.eps)
    if isinstance(m, norms.L2Norm):
        return x / torch.sqrt((x * x).sum(-1, keepdim=True))
    assert isinstance(m, torch.nn.Identity), type(m)
    return x


def pre_proj(m: torch.nn.Module, y: torch.Tensor) -> torch.Tensor:
    """A branch's pre_proj hook by hand: identity, a norm, or NormFormer's per-head scales."""
    if isinstance(m, HeadScale):
        B, T, d = y.shape
        H = m.weight.numel()
        return torch.cat([y[..., h * (d // H):(h + 1) * (d // H)] * m.weight[h] for h in range(H)], -1)
    return ln(y, m)


def unit(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt((x * x).sum(-1, keepdim=True))


def attn(a, x: torch.Tensor) -> torch.Tensor:
    """Causal multi-head attention by hand; q/k transform and scale read from the module."""
    B, T, d = x.shape
    H, Dh = a.n_head, a.head_dim
    W, b = a.qkv.weight, a.qkv.bias
    b = b if b is not None else torch.zeros(W.size(0), dtype=W.dtype)
    ends = [0, a.split[0], a.split[0] + a.split[1], sum(a.split)]  # W_Q, W_K, W_V rows (n_head * head width each)
    q, k, v = (x @ W[ends[i]:ends[i + 1]].T + b[ends[i]:ends[i + 1]] for i in range(3))
    q, k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in (q, k, v))  # (B, H, T, Dh)
    if hasattr(a.q_norm, "s_qk"):  # nGPT: unit q, k times s_qk
        s = a.q_norm.s_qk()
        q, k = unit(q) * s, unit(k) * s
    else:
        q, k = ln(q, a.q_norm), ln(k, a.k_norm)
    v = ln(v, a.v_norm)
    scale = a.scale  # a float, or the learned l2 scalar
    out = torch.zeros_like(q)
    for t in range(T):  # row by row: position t sees 0..t only (the last `window` of them in a windowed block)
        lo = max(0, t + 1 - a.window) if a.window is not None else 0
        s_t = (q[:, :, t:t + 1] @ k[:, :, lo:t + 1].transpose(-1, -2)) * scale  # (B, H, 1, t+1-lo)
        if a.softcap is not None:
            s_t = a.softcap * torch.tanh(s_t / a.softcap)
        out[:, :, t:t + 1] = s_t.softmax(-1) @ v[:, :, lo:t + 1]
    out = out.transpose(1, 2)  # (B, T, H, Dh)
    if a.gate is not None:  # gated attention: Y * sigmoid(x W_g + b_g), per head dimension or per head
        g = x @ a.gate.w.weight.T + (a.gate.w.bias if a.gate.w.bias is not None else 0)
        out = out * torch.sigmoid(g).view(B, T, H, -1)
    y = pre_proj(a.pre_proj, out.reshape(B, T, -1))
    return y @ a.proj.weight.T + (a.proj.bias if a.proj.bias is not None else 0)


def gelu_by_hand(name: str, h: torch.Tensor) -> torch.Tensor:
    """The GELU ``model.activation`` names: x Phi(x) through erf, or GPT-2's tanh form."""
    if name == "gelu":
        return 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
    assert name == "gelu_tanh", name
    return 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))


def ffn(m, x: torch.Tensor, gain: torch.Tensor | None = None) -> torch.Tensor:
    h = x @ m.fc.weight.T + (m.fc.bias if m.fc.bias is not None else 0)
    if gain is not None:
        h = h * gain
    if type(m).__name__ == "GeGLU":  # GELU(W_1a x) * W_1b x
        gate, up = h.chunk(2, -1)
        h = gelu_by_hand(m.act.__name__, gate) * up
    else:
        h = gelu_by_hand(m.act.__name__, h)
    return pre_proj(m.pre_proj, h) @ m.proj.weight.T + (m.proj.bias if m.proj.bias is not None else 0)


def F_(sub, x: torch.Tensor) -> torch.Tensor:
    """The branch of a sub-layer by hand (nGPT's FFN gain included)."""
    if sub.site.kind == "attn":
        return attn(sub.branch, x)
    gain = sub.s_fc() * sub.fc_gain if hasattr(sub, "s_fc") else None
    return ffn(sub.branch, x, gain)


def build(placement, L: int = 2, **kw) -> TransformerLM:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=11, context=6, n_layer=L, d_model=8, n_head=2, placement=placement,
                      init="xavier", **kw)
    model = TransformerLM(cfg).double().eval()
    with torch.no_grad():  # non-trivial gains, biases, gates, omegas, alphas
        for name, p in model.named_parameters():
            if "raw" in name:  # nGPT's alpha, s_qk, s_fc, s_z: perturb around their init
                p.mul_(1.0 + 0.3 * torch.randn_like(p))
            elif p.dim() <= 1:
                p.copy_(1.0 + 0.3 * torch.randn_like(p) if "weight" in name else 0.3 * torch.randn_like(p))
        for name, buf in model.named_buffers():
            if name.endswith("omega"):
                buf.copy_(0.5 + torch.rand(()))
    return model


def sublayers(model):
    for block in model.blocks:
        yield block.attn
        yield block.ffn


# Each formula maps (sub-layer module, x) -> new x, with F = the branch by hand.
SINGLE = {
    "post": lambda s, x: ln(x + F_(s, x), s.norm),
    "pre": lambda s, x: x + F_(s, ln(x, s.norm)),
    "sandwich": lambda s, x: x + ln(F_(s, ln(x, s.norm_in)), s.norm_out),
    "pre_post": lambda s, x: ln(x + F_(s, ln(x, s.norm_in)), s.norm_out),
    "post_branch": lambda s, x: x + ln(F_(s, x), s.norm),
    "deepnorm": lambda s, x: ln((2 * 2) ** 0.25 * x + F_(s, x), s.norm),  # alpha = (2L)^(1/4), L = 2
    "lns": lambda s, x: x + F_(s, ln(x, s.norm) / math.sqrt(s.site.layer)),
    "none": lambda s, x: x + F_(s, x),
    "admin": lambda s, x: ln(s.omega * x + F_(s, x), s.norm),
    "layerscale": lambda s, x: x + s.scale * F_(s, ln(x, s.norm)),
    # HybridNorm: q, k, v normed inside F_ (read from the module); the FFN adds to the normed stream
    "hybridnorm": lambda s, x: x + F_(s, x) if s.site.kind == "attn" else ln(x, s.norm) + F_(s, ln(x, s.norm)),
    "hybridnorm_star": lambda s, x: (x + F_(s, ln(x, s.norm)) if s.site.layer == 1 else SINGLE["hybridnorm"](s, x)),
    # NormFormer: head scales and the mid-FFN norm are the branches' pre_proj, read inside F_
    "normformer": lambda s, x: (x + ln(F_(s, ln(x, s.norm)), s.norm_out) if s.site.kind == "attn"
                                else x + F_(s, ln(x, s.norm))),
    "subln": lambda s, x: x + F_(s, ln(x, s.norm)),  # the inner norms are the branches' pre_proj
    "keel": lambda s, x: ln(2 * 2 * x + F_(s, ln(x, s.norm_in)), s.norm_out),  # alpha = 2L sub-layers, L = 2
}


def run_model(model, idx):
    h = model.stream.begin(model.embed(idx))
    for b in model.blocks:
        h = b(h)
    return h


@pytest.mark.parametrize("name", list(SINGLE))
def test_single_stream_block_matches_formula(name: str) -> None:
    model = build(name)
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    for sub in sublayers(model):
        x = SINGLE[name](sub, x)
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)
    # the final norm: on for pre-style placements, off for post-style ones (REFERENCE §1), as the
    # placement class declares it; the built model must follow the declaration
    final = PLACEMENTS.get(name).final_norm
    ref = ln(x, model.norm_f) if final else x
    assert isinstance(model.norm_f, torch.nn.Identity) == (not final)
    assert torch.allclose(model(idx)[0], ref @ model.wte.weight.T, atol=TOL, rtol=0)


def test_rezero_gate_formula() -> None:
    model = build({"name": "none", "rezero": True})
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    for sub in sublayers(model):
        assert sub.gate.shape == ()
        x = x + sub.gate * F_(sub, x)
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)
    fresh = TransformerLM(ModelConfig(n_layer=2, d_model=8, n_head=2, placement={"name": "none", "rezero": True}))
    assert all(float(s.gate.detach()) == 0.0 for s in sublayers(fresh))  # ReZero starts as the identity


def test_resi_dual_formula() -> None:
    model = build("resi_dual")
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    d = x  # d_0 = x_0
    for sub in sublayers(model):
        f = F_(sub, x)
        x, d = ln(x + f, sub.norm), d + f
    h = run_model(model, idx)
    assert torch.allclose(h[0], x, atol=TOL, rtol=0) and torch.allclose(h[1], d, atol=TOL, rtol=0)
    out = x + ln(d, model.stream.norm)  # x_L + LN(d_L), no final norm by default
    assert isinstance(model.norm_f, torch.nn.Identity)
    assert torch.allclose(model(idx)[0], out @ model.wte.weight.T, atol=TOL, rtol=0)


def test_ngpt_formula() -> None:
    model = build("ngpt")
    idx = torch.randint(0, 11, (2, 6))
    h = unit(model.embed(idx))
    for sub in sublayers(model):
        h = unit(h + sub.alpha() * (unit(F_(sub, h)) - h))
    assert torch.allclose(run_model(model, idx), h, atol=TOL, rtol=0)
    z = (h @ model.wte.weight.T) * model.stream.s_z()
    assert torch.allclose(model(idx)[0], z, atol=TOL, rtol=0)
    a = model.blocks[0].attn.branch
    assert float(a.scale) == pytest.approx(math.sqrt(4))  # softmax scale sqrt(d_head), d_head = 4


@pytest.mark.parametrize("norm", NORMS.names())
@pytest.mark.parametrize("qk_norm", [None, "layernorm", "rmsnorm", "rmsnorm_1p", "l2"])
def test_norms_and_qk_norms_by_hand(norm: str, qk_norm: str | None) -> None:
    model = build("pre", norm=norm, qk_norm=qk_norm, qkv_norm=qk_norm is not None, bias=True)
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    for sub in sublayers(model):
        x = x + F_(sub, ln(x, sub.norm))
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)


def test_swiglu_rope_and_record_path() -> None:
    model = build("pre", ffn="swiglu", pos="rope", qk_norm="l2")
    idx = torch.randint(0, 11, (2, 6))
    x = ln(model.embed(idx), model.blocks[0].attn.norm)
    a = model.blocks[0].attn.branch
    fast = a(x)
    a.record = True
    slow = a(x)
    assert torch.allclose(fast, slow, atol=TOL, rtol=0)
    assert set(a.stats) == {"max_logit", "min_entropy", "mean_entropy", "head_entropy"}
    assert all(v.dim() == 0 for k, v in a.stats.items() if k != "head_entropy")
    assert a.stats["head_entropy"].shape == (a.n_head,)  # one per head
    assert 0.0 <= float(a.stats["min_entropy"]) <= float(a.stats["mean_entropy"]) <= math.log(6)
    m = model.blocks[0].ffn.branch
    gate, up = (x @ m.fc.weight.T + m.fc.bias).chunk(2, -1)
    ref = (F.silu(gate) * up) @ m.proj.weight.T + m.proj.bias
    assert torch.allclose(m(x), ref, atol=TOL, rtol=0)


def test_recorded_attention_stats_by_hand() -> None:
    """With W_Q = 0 every query attends uniformly: entropy of query t is ln(t+1), so the
    minimum over queries 1.. is ln 2 (query 0, with a single key, is left out of both
    statistics) and the
    largest |logit| is 0."""
    model = build("pre")
    a = model.blocks[0].attn.branch
    d = model.cfg.d_model
    with torch.no_grad():
        a.qkv.weight[:d].zero_()
        if a.qkv.bias is not None:
            a.qkv.bias.zero_()
    a.record = True
    T = 6
    a(torch.randn(2, T, d, dtype=torch.float64))
    assert float(a.stats["max_logit"]) == 0.0
    assert math.isclose(float(a.stats["min_entropy"]), math.log(2), rel_tol=1e-5)
    mean = sum(math.log(t + 1) for t in range(1, T)) / (T - 1)  # also over queries 1..
    assert math.isclose(float(a.stats["mean_entropy"]), mean, rel_tol=1e-5)
    # each head's mean over every query, query 0 (entropy 0) included: log(T!) / T
    assert a.stats["head_entropy"].tolist() == pytest.approx([math.lgamma(T + 1) / T] * a.n_head, rel=1e-5)


def test_every_registered_placement_has_a_formula_test() -> None:
    """Adding a placement means adding its hand-written formula here (docs/architecture.md)."""

    two_stream_or_sphere = {"resi_dual", "ngpt"}  # their own tests above
    two_stream_or_sphere |= {"siamese", "attn_res", "mhc"}  # theirs in test_formulas_residual2026.py
    assert set(PLACEMENTS.names()) == set(SINGLE) | two_stream_or_sphere


@pytest.mark.parametrize("name", ["hybridnorm", "hybridnorm_star"])
def test_hybridnorm_normalises_q_k_v_with_the_block_norm(name: str) -> None:
    """The q/k/v norms are model.norm over the head dimension (as the official code builds them),
    not identities; HybridNorm's attention has no input norm, HybridNorm*'s block 1 has one."""
    model = build(name, norm="rmsnorm")
    for block in model.blocks:
        a = block.attn.branch
        assert all(isinstance(m, norms.RMSNorm) and m.weight.shape == (4,) for m in (a.q_norm, a.k_norm, a.v_norm))
        first = block.attn.site.layer == 1 and name == "hybridnorm_star"
        assert (block.attn.norm is None) == (not first)
    with pytest.raises(ConfigError, match=r"^model\.qk_norm='rmsnorm': placement hybridnorm normalises q, k and v"):
        resolve_model(ModelConfig(n_layer=2, d_model=8, n_head=2, placement=["pre", "hybridnorm"], qk_norm="rmsnorm"))


def test_normformer_and_subln_hooks_are_the_papers() -> None:
    nf = build("normformer")
    a, f = nf.blocks[0].attn.branch, nf.blocks[0].ffn.branch
    assert isinstance(a.pre_proj, HeadScale) and a.pre_proj.weight.shape == (2,)   # one gamma per head
    assert isinstance(f.pre_proj, norms.LayerNorm) and f.pre_proj.weight.shape == (32,)  # over d_ff
    fresh = TransformerLM(ModelConfig(n_layer=2, d_model=8, n_head=2, placement="normformer"))
    assert bool((fresh.blocks[0].attn.branch.pre_proj.weight == 1).all())  # gamma_i = 1 at init
    sl = build("subln")
    assert sl.blocks[0].attn.branch.pre_proj.weight.shape == (8,)   # over the concatenated heads
    assert sl.blocks[0].ffn.branch.pre_proj.weight.shape == (32,)


@pytest.mark.parametrize("init", ["gpt2", "xavier"])
def test_subln_init_scales_w_v_w_o_w_1_w_2_by_gamma(init: str) -> None:
    """Same seed, same draws: Sub-LN's W_V, W_1 are Pre-LN's times gamma = sqrt(log 2L), W_O and
    W_2 gamma times the scheme's non-residual std; W_Q, W_K untouched."""
    L, d = 3, 8
    cfg = dict(vocab_size=11, context=6, n_layer=L, d_model=d, n_head=2, init=init, n_kv_head=1)
    torch.manual_seed(0)
    pre = TransformerLM(ModelConfig(placement="pre", **cfg))
    torch.manual_seed(0)
    sub = TransformerLM(ModelConfig(placement="subln", **cfg))
    g = math.sqrt(math.log(2 * L))
    undo = math.sqrt(2 * L) if init == "gpt2" else 1.0   # GPT-2's 1/sqrt(2L) on W_O, W_2 replaced by gamma
    for bp, bs in zip(pre.blocks, sub.blocks):
        wp, ws = bp.attn.branch.qkv.weight, bs.attn.branch.qkv.weight
        v = d + d // 2                                     # rows: W_Q 0:d, W_K d:d+4 (one kv head), W_V after
        assert ws.shape[0] == v + d // 2
        assert torch.equal(ws[:v], wp[:v])
        assert torch.allclose(ws[v:], g * wp[v:])
        assert torch.allclose(bs.attn.branch.proj.weight, g * undo * bp.attn.branch.proj.weight)
        assert torch.allclose(bs.ffn.branch.fc.weight, g * bp.ffn.branch.fc.weight)
        assert torch.allclose(bs.ffn.branch.proj.weight, g * undo * bp.ffn.branch.proj.weight)


def test_sandwich_embed_norm_peri_ln() -> None:
    model = build({"name": "sandwich", "embed_norm": True})
    subs = list(sublayers(model))
    assert subs[0].embed_norm is not None and all(s.embed_norm is None for s in subs[1:])
    idx = torch.randint(0, 11, (2, 6))
    x = ln(model.embed(idx), subs[0].embed_norm)      # x_0 <- LN_emb(x_0)
    for sub in subs:
        x = SINGLE["sandwich"](sub, x)
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)
    plain = build("sandwich")
    assert all(s.embed_norm is None for s in sublayers(plain))


def test_new_placements_compose_per_layer_with_pre_and_post() -> None:
    layout = [{"attn": "hybridnorm", "ffn": "pre"}, {"attn": "post", "ffn": "normformer"},
              "subln", {"attn": "normformer", "ffn": "hybridnorm"}]
    model = build(layout, L=4)
    assert model.layout == [("hybridnorm", "pre"), ("post", "normformer"), ("subln", "subln"),
                            ("normformer", "hybridnorm")]
    idx = torch.randint(0, 11, (2, 6))
    x = model.embed(idx)
    for (a, f), block in zip(model.layout, model.blocks):
        x = SINGLE[f](block.ffn, SINGLE[a](block.attn, x))
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)


def test_gemma_options_by_hand() -> None:
    """Sandwich with (1 + w) RMSNorms and per-head QK-norm, GeGLU, a head width apart from d/H,
    a fixed query scale, soft-capped attention and output logits, a scaled embedding and a
    2-token window in block 1 only: the model equals the formulas written out."""
    model = build("sandwich", norm="rmsnorm_1p", qk_norm="rmsnorm_1p", ffn="geglu", d_head=6, attn_scale=0.3,
                  attn_softcap=0.5, logit_softcap=2.0, embed_scale=2.0, sliding_window=2, window_layers=[1],
                  bias=False, tie_embeddings=True)
    assert [b.attn.branch.window for b in model.blocks] == [2, None]
    assert model.blocks[0].attn.branch.qkv.weight.shape == (2 * 6 * 3, 8)  # n_head * d_head rows each
    idx = torch.randint(0, 11, (2, 6))
    x = model.wte.weight[idx] * 2.0 + model.wpe.weight[:6]
    assert torch.allclose(model.embed(idx), x, atol=TOL, rtol=0)
    for sub in sublayers(model):
        x = SINGLE["sandwich"](sub, x)
    assert torch.allclose(run_model(model, idx), x, atol=TOL, rtol=0)
    z = ln(x, model.norm_f) @ model.wte.weight.T
    assert torch.allclose(model(idx)[0], 2.0 * torch.tanh(z / 2.0), atol=TOL, rtol=0)
