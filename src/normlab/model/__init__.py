"""The model: configs, norms, placements, attention, init, the Transformer LM.

Names load lazily, so ``ModelConfig`` (plain data) never pulls in torch. The layout:
``registries`` (empty, a leaf) <- components (``norms``, ``attention``, ``init``,
``placement``/``placements``/``streams``, ``layout``) <- ``catalogue`` (fills the
registries) <- ``build`` (resolves a config's names) <- ``transformer``.
"""

from normlab.core.lazy import lazy_getattr

_LAZY = {"ModelConfig": "normlab.model.config", "TransformerLM": "normlab.model.transformer",
         "Block": "normlab.model.transformer"}

__getattr__ = lazy_getattr("normlab.model", _LAZY)

__all__ = list(_LAZY)
