"""Quick measurements beyond the probe grid, each one value per seed:

- :func:`identity_path`: the per-norm factor of Post-LN's identity term prod_k J_LN_k (seed 004).
- :func:`identity_coefficients`: tr(d x_l / d x_{l-1}) / n per block (Hutchinson), the
  weight of the identity in each block's Jacobian (seed 000's J_LN (I + J_F) vs I + J_F J_LN).
- :func:`one_step_change`: relative change of the logits after one Adam step (Liu et al.
  2020's amplification; DeepNet's bounded update), and DeepNorm's branch share.
- :func:`ln_gain`: what Post-LN's LayerNorm does to the sub-layer output it normalises
  (:mod:`normlab.claims.measure_norm_gain`).
- :func:`rms_formula`, :func:`gpt2_parity`, :func:`seed_block_causality`: exact checks of
  seed statements, repeated over random draws so that they too have n >= 3.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from normlab.claims.measure_norm_gain import norm_gain, per_sublayer
from normlab.diagnostics.probe import ProbeConfig, load_tokens, sample_batch
from normlab.model.interop import from_hf_gpt2
from normlab.model.norms import RMSNorm
from normlab.model.transformer import TransformerLM

D, CONTEXT, BATCH = 128, 64, 8


def _setup(placement: str, L: int, seed: int, init: str = "xavier") -> tuple[Any, Any, Any]:
    """A probe-sized model (d = d_ff = 128, 4 heads) and a batch of the probe's data."""
    import torch

    data = "tinyshakespeare"
    try:
        tokens, vocab = load_tokens(data)
    except Exception:  # no corpus: random tokens (statistics at init hardly depend on the text)
        data = "random"
        tokens, vocab = load_tokens(data)
    cfg = ProbeConfig(placements=[placement], depths=[L], d_model=D, n_head=4, d_ff=D, init=init, seeds=1,
                      batch_size=BATCH, context=CONTEXT, data=data)
    gen = torch.Generator().manual_seed(1_000_003 * seed + 17)
    idx, tgt = sample_batch(tokens, vocab, 2 * BATCH, CONTEXT, gen)
    torch.manual_seed(seed)
    model = TransformerLM(cfg.model_config(placement, L, vocab))
    return model, (idx[:BATCH], tgt[:BATCH]), (idx[BATCH:], tgt[BATCH:])


def identity_coefficients(placement: str, L: int, seed: int) -> list[float]:
    """v . J_l v / v . v for each block l (one Rademacher v per block, over all B x T x d
    entries): the mean diagonal of the block's Jacobian. Pre-LN: 1 + tr(J_F J_LN)/n;
    Post-LN: tr(J_LN (I + J_F))/n, where J_LN divides by the std of x + F(x)."""
    import torch

    model, (idx, tgt), _ = _setup(placement, L, seed)
    ins: list[Any] = []
    outs: list[Any] = []

    def keep(_m: Any, a: tuple, o: Any) -> None:  # returns None: the block's output is left alone
        ins.append(a[0])
        outs.append(o)

    hooks = [b.register_forward_hook(keep) for b in model.blocks]
    try:
        model(idx, tgt)
    finally:
        for h in hooks:
            h.remove()
    gen = torch.Generator().manual_seed(seed)
    out = []
    for x, y in zip(ins, outs):
        v = torch.randint(0, 2, y.shape, generator=gen).to(y.dtype) * 2 - 1
        (g,) = torch.autograd.grad(y, x, v, retain_graph=True)
        out.append(float((g * v).sum() / v.numel()))
    return out


def identity_path(L: int, seed: int) -> list[float]:
    """The identity ("first") term of Post-LN's end-to-end Jacobian: the product of the
    LayerNorm Jacobians alone, prod_k J_LN_k, with every J_F term dropped. Each J_LN_k is
    taken at the input its norm sees in the forward pass; a Gaussian tangent v is pushed
    through them in order (forward-mode, ``torch.func.jvp``) and the return is
    ||v_k|| / ||v_{k-1}|| per norm (2 per block: after attention and after the FFN)."""
    import torch

    model, (idx, tgt), _ = _setup("post", L, seed)
    norms = [s.norm for b in model.blocks for s in (b.attn, b.ffn)]
    ins: list[Any] = []
    hooks = [n.register_forward_hook(lambda _m, a, _o: ins.append(a[0].detach())) for n in norms]
    try:
        with torch.no_grad():
            model(idx, tgt)
    finally:
        for h in hooks:
            h.remove()
    gen = torch.Generator().manual_seed(seed)
    v = torch.randn(ins[0].shape, generator=gen)
    out = []
    for n, u in zip(norms, ins):
        w = torch.func.jvp(n, (u,), (v,))[1]
        out.append(float(w.detach().norm() / v.norm()))
        w = w.detach()
        v = w
    return out


