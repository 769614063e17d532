"""Parametrisations (``model.param``): how the init, the per-group Adam learning rates and three
forward multipliers (attention softmax, output logits, residual branch) scale with width, and
for CompleteP with depth, from a base model; one small class each (names: ``catalogue.py``;
formulas, sources and what each reference does differently: docs/parametrisation.md).

m_w = d_model / model.base_width, m_d = n_layer / model.base_depth. Every rule is relative to the
base model, so at m_w = m_d = 1 muP and CompleteP draw the weights sp draws and give every group
optim.lr; what still differs there is the softmax scale (1/d_head, as both references) and
CompleteP's Adam epsilon.

The model reads its parametrisation through the resolved plan (``build.ResolvedModel.param``):
the softmax scale and the logit multiplier (``TransformerLM``), the branch multiplier at each
placement's residual add (``Site.branch_mult``, ``Placement.residual_add``), the init
(``init.init_weights`` calls ``rescale`` after the scheme's draws: no extra random draw, so a
meta build still materialises bit for bit) and the optimiser's groups (``train/optim.py`` reads
``rule`` of each parameter's role).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from normlab.core.errors import NO_VALUE, ConfigError
from normlab.core.schema import Section, doc
from normlab.model.config import ModelConfig


@dataclass
class ParamOptions(Section):
    """A parametrisation's options: none. One with options subclasses this (as its nested
    ``Options``), spelt ``model.param = {name = "completep", alpha = 0.5}``."""


@dataclass(frozen=True)
class GroupRule:
    """Factors on one parameter group's AdamW settings: optim.lr, optim.weight_decay, optim.eps."""

    lr: float = 1.0
    weight_decay: float = 1.0
    eps: float = 1.0


def roles(model: nn.Module) -> dict[str, str]:
    """Each trainable parameter's role, by name:

    hidden  the weight of every nn.Linear but the head ``lm_head``: fan-in and fan-out grow with
            width (muP's "matrix-like" weights)
    input   an embedding table (the tied head is one)
    block   any other parameter inside a block: biases, norm gains, learned scalars ("vector-like")
    output  the rest: an untied head, the final norm, a stream's own parameters
    """
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    hidden = {id(m.weight) for name, m in model.named_modules()
              if isinstance(m, nn.Linear) and name.rpartition(".")[2] != "lm_head"}
    out = {}
    for name, p in model.named_parameters():  # a tied tensor once, under its first name (wte)
        if id(p) in embeddings:
            out[name] = "input"
        elif id(p) in hidden:
            out[name] = "hidden"
        else:
            out[name] = "block" if name.startswith("blocks.") else "output"
    return out


def _mul(t: torch.Tensor, factor: float) -> None:
    # A factor of 1 up to rounding ((1/sqrt(32)) / (1/sqrt(128)) / 2 is 1 + 2e-16) leaves the
    # draw's bits alone: muP at its base width is sp, and xavier's already-1/fan-in draws stay.
    if not math.isclose(factor, 1.0, rel_tol=1e-12):
        t.mul_(factor)


class Parametrisation:
    """Base, and the rules every parametrisation shares (sp's: the model as the init scheme and
    the config say). Class attributes: ``formula``, ``source`` (one line each, shown by
    ``normlab params``), ``Options``, ``needs`` (the base fields it requires)."""

    formula: ClassVar[str] = ""
    source: ClassVar[str] = ""
    Options: ClassVar[type[ParamOptions]] = ParamOptions
    needs: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: ModelConfig, options: ParamOptions | None = None) -> None:
        self.cfg = cfg
        self.options: Any = options if options is not None else type(self).Options()

    def check(self, name: str) -> None:
        """Refuse a config without the base fields this parametrisation scales from."""
        for field in self.needs:
            if getattr(self.cfg, field) is None:
                example = {"base_width": self.cfg.d_model, "base_depth": self.cfg.n_layer}[field]
                raise ConfigError(f"model.{field}", NO_VALUE, f"model.param={name!r} scales from a base model; set it to "
                                                          f"the {field[5:]} the hyper-parameters were tuned at, "
                                                          f"e.g. model.{field}={example}")

    def refusal(self, placement: type) -> str | None:
        """Why this parametrisation cannot drive ``placement`` (a Placement class), or None."""
        return None

    @property
    def width_mult(self) -> float:
        return 1.0

    @property
    def depth_mult(self) -> float:
        return 1.0

    def attn_scale(self) -> float:
        """The factor on q.k before the softmax (model.attn_scale, when set, replaces it)."""
        return 1.0 / math.sqrt(self.cfg.head_dim)

    def output_mult(self) -> float:
        """The factor on the logits."""
        return 1.0

    def branch_mult(self) -> float:
        """The factor on every residual branch at its add."""
        return 1.0

    def embed_scale(self, scheme: Any) -> float:
        """The factor on the token embeddings (model.embed_scale, when set, replaces it)."""
        return float(scheme.embed_scale(self.cfg))

    def rescale(self, model: nn.Module, scheme: Any) -> None:
        """Rescale the weights ``scheme`` (an InitScheme) drew: nothing here."""

    def rule(self, role: str) -> GroupRule:
        """The AdamW factors of the parameters of ``role`` (see :func:`roles`)."""
        return GroupRule()


