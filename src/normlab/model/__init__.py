"""The model: configs, norms, placements, attention, init, the Transformer LM.

Names load lazily, so ``ModelConfig`` (plain data) never pulls in torch. The layout:
``registries`` (empty, a leaf) <- components (``norms``, ``attention``, ``init``,
``placement``/``placements``/``streams``, ``layout``) <- ``catalogue`` (fills the
registries) <- ``build`` (resolves a config's names) <- ``transformer``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from normlab.core.lazy import lazy_dir, lazy_getattr

if TYPE_CHECKING:  # for type checkers only: the lazy loading below imports them
    from normlab.model.config import ModelConfig
    from normlab.model.transformer import Block, TransformerLM

_LAZY = {"ModelConfig": "normlab.model.config", "TransformerLM": "normlab.model.transformer",
         "Block": "normlab.model.transformer"}

__getattr__ = lazy_getattr("normlab.model", _LAZY)
__dir__ = lazy_dir(globals(), _LAZY)

__all__ = ["Block", "ModelConfig", "TransformerLM"]
