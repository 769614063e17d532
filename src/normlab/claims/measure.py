"""Measurements of the quick claims: one probe grid at initialisation (the diagnostics
engineer's ``normlab.diagnostics.probe``) plus three small exact checks, and the figures
the verdicts link to.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

PLACEMENTS = ["post", "pre", "deepnorm"]
DEPTHS = [2, 4, 8, 16, 32]


@dataclass
class QuickData:
    """Everything the quick claims decide on."""

    rows: list[dict[str, Any]]
    fits: dict[str, Any]
    seeds: int
    probe: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)

    def values(self, placement: str, L: int, metric: str, sublayer: str | None = None,
               param: str | None = None) -> np.ndarray:
        """(seeds, layers) matrix of one metric for one model size; columns ordered by layer."""
        sel = [r for r in self.rows if r["placement"] == placement and int(r["n_layer"]) == L
               and r["metric"] == metric and (sublayer is None or r["sublayer"] == sublayer)
               and (param is None or r["param"] == param)]
        layers = sorted({int(r["layer"]) for r in sel})
        m = np.full((self.seeds, len(layers)), np.nan)
        for r in sel:
            m[int(r["seed"]), layers.index(int(r["layer"]))] = float(r["value"])
        return m

    def layers(self, placement: str, L: int, metric: str, sublayer: str | None = None,
               param: str | None = None) -> list[int]:
        return sorted({int(r["layer"]) for r in self.rows if r["placement"] == placement
                       and int(r["n_layer"]) == L and r["metric"] == metric
                       and (sublayer is None or r["sublayer"] == sublayer) and (param is None or r["param"] == param)})


def measure(seeds: int = 3, depths: list[int] | None = None, d_model: int = 128) -> QuickData:
    """Probe post, pre and deepnorm at init (xavier, Xiong's setting; d_ff = d as the
    reference measurement) over depths x seeds, and summarise with the probe's fits."""
    import torch

    from normlab.diagnostics.fits import summarize
    from normlab.diagnostics.probe import ProbeConfig, run_probe

    depths = depths or DEPTHS
    data = "tinyshakespeare"
    try:
        from normlab.diagnostics.probe import load_tokens

        load_tokens(data)
    except Exception:  # no corpus here: the statistics at init hardly depend on the text
        data = "random"
    cfg = ProbeConfig(placements=PLACEMENTS, depths=depths, d_model=d_model, n_head=4, d_ff=d_model,
                      init="xavier", seeds=seeds, batch_size=8, context=64, data=data, n_proj=1)
    with torch.random.fork_rng():
        rows = run_probe(cfg)
    probe = {"placements": PLACEMENTS, "depths": depths, "d_model": d_model, "d_ff": d_model, "n_head": 4,
             "init": "xavier", "seeds": seeds, "batch": "8 x 64 tokens", "data": data, "n_proj": 1}
    return QuickData(rows, summarize(rows), seeds, probe)


def rms_formulas(scales: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 10.0), d: int = 128) -> dict[str, Any]:
    """Seed 001's x / ((1/n) sum x^2) against normlab's RMSNorm x / sqrt(mean x^2 + eps) (g = 1)
    on x = s * z, z ~ N(0, I): output RMS and the largest elementwise difference per scale s."""
    import torch

    from normlab.model.norms import RMSNorm

    norm = RMSNorm(d, eps=1e-5)
    z = torch.randn(64, d, generator=torch.Generator().manual_seed(0))
    z = z / z.pow(2).mean(-1, keepdim=True).sqrt()  # exact unit RMS so scale s is exact
    out = {"scale": list(scales), "rms_normlab": [], "rms_seed": [], "max_abs_diff": []}
    with torch.no_grad():
        for s in scales:
            x = s * z
            ours = norm(x)
            seed = x / x.pow(2).mean(-1, keepdim=True)
            out["rms_normlab"].append(float(ours.pow(2).mean().sqrt()))
            out["rms_seed"].append(float(seed.pow(2).mean().sqrt()))
            out["max_abs_diff"].append(float((ours - seed).abs().max()))
    return out


def deepnorm_constants(depths: list[int]) -> dict[str, Any]:
    """alpha and beta as built by the model against DeepNet's formulas, and the measured
    init std of W_V / W_Q (beta scales W_V, not W_Q) for each depth."""
    import torch

    from normlab.model.config import ModelConfig
    from normlab.model.transformer import TransformerLM

    out: dict[str, list[float]] = defaultdict(list)
    for L in depths:
        torch.manual_seed(0)
        m = TransformerLM(ModelConfig(n_layer=L, d_model=64, n_head=4, context=16, placement="deepnorm",
                                      init="xavier"))
        a = m.blocks[0].attn
        w = a.branch.qkv.weight.detach()
        out["L"].append(L)
        out["alpha_model"].append(float(a.alpha))
        out["alpha_formula"].append((2 * L) ** 0.25)
        out["beta_model"].append(float(a.beta))
        out["beta_formula"].append((8 * L) ** -0.25)
        out["std_ratio_v_q"].append(float(w[128:].std() / w[:64].std()))
    return dict(out)


