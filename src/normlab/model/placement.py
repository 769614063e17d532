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
    """How the residual state starts from the embedding and ends before the final norm.

    One stream (the default) is the identity at both ends; two-stream placements
    (ResiDual) override it.
    """

    def begin(self, x: torch.Tensor) -> Any:
        return x

    def end(self, h: Any) -> torch.Tensor:
        return h


class Placement(nn.Module):
    """Base class: subclasses set ``formula``/``source`` and implement ``forward``.

    Class attributes:
      formula      one line, shown by ``normlab placements``
      source       paper or model that introduced it
      final_norm   default of ``model.final_norm`` when this is the last sub-layer
      streams      1, or 2 for two-stream placements that cannot mix with others
    """

    formula: ClassVar[str] = ""
    source: ClassVar[str] = ""
    final_norm: ClassVar[bool] = True
    streams: ClassVar[int] = 1

    def __init__(self, branch: nn.Module, site: Site) -> None:
        super().__init__()
        self.branch = branch
        self.site = site

    @classmethod
    def make_stream(cls, cfg: ModelConfig) -> Stream:
        return Stream()

    def init_(self) -> None:
        """Placement-specific init, applied after the base init (DeepNorm beta, ReZero 0, ...)."""

    @torch.no_grad()
    def after_step(self) -> None:
        """Called by the training loop after each optimizer step (nGPT re-normalises here)."""

    def extra_repr(self) -> str:
        return self.formula


PLACEMENTS: Registry[type[Placement]] = Registry("placement", "model.placement")
