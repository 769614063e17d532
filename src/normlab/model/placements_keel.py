"""Keel: Post-LN with a Highway-style up-weighted shortcut and a second norm on the branch input
(name: ``catalogue.py``; what each source says: docs/placements.md, "Keel").

Chen & Wei 2026, "Post-LayerNorm Is Back: Stable, ExpressivE, and Deep" (arXiv 2601.19895).
Notation as in ``placements.py``: x the residual stream entering the sub-layer, F the branch,
LN the configured norm (``model.norm``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from normlab.core.schema import doc
from normlab.model.placement import Placement, PlacementOptions, Site

# How the paper's L may be counted (docs/placements.md: which sources count which).
ALPHA_COUNTS = ("sublayers", "blocks")


def keel_alpha(alpha: str | float, n_layer: int) -> float:
    """The shortcut weight: ``"sublayers"`` 2 n_layer, ``"blocks"`` n_layer, else the number."""
    if alpha == "sublayers":
        return float(2 * n_layer)
    if alpha == "blocks":
        return float(n_layer)
    return float(alpha)


class Keel(Placement):
    """Keel: x <- LN_out(alpha x + F(LN_in(x))) at every sub-layer (attention and FFN alike).

    The paper's alpha is "L". The secondary pages disagree on what L counts (a summary of the
    paper says "the total number of sub-layers", another page "the total number of layers");
    every third-party implementation found counts sub-layers, alpha = 2 n_layer, so that is
    the default (``alpha = "sublayers"``); ``"blocks"`` gives alpha = n_layer and a number
    sets alpha itself. The norms are ``model.norm``: the sources describe RMSNorm with a
    learnable gain and no bias, i.e. ``model.norm = "rmsnorm"`` with ``model.bias = false``.
    No special init: the paper says Keel needs none. No final norm by default, as the lab's
    other post-style placements (LN_out already ends the last sub-layer); the third-party
    ports keep their Pre-LN base model's final norm (``model.final_norm = true``).

    Not modelled: those ports also make block 1 special (its attention plain Pre-LN, its FFN
    without alpha); no retrievable text of the paper confirms it, so every sub-layer here
    follows the one formula (a per-layer list can put another placement in block 1).
    """

    @dataclass
    class Options(PlacementOptions):
        alpha: str | float = doc("the shortcut weight: 'sublayers' (alpha = 2L, the paper's L counted in "
                                 "sub-layers), 'blocks' (alpha = L) or a number > 0", "sublayers")

        def __post_init__(self) -> None:
            ok = self.alpha in ALPHA_COUNTS if isinstance(self.alpha, str) else self.alpha > 0
            self.check(ok, "alpha", "use 'sublayers' (alpha = 2L), 'blocks' (alpha = L) or a number > 0")

    formula = "x <- LN_out(alpha*x + F(LN_in(x))), alpha = 2L (sub-layers) by default"
    source = "Keel (Chen & Wei 2026, arXiv 2601.19895, 'Post-LayerNorm Is Back')"
    final_norm = False
    depth_scaling = "up-weights its shortcut by alpha = 2L (or L)"
    # alpha up to 2L amplifies the shortcut at every sub-layer; only LN_out brings it back.
    needs_norm = True

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm_in, self.norm_out = site.norm(), site.norm()
        self.alpha = keel_alpha(self.options.alpha, site.cfg.n_layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm_out(self.alpha * x + self.branch(self.norm_in(x)))

    def extra_repr(self) -> str:
        return f"alpha={self.alpha:g}"
