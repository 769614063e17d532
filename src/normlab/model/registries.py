"""The model's registries, empty: name -> placement class, layout, norm, qk-norm, init, FFN,
FFN activation, implementation, parametrisation.

A leaf module: it imports nothing of ``normlab.model``, so any component may name a
registry without pulling in the others. ``normlab.model.catalogue`` fills them with the
built-in components, each on one line, and each registry imports it at its first lookup
(as every registry of the package is filled: ``core/registry.py``). To add your own component from outside the package:

    from normlab.model.catalogue import PLACEMENTS
    PLACEMENTS.add("my_norm", MyNorm)
"""

from __future__ import annotations

from typing import Any

from normlab.core.registry import Registry

PLACEMENTS: Registry[Any] = Registry("placement", "model.placement", catalogue="normlab.model.catalogue")   # Placement subclasses
LAYOUTS: Registry[Any] = Registry("layout", "model.placement", catalogue="normlab.model.catalogue")         # layout macros (Mix-LN)
NORMS: Registry[Any] = Registry("norm", "model.norm", catalogue="normlab.model.catalogue")                  # (d, eps, bias) -> module
QK_NORMS: Registry[Any] = Registry("qk norm", "model.qk_norm", catalogue="normlab.model.catalogue")
INITS: Registry[Any] = Registry("init", "model.init", catalogue="normlab.model.catalogue")                  # InitScheme instances
FFNS: Registry[Any] = Registry("ffn", "model.ffn", catalogue="normlab.model.catalogue")                     # (cfg) -> FFN module
ACTIVATIONS: Registry[Any] = Registry("activation", "model.activation", catalogue="normlab.model.catalogue")  # tensor -> tensor
IMPLS: Registry[Any] = Registry("implementation", "model.impl", catalogue="normlab.model.catalogue")     # Impl: who computes the model
PARAMS: Registry[Any] = Registry("parametrisation", "model.param", catalogue="normlab.model.catalogue")  # Parametrisation classes