class SP(Parametrisation):
    formula = "as the init scheme and the config say: softmax 1/sqrt(d_head), one lr, no multipliers"
    source = "standard parametrisation (GPT-2, nanoGPT)"


class MuP(Parametrisation):
    """muP for Adam (Tensor Programs V, Table 3 with the 1/width output multiplier of mup's
    ``MuReadout``). Every tensor is drawn as the init scheme draws it for the base model and a
    hidden weight then by sqrt(base fan-in / fan-in) = 1/sqrt(m_w) more: variance ~ 1/fan-in
    from the base width (gpt2's 0.02 becomes 0.02/sqrt(m_w); xavier, already 1/fan-in, is
    left as it is); embeddings and the head keep the base model's std. A bias is scaled as
    its weight's draw without the 1/sqrt(m_w) (mup's ``rescale_linear_bias``). Adam: hidden
    weights lr/m_w and weight decay x m_w (torch's decoupled step decays by lr x wd, kept fixed
    as mup does); everything else optim.lr. Logits x 1/m_w, softmax scale 1/d_head. d_ff and
    the heads' width must grow with d_model (d_ff and d_head none), as m_w is d_model's.

    Unlike microsoft/mup: one m_w for every tensor (mup: each tensor's own shape against the
    base's); the init anchored at the base model (mup: the user's fan-in init, absolute); no
    readout zero init nor ``output_mult``; softmax 1/d_head (its example: sqrt(attn_mult)/d_head).
    Unlike EleutherAI/nanoGPT-mup's muP: GPT-2's 1/sqrt(2L) on W_O, W_2 kept (it drops it), Adam
    epsilon unscaled (it: / m_w), hidden weight decay x m_w (it: unscaled), embeddings never
    decayed (it decays them). docs/parametrisation.md has the full list."""

    formula = ("hidden W: std x 1/sqrt(m_w), lr / m_w, wd x m_w; logits x 1/m_w; softmax 1/d_head; "
               "embeddings, head, biases, gains as the base model")
    source = "muP, Tensor Programs V (Yang, Hu et al. 2022, arXiv 2203.03466); microsoft/mup"
    needs: ClassVar[tuple[str, ...]] = ("base_width",)

    def refusal(self, placement: type) -> str | None:
        fixed = getattr(placement, "fixed_scales", "")
        return f"{fixed}, which muP's init, lrs and multipliers would fight; use model.param=sp" if fixed else None

    @property
    def width_mult(self) -> float:
        return self.cfg.d_model / self.cfg.base_width  # type: ignore[operator]  # set: check() requires it

    def attn_scale(self) -> float:
        return 1.0 / self.cfg.head_dim

    def output_mult(self) -> float:
        return 1.0 / self.width_mult

    def base(self) -> ModelConfig:
        """The base model's config as the init scheme reads it (only d_model, and for
        CompleteP n_layer, changed; copied without validation: nothing is built from it)."""
        base = copy.copy(self.cfg)
        base.d_model = self.cfg.base_width  # type: ignore[assignment]  # set: check() requires it
        return base

    def embed_scale(self, scheme: Any) -> float:
        return float(scheme.embed_scale(self.base()))

    @torch.no_grad()
    def rescale(self, model: nn.Module, scheme: Any) -> None:
        cfg, base, m = self.cfg, self.base(), self.width_mult
        tables = {id(e.weight) for e in model.modules() if isinstance(e, nn.Embedding)}
        for name, mod in model.named_modules():
            if isinstance(mod, nn.Embedding):  # a tied head is this table: scaled once, as an embedding
                _mul(mod.weight, scheme.embed_std(base) / scheme.embed_std(cfg))
            elif isinstance(mod, nn.Linear) and id(mod.weight) not in tables:
                # the scheme's std for this layer in the base model: the fan-in divided by m_w
                at_base = nn.Linear(max(1, round(mod.in_features / m)), mod.out_features, bias=False, device="meta")
                at_base.residual = getattr(mod, "residual", False)  # type: ignore[assignment]  # GPT-2's flag
                ratio = scheme.linear_std(at_base, base) / scheme.linear_std(mod, cfg)
                head = name.rpartition(".")[2] == "lm_head"
                _mul(mod.weight, ratio if head else ratio / math.sqrt(m))
                if mod.bias is not None:
                    _mul(mod.bias, ratio)

    def rule(self, role: str) -> GroupRule:
        m = self.width_mult
        return GroupRule(lr=1.0 / m, weight_decay=m) if role == "hidden" else GroupRule()


