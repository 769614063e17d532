"""Every normalization placement as one small class (formulas: ../shared/REFERENCE.md §1).

Notation: x is the residual stream entering the sub-layer, F the branch (attention or
FFN, including its output dropout), LN the configured norm (``model.norm``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from normlab.model.placement import PLACEMENTS, Placement, Site


@PLACEMENTS.register("post")
class Post(Placement):
    """Post-LN: x <- LN(x + F(x)). Vaswani et al. 2017; BERT; GPT-1. No final norm needed."""

    formula = "x <- LN(x + F(x))"
    source = "Vaswani et al. 2017 (original Transformer), BERT, GPT-1"
    final_norm = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.branch(x))


@PLACEMENTS.register("pre")
class Pre(Placement):
    """Pre-LN: x <- x + F(LN(x)), plus a final LN after the last block.

    GPT-2 (Radford et al. 2019); Nguyen & Salazar 2019; analysed by Xiong et al. 2020.
    """

    formula = "x <- x + F(LN(x))"
    source = "GPT-2 (2019); Nguyen & Salazar 2019; Xiong et al. 2020"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch(self.norm(x))


@PLACEMENTS.register("sandwich")
class Sandwich(Placement):
    """Sandwich-LN / Peri-LN: x <- x + LN_out(F(LN_in(x))), final LN as Pre-LN.

    CogView (Ding et al. 2021); Gemma 2/3; Peri-LN (Kim et al. 2025) is the same block.
    """

    formula = "x <- x + LN_out(F(LN_in(x)))"
    source = "CogView (Ding et al. 2021); Gemma 2; Peri-LN (Kim et al. 2025)"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm_in, self.norm_out = site.norm(), site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm_out(self.branch(self.norm_in(x)))


@PLACEMENTS.register("pre_post")
class PrePost(Placement):
    """x <- LN_out(x + F(LN_in(x))): seed 002's "Sandwich-Norm", x-transformers' pre_and_post_norm.

    Distinct from CogView's Sandwich-LN: here the outer norm sits on the stream itself.
    """

    formula = "x <- LN_out(x + F(LN_in(x)))"
    source = "x-transformers pre_and_post_norm; seed 002 (mislabelled 'Sandwich-Norm')"
    final_norm = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm_in, self.norm_out = site.norm(), site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm_out(x + self.branch(self.norm_in(x)))


@PLACEMENTS.register("post_branch")
class PostBranch(Placement):
    """OLMo-2's reordered norm: x <- x + LN(F(x)); no norm on the branch input. Final LN on."""

    formula = "x <- x + LN(F(x))"
    source = "OLMo 2 (OLMo Team 2024), 'reordered norm'"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm(self.branch(x))


@PLACEMENTS.register("deepnorm")
class DeepNorm(Placement):
    """DeepNorm: x <- LN(alpha * x + F(x)); W_V, W_O, W_1, W_2 init scaled by beta.

    DeepNet (Wang et al. 2022), decoder-only with M = n_layer blocks:
    alpha = (2M)^(1/4), beta = (8M)^(-1/4). W_Q and W_K keep the base init.
    """

    formula = "x <- LN(alpha*x + F(x)), alpha=(2L)^(1/4), beta=(8L)^(-1/4)"
    source = "DeepNet (Wang et al. 2022)"
    final_norm = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()
        self.alpha = (2 * site.cfg.n_layer) ** 0.25
        self.beta = (8 * site.cfg.n_layer) ** -0.25

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.alpha * x + self.branch(x))

    @torch.no_grad()
    def init_(self) -> None:
        for name, p in self.branch.named_parameters():
            if name == "qkv.weight":
                p[2 * self.site.cfg.d_model:].mul_(self.beta)  # W_V only; W_Q, W_K untouched
            elif name in ("proj.weight", "fc.weight"):
                p.mul_(self.beta)                                 # W_O, W_1, W_2


@PLACEMENTS.register("lns")
class LayerNormScaling(Placement):
    """LayerNorm Scaling: x <- x + F(LN(x) / sqrt(l)), l the 1-based layer index. Final LN on.

    "The Curse of Depth in LLMs" (Sun et al. 2025).
    """

    formula = "x <- x + F(LN(x) / sqrt(l))"
    source = "LayerNorm Scaling, Sun et al. 2025 ('Curse of Depth')"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()
        self.scale = 1.0 / math.sqrt(site.layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch(self.norm(x) * self.scale)


@PLACEMENTS.register("none")
class NoNorm(Placement):
    """No norm: x <- x + F(x); with ``model.rezero`` x <- x + a * F(x), a = 0 at init (ReZero,
    Bachlechner et al. 2020). Without a gate the stream grows with depth and may overflow."""

    formula = "x <- x + F(x)  (rezero: x + a*F(x), a=0)"
    source = "baseline; ReZero (Bachlechner et al. 2020)"
    final_norm = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.gate = nn.Parameter(torch.zeros(())) if site.cfg.rezero else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.branch(x)
        return x + (self.gate * f if self.gate is not None else f)
