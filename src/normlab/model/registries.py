"""The model's registries, empty: name -> placement class, layout, norm, qk-norm, init, FFN,
implementation.

A leaf module: it imports nothing of ``normlab.model``, so any component may name a
registry without pulling in the others. ``normlab.model.catalogue`` fills them with the
built-in components, each on one line; the code that builds a model (``model/build.py``)
reads them through the catalogue. To add your own component from outside the package:

    from normlab.model.catalogue import PLACEMENTS
    PLACEMENTS.add("my_norm", MyNorm)
"""

from __future__ import annotations

from typing import Any

from normlab.core.registry import Registry

PLACEMENTS: Registry[Any] = Registry("placement", "model.placement")   # Placement subclasses
LAYOUTS: Registry[Any] = Registry("layout", "model.placement")         # layout macros (Mix-LN)
NORMS: Registry[Any] = Registry("norm", "model.norm")                  # (d, eps, bias) -> module
QK_NORMS: Registry[Any] = Registry("qk norm", "model.qk_norm")
INITS: Registry[Any] = Registry("init", "model.init")                  # InitScheme instances
FFNS: Registry[Any] = Registry("ffn", "model.ffn")                     # (cfg) -> FFN module
IMPLS: Registry[Any] = Registry("implementation", "model.impl")     # Impl: who computes the model
