"""``model.impl``: which code computes the architecture a ``ModelConfig`` describes.

"normlab" is the lab's ``TransformerLM``; "hf-gpt2" is transformers' ``GPT2LMHeadModel``
(``normlab.model.hf_baseline``), the lab Pre-LN's baseline: the same config, parameter count
and seeded initial weights, another implementation. Each entry is an :class:`Impl`, filled
into ``IMPLS`` by ``normlab.model.catalogue``. An entry names its builder and check as
"module:attribute", imported when first called: the model modules they live in import the
catalogue themselves, so this module (below them) must not import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from normlab.core.lazy import load_object
from normlab.model.config import ModelConfig


def _attr(path: str) -> Any:
    # By name: the implementations import the catalogue that lists them (transformer -> build ->
    # catalogue -> impls). Every such name stays in normlab.model (tests/architecture/test_no_string_imports).
    return load_object(path)


@dataclass(frozen=True)
class Impl:
    """One implementation. ``builder(cfg, plan)`` -> a module with the lab's forward contract
    (``logits, loss = model(idx, targets=None)``, ``after_step()``, ``calibrate(idx)``, ``cfg``),
    drawing its initial weights from the global RNG as the caller seeded it; ``checker(cfg)``
    raises a ConfigError naming why it cannot compute ``cfg`` (none: every config the lab
    resolves). ``lab_internals``: the module is a ``TransformerLM`` (its blocks, placements and
    weight names), which in-training diagnostics, batched training, probes and
    ``train.init_from`` read."""

    builder: str
    checker: str | None = None
    lab_internals: bool = True
    description: str = ""

    def build(self, cfg: ModelConfig, plan: Any = None) -> Any:
        """The module of ``cfg``; ``plan``: its resolution (``model.build.ResolvedModel``), passed on."""
        return _attr(self.builder)(cfg, plan)

    def check(self, cfg: ModelConfig) -> None:
        if self.checker is not None:
            _attr(self.checker)(cfg)


LAB = Impl("normlab.model.transformer:TransformerLM", description="the lab's TransformerLM")
HF_GPT2 = Impl("normlab.model.hf_baseline:HFGPT2", "normlab.model.hf_baseline:check", lab_internals=False,
               description="transformers' GPT2LMHeadModel, initialised with the lab model's seeded weights")