def one_step_change(placement: str, L: int, seed: int, lr: float = 1e-4, blocks_only: bool = False) -> dict[str, float]:
    """||f(x; W_1) - f(x; W_0)|| / ||f(x; W_0)||, f = logits on a held-out batch, W_1 = W_0 after
    one Adam step (lr, no weight decay) on another batch; Admin profiled on that batch first.
    ``blocks_only``: the step updates the blocks' parameters alone, embeddings, final norm and
    head fixed (Liu et al.'s Theorem 2 perturbs the N sub-layers' parameters; an update of the
    embedding or head adds a change that does not grow with depth).
    For DeepNorm also the branch share: mean over sub-layers of log(Var[F(x)] / Var[alpha x])."""
    import torch

    model, (idx, tgt), (ev, _) = _setup(placement, L, seed)
    model.calibrate(idx)
    share = _branch_share(model, idx) if placement == "deepnorm" else math.nan
    with torch.no_grad():
        f0 = model(ev)[0].float()
    opt = torch.optim.Adam(model.blocks.parameters() if blocks_only else model.parameters(), lr=lr)
    _, loss = model(idx, tgt)
    loss.backward()
    opt.step()
    with torch.no_grad():
        f1 = model(ev)[0].float()
    return {"change": float((f1 - f0).norm() / f0.norm()), "branch_share": share}


def ln_gain(L: int, seed: int) -> list[dict[str, float]]:
    """Per sub-layer of a probe-sized Post-LN model: RMS(F) / RMS(x) and the LayerNorm's gain on F."""
    model, (idx, _), _ = _setup("post", L, seed)
    return norm_gain(model, idx)


def _branch_share(model: Any, idx: Any) -> float:
    def log_share(sub: Any, x: Any) -> float:
        return math.log(float(sub.branch(x).var()) / float((sub.alpha * x).var()))

    return float(np.mean(per_sublayer(model, idx, log_share)))


def rms_formula(seed: int, d: int = 128) -> dict[str, float]:
    """Seed 001's RMS (without the square root) against normlab's RMSNorm on x = s z, z of
    unit RMS: log10 of output RMS at s = 10 over s = 0.1 (0 for a normaliser)."""
    import torch

    norm = RMSNorm(d, eps=1e-5)
    z = torch.randn(64, d, generator=torch.Generator().manual_seed(seed))
    z = z / z.pow(2).mean(-1, keepdim=True).sqrt()

    def seed_formula(x: torch.Tensor) -> torch.Tensor:
        return x / x.pow(2).mean(-1, keepdim=True)

    def rms(t: torch.Tensor) -> float:
        return float(t.pow(2).mean().sqrt())

    with torch.no_grad():
        return {"seed_log10_ratio": math.log10(rms(seed_formula(10 * z)) / rms(seed_formula(0.1 * z))),
                "normlab_log10_ratio": math.log10(rms(norm(10 * z)) / rms(norm(0.1 * z)))}


def gpt2_parity(seed: int) -> dict[str, float] | None:
    """A random tiny transformers GPT-2 (no download) loaded into normlab's pre and post
    placements: log10 max |logit difference| to GPT-2's own forward. None without transformers."""
    import importlib.util

    if importlib.util.find_spec("transformers") is None:  # the claim is inconclusive without it
        return None
    import dataclasses

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=65, n_positions=32, n_embd=64, n_layer=3, n_head=4, bos_token_id=0,
                                    eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
    idx = torch.randint(0, 65, (2, 32), generator=torch.Generator().manual_seed(seed + 1))
    pre = from_hf_gpt2(hf).eval()
    post = TransformerLM(dataclasses.replace(pre.cfg, placement="post", final_norm=None)).eval()
    # post's per-sub-layer norm plays ln_1/ln_2's role; GPT-2's weights fit the same names
    post.load_state_dict({k: v for k, v in pre.state_dict().items() if "norm_f" not in k}, strict=False)
    with torch.no_grad():
        ref = hf(idx).logits
        d_pre = float((pre(idx)[0] - ref).abs().max())
        d_post = float((post(idx)[0] - ref).abs().max())
    return {"log10_diff_pre": math.log10(max(d_pre, 1e-30)), "log10_diff_post": math.log10(max(d_post, 1e-30)),
            "logit_scale": float(ref.abs().max())}


