"""The placements that keep one residual stream, one small class each (names: ``catalogue.py``;
formulas and sources in each class's ``formula``/``source``, and docs/placements.md).

Notation: x is the residual stream entering the sub-layer, F the branch (attention or
FFN, including its output dropout), LN the configured norm (``model.norm``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from normlab.core.schema import doc
from normlab.model.placement import Placement, PlacementOptions, Site


class Post(Placement):
    """Post-LN: the norm sits on the stream after each residual add; no final norm needed."""

    formula = "x <- LN(x + F(x))"
    source = "Vaswani et al. 2017 (original Transformer), BERT, GPT-1"
    final_norm = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.residual_add(x, self.branch(x)))


class Pre(Placement):
    """Pre-LN: the norm sits on the branch input, the stream is never normalised; a final
    norm after the last block (analysed by Xiong et al. 2020)."""

    formula = "x <- x + F(LN(x))"
    source = "GPT-2 (2019); Nguyen & Salazar 2019; Xiong et al. 2020"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.residual_add(x, self.branch(self.norm(x)))


class Sandwich(Placement):
    """Sandwich-LN / Peri-LN: Pre-LN plus a norm on the branch output; final norm as Pre-LN.
    Peri-LN (Kim et al. 2025) is the same block; its option ``embed_norm`` also normalises the
    embedding before block 1 (held by the first sub-layer, the one that receives it)."""

    @dataclass
    class Options(PlacementOptions):
        embed_norm: bool = doc("also normalise the embedding before block 1 (Peri-LN, Kim et al. 2025); "
                               "acts on the sub-layer that receives the embedding (block 1's attention)", False)

    formula = "x <- x + LN_out(F(LN_in(x)))  (embed_norm: x_0 <- LN_emb(x_0))"
    source = "CogView (Ding et al. 2021); Gemma 2; Peri-LN (Kim et al. 2025)"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm_in, self.norm_out = site.norm(), site.norm()
        self.embed_norm = site.norm() if self.options.embed_norm and site.index == 1 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        return self.residual_add(x, self.norm_out(self.branch(self.norm_in(x))))


class PrePost(Placement):
    """A norm on the branch input and another on the stream after the add. Distinct from
    CogView's Sandwich-LN: here the outer norm sits on the stream itself."""

    formula = "x <- LN_out(x + F(LN_in(x)))"
    source = "x-transformers pre_and_post_norm; seed 002 (mislabelled 'Sandwich-Norm')"
    final_norm = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm_in, self.norm_out = site.norm(), site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm_out(self.residual_add(x, self.branch(self.norm_in(x))))


class PostBranch(Placement):
    """OLMo-2's reordered norm: the norm on the branch output, none on its input; final norm on."""

    formula = "x <- x + LN(F(x))"
    source = "OLMo 2 (OLMo Team 2024), 'reordered norm'"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.residual_add(x, self.norm(self.branch(x)))


class DeepNorm(Placement):
    """DeepNorm: Post-LN with the shortcut up-weighted by alpha and W_V, W_O, W_1, W_2 drawn
    with gain beta; decoder-only constants with M = n_layer blocks. W_Q and W_K keep the
    base init.
    DeepNet draws these weights with gain beta on a depth-independent init (Xavier); beta is
    its depth scaling, so it replaces the init scheme's own (GPT-2's 1/sqrt(2L) on W_O and
    W_2) instead of compounding it: W_O, W_2 get beta times the scheme's non-residual std.
    """

    formula = "x <- LN(alpha*x + F(x)), alpha=(2L)^(1/4), beta=(8L)^(-1/4)"
    source = "DeepNet (Wang et al. 2022)"
    final_norm = False
    needs_full_kv = True  # scales W_V by row blocks of width d_model: one kv head per query head
    depth_scaling = "scales its shortcut by alpha = (2L)^(1/4) and W_V, W_O, W_1, W_2 by beta = (8L)^(-1/4)"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()
        self.alpha = (2 * site.cfg.n_layer) ** 0.25
        self.beta = (8 * site.cfg.n_layer) ** -0.25

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.alpha * x + self.branch(x))

    @torch.no_grad()
    def init_(self) -> None:
        cfg, scheme = self.site.cfg, self.site.init
        for name, m in self.branch.named_modules():
            if name == "qkv":
                m.weight[2 * cfg.q_width:].mul_(self.beta)  # W_V only (one kv head per query head); W_Q, W_K untouched
            elif name in ("proj", "fc"):                     # W_O or W_2; W_1
                plain = nn.Linear(m.in_features, m.out_features, bias=False, device="meta")
                undo = scheme.linear_std(plain, cfg) / scheme.linear_std(m, cfg)  # 1 unless residual
                m.weight.mul_(self.beta * undo)


