"""The placement interface: where a sub-layer's norms sit relative to its residual.

A placement wraps one branch F (attention or FFN) together with the norms it needs and
maps the residual state to the new state: ``h <- placement(h)``. ``Block`` calls two of
them and never looks at their names. Concrete placements live in ``placements.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from normlab.model.config import ModelConfig
from normlab.model.norms import NORMS
from normlab.registry import Registry


@dataclass(frozen=True)
class Site:
    """Where a sub-layer sits: its config, 1-based block ``layer``, ``kind`` and global ``index``."""

    cfg: ModelConfig
    layer: int   # 1..n_layer
    kind: str    # "attn" or "ffn"
    index: int   # 1..2*n_layer, counting sub-layers bottom-up (k in ResiDual)

    def norm(self) -> nn.Module:
        """A fresh instance of the configured norm (``model.norm``) over d_model."""
        c = self.cfg
        return NORMS.get(c.norm)(c.d_model, c.norm_eps, c.bias)


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

    Class attributes:
      formula      one line, shown by ``normlab placements``
      source       paper or model that introduced it
      final_norm   default of ``model.final_norm`` when this is the last sub-layer
      needs_norm   True if the placement cannot work with ``model.norm="none"`` (refused)

    Placements that override ``make_stream`` own the residual stream and cannot be mixed
    with placements that do not (``layout.resolve_layout`` refuses it). Placements whose
    state depends on the whole model (Admin's profiled omega) override ``calibrate``.
    """

    formula: ClassVar[str] = ""
    source: ClassVar[str] = ""
    final_norm: ClassVar[bool] = True
    needs_norm: ClassVar[bool] = False

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__()
        self.branch = branch
        self.site = site

    @classmethod
    def make_stream(cls, cfg: ModelConfig) -> Stream:
        return Stream()

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


PLACEMENTS: Registry[type[Placement]] = Registry("placement", "model.placement")
