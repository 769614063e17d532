"""Every built-in component of the model, registered once, one line each.

This is the only module that fills the registries of ``model/registries.py``; nothing
registers itself when imported. Code that needs a filled registry imports it from here.
Adding a placement is its class (in ``placements.py`` or anywhere), its formula test and
one line below; an installed package adds its own through ``normlab.plugins``.
"""

from __future__ import annotations

from torch import nn

from normlab.core import plugins
from normlab.model import (
    attention,
    impls,
    init,
    layout,
    norms,
    param,
    placements,
    placements_inner,
    placements_keel,
    streams,
    streams_2026,
    streams_mhc,
)
from normlab.model.placement import Placement
from normlab.model.registries import ACTIVATIONS, FFNS, IMPLS, INITS, LAYOUTS, NORMS, PARAMS, PLACEMENTS, QK_NORMS

__all__ = ["PLACEMENTS", "LAYOUTS", "NORMS", "QK_NORMS", "INITS", "FFNS", "ACTIVATIONS", "IMPLS", "PARAMS", "norm_types"]

PLACEMENTS.add("post", placements.Post)
PLACEMENTS.add("pre", placements.Pre)
PLACEMENTS.add("sandwich", placements.Sandwich)
PLACEMENTS.add("pre_post", placements.PrePost)
PLACEMENTS.add("post_branch", placements.PostBranch)
PLACEMENTS.add("deepnorm", placements.DeepNorm)
PLACEMENTS.add("lns", placements.LayerNormScaling)
PLACEMENTS.add("none", placements.NoNorm)
PLACEMENTS.add("layerscale", placements.LayerScale)
PLACEMENTS.add("admin", placements.Admin)
PLACEMENTS.add("resi_dual", streams.ResiDual)
PLACEMENTS.add("ngpt", streams.NGPT)
PLACEMENTS.add("hybridnorm", placements_inner.HybridNorm)
PLACEMENTS.add("hybridnorm_star", placements_inner.HybridNormStar)
PLACEMENTS.add("normformer", placements_inner.NormFormer)
PLACEMENTS.add("subln", placements_inner.SubLN)
PLACEMENTS.add("keel", placements_keel.Keel)
PLACEMENTS.add("siamese", streams_2026.SiameseNorm)
PLACEMENTS.add("attn_res", streams_2026.AttentionResiduals)
PLACEMENTS.add("mhc", streams_mhc.MHC)

LAYOUTS.add("mix", layout.Mix)

NORMS.add("layernorm", norms.LayerNorm)
NORMS.add("rmsnorm", norms.RMSNorm)
NORMS.add("rmsnorm_1p", norms.RMSNorm1p)
NORMS.add("scalenorm", norms.ScaleNorm)
NORMS.add("dyt", norms.DyT)
NORMS.add("derf", norms.Derf)
NORMS.add("seednorm", norms.SeeDNorm)
NORMS.add("none", norms.identity)

QK_NORMS.add("layernorm", norms.LayerNorm)
QK_NORMS.add("rmsnorm", norms.RMSNorm)
QK_NORMS.add("rmsnorm_1p", norms.RMSNorm1p)
QK_NORMS.add("l2", norms.L2Norm)

INITS.add("gpt2", init.GPT2Init())
INITS.add("xavier", init.XavierInit())
INITS.add("torch_default", init.TorchDefaultInit())

FFNS.add("gelu", attention.MLP)
FFNS.add("swiglu", attention.SwiGLU)
FFNS.add("geglu", attention.GeGLU)

ACTIVATIONS.add("gelu", attention.gelu)
ACTIVATIONS.add("gelu_tanh", attention.gelu_tanh)

IMPLS.add("normlab", impls.LAB)
IMPLS.add("hf-gpt2", impls.HF_GPT2)

PARAMS.add("sp", param.SP)
PARAMS.add("mup", param.MuP)
PARAMS.add("completep", param.CompleteP)

# Installed plugins add theirs at the first lookup (docs/plugins.md); none is imported here.
PLACEMENTS.fill_later(plugins.filler("placements", Placement))
LAYOUTS.fill_later(plugins.filler("layouts"))
NORMS.fill_later(plugins.filler("norms"))
QK_NORMS.fill_later(plugins.filler("qk_norms"))
INITS.fill_later(plugins.filler("inits", init.InitScheme))
FFNS.fill_later(plugins.filler("ffns", nn.Module))


def norm_types() -> tuple[type[nn.Module], ...]:
    """Module classes of every registered norm and qk-norm (read at call time, so norms
    registered later count): the norms whose inputs ``normlab.diagnostics.hooks`` records."""
    found = [f for _, f in [*NORMS.items(), *QK_NORMS.items()] if isinstance(f, type) and issubclass(f, nn.Module)]
    return tuple(dict.fromkeys([*found, nn.LayerNorm]))