def seed_block_causality(seed: int, d: int = 64, heads: int = 4, T: int = 16) -> float:
    """Seed 002's TransformerBlock as written (nn.MultiheadAttention called with x, x, x and no
    mask, in its default sequence-first layout): change the tokens from position T/2 on and
    return log10 of the largest change of the outputs *before* T/2, relative to the output
    scale (a causal block gives exactly 0 change, i.e. -inf; we floor at -30)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class SeedBlock(nn.Module):  # the seed's code, pre-norm branch, reproduced for measurement
        def __init__(self) -> None:
            super().__init__()
            self.attention = nn.MultiheadAttention(d, heads)
            self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.ReLU(), nn.Linear(4 * d, d))
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attention(self.norm1(x), self.norm1(x), self.norm1(x))[0]
            return x + self.ffn(self.norm2(x))

    block = SeedBlock().eval()
    x = torch.randn(T, 2, d)  # (sequence, batch, d): nn.MultiheadAttention's default layout
    x2 = x.clone()
    x2[T // 2:] = torch.randn(T - T // 2, 2, d)
    with torch.no_grad():
        y, y2 = block(x), block(x2)
    change = float((y[: T // 2] - y2[: T // 2]).abs().max() / y.abs().max())
    return math.log10(max(change, 1e-30))


EXTRAS = ("identity:pre", "identity:post", "identity_path:post", "one_step:post", "one_step:pre", "one_step:admin", "one_step:deepnorm",
          "one_step_blocks:post", "one_step_blocks:pre", "one_step_blocks:admin",
          "ln_gain:post", "rms", "gpt2", "causal")  # what a quick claim's Needs.extra may name


def extra_size(key: str, seeds: int, depths: list[int]) -> int:
    """How many models (or draws) measuring ``key`` takes: the progress display's unit."""
    name = key.partition(":")[0]
    return {"identity": seeds, "identity_path": seeds, "one_step": seeds * len(depths),
            "one_step_blocks": seeds * len(depths), "ln_gain": seeds, "rms": seeds}.get(name, 3)


def measure_extra(key: str, out: dict[str, Any], seeds: int, depths: list[int], ref_depth: int,
                  tick: Any = None, first_seed: int = 0) -> None:
    """Measure ``key`` (one of :data:`EXTRAS`) into ``out`` in the layout the claims read, over
    seeds ``first_seed`` on; ``tick()`` after each model. Every measurement seeds itself, so the
    order does not matter."""
    ss = range(first_seed, first_seed + seeds)
    import torch

    def each(fn: Any, args: list[tuple[Any, ...]]) -> list[Any]:
        got = []
        for a in args:
            got.append(fn(*a))
            if tick:
                tick()
        return got

    name, _, p = key.partition(":")
    with torch.random.fork_rng():
        if name == "identity":
            out.setdefault("identity", {"L": ref_depth})[p] = each(identity_coefficients,
                                                                   [(p, ref_depth, s) for s in ss])
        elif name == "identity_path":
            out["identity_path"] = {"L": max(depths), "post": each(identity_path, [(max(depths), s) for s in ss])}
        elif name in ("one_step", "one_step_blocks"):
            step = functools.partial(one_step_change, blocks_only=name == "one_step_blocks")
            got = each(step, [(p, L, s) for L in depths for s in ss])
            out.setdefault(name, {"depths": list(depths)})[p] = {
                L: got[i * seeds:(i + 1) * seeds] for i, L in enumerate(depths)}
        elif name == "ln_gain":
            out["ln_gain"] = {"L": ref_depth, "post": each(ln_gain, [(ref_depth, s) for s in ss])}
        elif name == "rms":
            out["rms"] = each(rms_formula, [(s,) for s in ss])
        elif name == "gpt2":
            g = each(gpt2_parity, [(s,) for s in ss[:3]])
            out["gpt2"] = None if g[0] is None else g
        elif name == "causal":
            out["causal"] = each(seed_block_causality, [(s,) for s in ss[:3]])
        else:
            raise ValueError(f"unknown extra measurement {key!r}; known: {', '.join(EXTRAS)}")


def measure_extras(seeds: int, depths: list[int], ref_depth: int) -> dict[str, Any]:
    """Every extra measurement of the quick claims, per seed (see the functions above)."""
    out: dict[str, Any] = {}
    for key in EXTRAS:
        measure_extra(key, out, seeds, depths, ref_depth)
    return out