def gpt2_parity() -> dict[str, Any] | None:
    """A random tiny transformers GPT-2 (no download) loaded into normlab's pre and post
    placements: max |logit difference| to GPT-2's own forward. None without transformers."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return None
    import dataclasses

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from normlab.model.interop import from_hf_gpt2
    from normlab.model.transformer import TransformerLM

    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=65, n_positions=32, n_embd=64, n_layer=3, n_head=4,
                                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
    idx = torch.randint(0, 65, (2, 32), generator=torch.Generator().manual_seed(1))
    pre = from_hf_gpt2(hf).eval()
    post = TransformerLM(dataclasses.replace(pre.cfg, placement="post", final_norm=None)).eval()
    state = {k: v for k, v in pre.state_dict().items() if "norm_f" not in k}
    # post's per-sub-layer norm plays ln_1/ln_2's role; GPT-2's weights fit the same names
    post.load_state_dict(state, strict=False)
    with torch.no_grad():
        ref = hf(idx).logits
        d_pre = float((pre(idx) - ref).abs().max())
        d_post = float((post(idx) - ref).abs().max())
    return {"max_abs_logit_diff_pre": d_pre, "max_abs_logit_diff_post": d_post,
            "logit_scale": float(ref.abs().max()), "transformers": transformers.__version__}


def slope_per_layer(y: np.ndarray) -> float:
    """Geometric factor per layer of a positive profile: exp(slope of log y against index)."""
    v = np.asarray(y, float)
    return float(math.exp(np.polyfit(np.arange(v.size), np.log(v), 1)[0]))


def save_figures(q: QuickData, out: Path) -> None:
    """The evidence figures of the quick claims (PNG + SVG in out/figures)."""
    from normlab.report import figures as F
    from normlab.report.style import close, save

    fd = out / "figures"
    depths = q.probe["depths"]
    Lmax, Lmid = max(depths), sorted(depths)[len(depths) // 2 + (len(depths) > 2)]

    def keep(fig: Any, name: str) -> None:
        save(fig, fd, name)
        close(fig)

    w2 = {p: (np.array(depths, float), np.stack([q.values(p, L, "grad_norm", "ffn", "W_2")[:, -1] for L in depths], 1))
          for p in ("post", "pre")}
    fig, _ = F.depth_scaling(w2, "||dLoss/dW2_L||_F (last block)", "Xiong Thm 1: last-layer W2 gradient vs depth")
    keep(fig, "xiong_w2_depth")
    prof = {p: (np.array(q.layers(p, Lmid, "grad_norm", "ffn", "W_2"), float), q.values(p, Lmid, "grad_norm", "ffn", "W_2"))
            for p in ("post", "pre")}
    keep(F.layer_profile(prof, "||dLoss/dW2_l||_F", f"W2 gradient norm per layer at init, L={Lmid}"),
         "grad_per_layer")
    st = {p: (np.array(q.layers(p, Lmid, "mean_sq", "stream", "x"), float), q.values(p, Lmid, "mean_sq", "stream", "x"))
          for p in ("post", "pre")}
    fig = F.layer_profile(st, "E||x_l||² / d", f"forward norms at init, L={Lmid}", logy=False,
                          xlabel="stream index l (0 = embedding)")
    ax = fig.axes[0]
    ls = np.arange(Lmid + 1)
    ax.fill_between(ls, 1 + ls / 2, 1 + 1.5 * ls, color="grey", alpha=0.12, label="Xiong: (1+l/2)..(1+3l/2)")
    ax.legend()
    keep(fig, "forward_norms")
    jac = {p: (np.array(q.layers(p, Lmax, "jac_rms_to_last", "stream", "x"), float), q.values(p, Lmax, "jac_rms_to_last", "stream", "x"))
           for p in ("post", "pre", "deepnorm")}
    fig = F.layer_profile(jac, "RMS singular value of d x_L / d x_l", f"end-to-end Jacobian at init, L={Lmax}",
                          logy=True, xlabel="stream index l (0 = embedding)")
    ax = fig.axes[0]
    ax.plot(jac["post"][0], (2 ** -0.5) ** (Lmax - jac["post"][0]), "k:", label="seed 004: (1/√2)^(L-l)")
    ax.legend()
    keep(fig, "jacobian")
    tc = {p: (np.array(depths, float), np.stack([q.values(p, L, "token_cos", "stream", "x")[:, -1] for L in depths], 1))
          for p in ("post", "pre", "deepnorm")}
    keep(F.curves(tc, "depth L (blocks)", "mean pairwise token cosine at x_L", "rank collapse at init",
                  logy=False, logx=True), "rank_collapse")
    rms = q.extra.get("rms")
    if rms:
        s = np.array(rms["scale"])
        keep(F.curves({"normlab RMSNorm": (s, np.array([rms["rms_normlab"]])),
                       "seed 001: x / mean(x²)": (s, np.array([rms["rms_seed"]]))},
                      "input RMS s (log scale)", "output RMS", "RMSNorm vs seed 001's formula", logy=True, logx=True),
             "rms_formula")