class CompleteP(MuP):
    """CompleteP (alpha = 1) on muP's width rules: every residual branch times m_d^-alpha at its
    add; init variances without depth (a scheme's depth factor, GPT-2's 1/sqrt(2L) on W_O and
    W_2, taken at the base depth); Adam lr x m_d^(alpha-1) on the blocks' weights, biases and
    gains (1 at alpha = 1); Adam epsilon x 1/(m_w m_d^alpha) in the blocks and x 1/m_w on the
    embeddings, head and final norm (the paper's eq. 40, as EleutherAI's nanoGPT-mup).

    Unlike that code: the multiplier sits at each placement's residual add (it: in its one Pre-LN
    block), and placements that scale their own residual path with depth are refused; the init's
    depth factor is the scheme's at base_depth (it has none: 0.02/sqrt(m_w)); an untied head (it
    always ties) is an output parameter (optim.lr, epsilon / m_w)."""

    @dataclass
    class Options(ParamOptions):
        alpha: float = doc("the depth exponent: residual branches x (n_layer/base_depth)^-alpha (1: CompleteP; "
                           "0.5: the depth-muP of Yang et al. 2023 and Bordelon et al. 2023)", 1.0)

        def __post_init__(self) -> None:
            self.check(0.5 <= self.alpha <= 1.0, "alpha", "must be in [0.5, 1] (the paper's range), e.g. 1")

    formula = ("muP, and: branch x m_d^-alpha at each residual add; init without depth (at base_depth); "
               "block lr x m_d^(alpha-1); Adam eps x 1/m_w (x m_d^-alpha in blocks)")
    source = "CompleteP (Dey et al. 2025, arXiv 2505.01618); EleutherAI/nanoGPT-mup (completep)"
    needs = ("base_width", "base_depth")

    @property
    def depth_mult(self) -> float:
        return self.cfg.n_layer / self.cfg.base_depth  # type: ignore[operator]  # set: check() requires it

    def refusal(self, placement: type) -> str | None:
        own = getattr(placement, "depth_scaling", "")
        if own:
            return f"{own}, which CompleteP's branch multiplier m_d^-alpha would compound; use model.param=mup"
        forward = getattr(getattr(placement, "forward", None), "__code__", None)
        if forward is not None and "residual_add" not in forward.co_names:  # (a plugin's, say)
            return ("adds its branch without Placement.residual_add, so the branch multiplier m_d^-alpha would "
                    "never reach it; call self.residual_add(x, f) at the add, or use model.param=mup")
        return super().refusal(placement)

    def branch_mult(self) -> float:
        return float(self.depth_mult ** -self.options.alpha)

    def base(self) -> ModelConfig:
        base = super().base()
        base.n_layer = self.cfg.base_depth  # type: ignore[assignment]  # set: check() requires it
        return base

    def rule(self, role: str) -> GroupRule:
        a, mw, md = self.options.alpha, self.width_mult, self.depth_mult
        inner = 1.0 / (mw * md**a)  # epsilon of every parameter inside a block
        if role == "hidden":
            return GroupRule(lr=md ** (a - 1) / mw, weight_decay=mw, eps=inner)
        if role == "block":
            return GroupRule(lr=md ** (a - 1), eps=inner)
        return GroupRule(eps=1.0 / mw)