class LayerNormScaling(Placement):
    """LayerNorm Scaling ("The Curse of Depth in LLMs"): Pre-LN with the branch input scaled
    down by the square root of the 1-based layer index l; final norm on."""

    formula = "x <- x + F(LN(x) / sqrt(l))"
    source = "LayerNorm Scaling, Sun et al. 2025 ('Curse of Depth')"
    depth_scaling = "scales each branch input by 1/sqrt(l), l the block's depth"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()
        self.scale = 1.0 / math.sqrt(site.layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.branch(self.norm(x) * self.scale)


class NoNorm(Placement):
    """No norm on the residual path. With option ``rezero`` each branch is gated by a learnable
    scalar a that starts at 0 (ReZero), so every block starts as the identity. Without a
    gate the stream grows with depth and may overflow."""

    @dataclass
    class Options(PlacementOptions):
        rezero: bool = doc("gate each branch by a zero-initialised learnable scalar (ReZero, "
                           "Bachlechner et al. 2020)", False)

    formula = "x <- x + F(x)  (rezero: x + a*F(x), a=0)"
    source = "baseline; ReZero (Bachlechner et al. 2020)"
    final_norm = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.gate = nn.Parameter(torch.empty(())) if self.options.rezero else None
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        if self.gate is not None:
            self.gate.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.branch(x)
        return self.residual_add(x, self.gate * f if self.gate is not None else f)


class LayerScale(Placement):
    """LayerScale: Pre-LN with the branch output scaled per channel by a learnable lambda;
    final norm on. lambda starts at 0.1 up to 18 layers, 1e-5 up to 24, 1e-6 beyond (CaiT)."""

    formula = "x <- x + lambda * F(LN(x)), lambda per channel, small at init"
    source = "LayerScale, CaiT (Touvron et al. 2021)"
    depth_scaling = "starts its branch scales lambda at 0.1, 1e-5 or 1e-6 by depth"

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()
        self.scale = nn.Parameter(torch.empty(site.cfg.d_model))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        L = self.site.cfg.n_layer
        self.scale.fill_(0.1 if L <= 18 else 1e-5 if L <= 24 else 1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.scale * self.branch(self.norm(x))


def admin_closed_form_omega(n_res: int) -> float:
    """admin-torch's O(log N) closed form: omega = sqrt((N+1)/ln(N+1) - 1), N residual sub-layers.

    ``admin_torch.admin.calculate_init(num_res_layers, 'O(logn)')`` (microsoft/admin-torch).
    """
    return math.sqrt((n_res + 1) / math.log(n_res + 1) - 1)


class Admin(Placement):
    """Admin ("Understanding the Difficulty of Training Transformers"): Post-LN with the
    shortcut rescaled by omega.

    Option ``omega``:
      profile      omega_i^2 = 1 + sum over earlier sub-layers j of Var[F_j], from one forward
                   pass at init on random tokens (``TransformerLM.calibrate(idx)`` re-profiles
                   on data). The authors' fairseq recurrence (Transformer-Clinic: global ratio
                   1.0, then ``ratio = sqrt(var(residual * ratio) + var(F))``) gives omega_1 = 1
                   and omega_{i+1} = sqrt(Var[omega_i x_i] + Var[F_i(x_i)]); every x_i with
                   i > 1 is a LayerNorm output (variance 1 at init), and the embedding x_1 has
                   variance ~1 in their setup. normlab counts the embedding at that unit
                   variance whatever its actual scale: under GPT-2's init (Var ~ 8e-4) the
                   literal recurrence would shrink every shortcut to omega ~ 0.03 and make
                   the model depend on its branches more than plain Post-LN, the opposite of
                   what Admin is for (docs/placements.md, "Admin's regime"). With the xavier
                   init (unit-variance embedding) this is exactly the authors' recurrence.
                   Variances are over all elements (ddof 0), as the authors' np.var.
      closed_form  omega = sqrt((N+1)/ln(N+1) - 1), N = 2L (admin-torch, O(log N) output change).
    omega is a persistent buffer, so checkpoints carry the profiled value.
    """

    @dataclass
    class Options(PlacementOptions):
        omega: str = doc("how omega is set: 'profile' (one forward pass at init) or 'closed_form' "
                         "(admin-torch's O(log N) formula)", "profile")

        def __post_init__(self) -> None:
            self.check(self.omega in ("profile", "closed_form"), "omega", "use 'profile' or 'closed_form'")

    formula = "x <- LN(omega*x + F(x)), omega^2 = 1 + sum_{j<i} Var[F_j] (profiled) or closed form"
    source = "Admin (Liu et al. 2020); admin-torch closed form"
    final_norm = False
    depth_scaling = "rescales its shortcut by omega, which grows with the sub-layers below it"
    # omega > 1 amplifies the shortcut; only the LN after each sub-layer brings it back.
    needs_norm = True
    omega: torch.Tensor  # a buffer, declared for type checkers

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__(branch, site)
        self.norm = site.norm()
        self.register_buffer("omega", torch.empty(()))
        self.reset_parameters()
        self._profile: dict[str, float] | None = None  # shared running state during calibrate

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """omega before calibration: the closed form, or 1 until ``calibrate`` profiles it."""
        closed = self.options.omega == "closed_form"
        self.omega.fill_(admin_closed_form_omega(2 * self.site.cfg.n_layer) if closed else 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.branch(x)
        if self._profile is not None:
            self.omega.fill_(self._profile["omega"])
            acc = torch.promote_types(x.dtype, torch.float32)  # at least fp32 for the statistics
            # The first sub-layer's input is the embedding: counted at unit variance (see above).
            first = self._profile.pop("first", False)
            shortcut = self.omega**2 if first else (self.omega * x).to(acc).var(unbiased=False)
            var = shortcut + f.to(acc).var(unbiased=False)
            self._profile["omega"] = math.sqrt(float(var))
        return self.norm(self.omega * x + f)

    @classmethod
    def calibrate(cls, model: nn.Module, idx: torch.Tensor) -> None:
        mods = [m for m in model.modules() if isinstance(m, cls) and m.options.omega == "profile"]
        if not mods:
            return
        state = {"omega": 1.0, "first": True}  # omega of the first Admin sub-layer (Transformer-Clinic)
        for m in mods:
            m._profile = state
        try:
            model(idx)  # sub-layers run bottom-up, each reading and advancing the state
        finally:
            for m in mods:
                m._profile = None

    def extra_repr(self) -> str:
        return f"omega={float(self.omega):.4f}"

