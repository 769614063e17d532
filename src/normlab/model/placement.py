"""The placement interface: where a sub-layer's norms sit relative to its residual.

A placement wraps one branch F (attention or FFN) together with the norms it needs and
maps the residual state to the new state: ``h <- placement(h)``. ``Block`` calls two of
them and never looks at their names. Concrete placements live in ``placements.py`` and
``streams.py``; their names are given in ``catalogue.py``.

A placement with a parameter declares it in a nested ``Options`` dataclass (a
``PlacementOptions``), which validates itself; configs spell the options beside the name,
``placement = {name = "admin", omega = "closed_form"}``, and the instance reads them as
``self.options``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from normlab.core.schema import Section
from normlab.model.config import ModelConfig
from normlab.model.norms import LayerNorm


@dataclass
class PlacementOptions(Section):
    """The options of a placement: none. Placements with options subclass this (as their
    nested ``Options``) with ``doc(...)`` fields and range checks in ``__post_init__``;
    errors name the field as ``model.placement.<option>``."""


@dataclass(frozen=True)
class Site:
    """Where a sub-layer sits (its config, 1-based block ``layer``, ``kind``, global ``index``)
    and what the model builder resolved for it: the norm ``model.norm`` names, the init
    scheme ``model.init`` names and this placement's validated options."""

    cfg: ModelConfig
    layer: int   # 1..n_layer
    kind: str    # "attn", "ffn" (or "final" for the norm after the last block)
    index: int   # 1..2*n_layer, counting sub-layers bottom-up (k in ResiDual)
    make_norm: Callable[[int, float, bool], nn.Module] = LayerNorm  # (d, eps, bias) -> module
    init: Any = None                  # the InitScheme (model/init.py)
    options: PlacementOptions | None = None
    param: Any = None                 # the Parametrisation (model/param.py); None: sp

    @property
    def branch_mult(self) -> float:
        """The parametrisation's factor on the branch at the residual add (CompleteP's m_d^-alpha; else 1)."""
        return float(self.param.branch_mult()) if self.param is not None else 1.0

    @property
    def attn_scale(self) -> float:
        """The parametrisation's softmax scale: 1/sqrt(d_head) (sp), 1/d_head (muP, CompleteP)."""
        return float(self.param.attn_scale()) if self.param is not None else 1.0 / math.sqrt(self.cfg.head_dim)

    def norm(self) -> nn.Module:
        """A fresh instance of the configured norm (``model.norm``) over d_model."""
        c = self.cfg
        return self.make_norm(c.d_model, c.norm_eps, c.bias)


class Stream(nn.Module):
    """How the residual state starts from the embedding and ends before the output head.

    The default is the identity at both ends. Placements that need model-level changes
    return their own stream from ``make_stream``: ResiDual carries two streams (x, d);
    nGPT normalises the embedding, scales the logits and keeps the embedding matrices on
    the unit sphere. ``TransformerLM`` calls these hooks and never looks at names:

      begin(x0) -> h            embedding (B, T, d) -> residual state entering block 1
      end(h) -> x               residual state after the last block -> (B, T, d), before final norm
      logits(z) -> z            (B, T, V) output of the head, e.g. a learned logit scale
      init_(model)              after every weight is initialised
      after_step(model)         after every optimizer step
    """

    def begin(self, x: torch.Tensor) -> Any:
        return x

    def end(self, h: Any) -> torch.Tensor:
        return h

    def logits(self, z: torch.Tensor) -> torch.Tensor:
        return z

    def init_(self, model: nn.Module) -> None:
        """Adjust model-level tensors (embeddings, head) after ``init_weights``."""

    def after_step(self, model: nn.Module) -> None:
        """Called by ``TransformerLM.after_step`` after each optimizer step."""


class Placement(nn.Module):
    """Base class: subclasses set ``formula``/``source`` and implement ``forward``.

    Class attributes (the formula and source are stated here once, not in the docstring):
      formula        one line, shown by ``normlab placements``
      source         paper or model that introduced it
      Options        its options dataclass (``PlacementOptions``: none)
      final_norm     default of ``model.final_norm`` when this is the last sub-layer
      needs_norm     True if the placement cannot work with ``model.norm="none"`` (refused)
      needs_full_kv  True if it rewrites W_Q/W_K/W_V per query head, so it cannot take
                     grouped-query attention (``model.n_kv_head`` < ``n_head``; refused)
      sets_qk_norm   True if it installs its own q/k(/v) norms, so ``model.qk_norm`` would be
                     silently replaced (refused)
      depth_scaling  what it scales with depth itself (shortcut, branch, branch init), one line:
                     CompleteP's branch multiplier would compound it (refused with completep)
      fixed_scales   what it fixes of the weights' and activations' scales itself, one line:
                     refused with every parametrisation but sp

    The residual add is ``residual_add(x, f)``: x + m f with the parametrisation's branch
    multiplier m (``Site.branch_mult``, CompleteP's; the plain x + f when m = 1), as DeepNorm
    applies its alpha in its own formula. A placement without depth_scaling calls it at its add.

    Placements that override ``make_stream`` own the residual stream and cannot be mixed
    with placements that do not (``build.resolve_model`` refuses it). Placements whose
    state depends on the whole model (Admin's profiled omega) override ``calibrate``.
    """

    formula: ClassVar[str] = ""
    source: ClassVar[str] = ""
    Options: ClassVar[type[PlacementOptions]] = PlacementOptions
    final_norm: ClassVar[bool] = True
    needs_norm: ClassVar[bool] = False
    needs_full_kv: ClassVar[bool] = False
    sets_qk_norm: ClassVar[bool] = False
    depth_scaling: ClassVar[str] = ""
    fixed_scales: ClassVar[str] = ""

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__()
        self.branch = branch
        self.site = site
        self.options: Any = site.options if site.options is not None else type(self).Options()
        self.branch_mult = site.branch_mult

    def residual_add(self, x: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        """x + m f, m the parametrisation's branch multiplier; at m = 1 the very x + f (no multiply)."""
        return x + f if self.branch_mult == 1.0 else x + self.branch_mult * f

    @classmethod
    def make_stream(cls, cfg: ModelConfig, make_norm: Callable[[int, float, bool], nn.Module]) -> Stream:
        """The residual stream this placement needs (``make_norm``: the configured norm)."""
        return Stream()

    @classmethod
    def owns_stream(cls) -> bool:
        """True if it brings its own residual stream (it then cannot be mixed with others)."""
        return cls.make_stream.__func__ is not Placement.make_stream.__func__  # type: ignore[attr-defined]

    @classmethod
    def calibrate(cls, model: nn.Module, idx: torch.Tensor) -> None:
        """Set data-dependent constants of this class's modules in ``model`` from tokens ``idx``.

        Called once at init on random tokens and by ``TransformerLM.calibrate(idx)``.
        """

    def init_(self) -> None:
        """Placement-specific init, applied after the base init (DeepNorm beta, ReZero 0, ...)."""

    @torch.no_grad()
    def after_step(self) -> None:
        """Called by the training loop after each optimizer step (nGPT re-normalises here)."""

    def extra_repr(self) -> str:
        return self.formula

