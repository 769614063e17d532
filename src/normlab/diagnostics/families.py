"""The checkpoint families ``normlab inspect`` knows, in the lab's terms (placement, norm).

Detection is by ``config.model_type`` (the field every transformers config carries); an
unknown type fails in one line listing the known ones. ``importable`` says whether
``normlab.model.interop.from_hf`` can rebuild the model as a ``TransformerLM`` exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from normlab.core.errors import UserError


@dataclass(frozen=True)
class Family:
    """One architecture family as the lab describes it."""

    name: str                 # e.g. "Llama"
    placement: str            # a name of `normlab placements`
    norm: str                 # a name of `normlab norms`
    notes: str = ""           # what else matters for normalization (QK-norm, parallel residual, ...)
    causal: bool = True       # False: bidirectional encoder, measured with a masked-LM loss
    importable: bool = False  # True: from_hf gives a TransformerLM with equal logits

    def describe(self) -> str:
        """One line: 'Llama: placement pre, norm rmsnorm (importable)'."""
        extra = f"; {self.notes}" if self.notes else ""
        kind = "importable into TransformerLM" if self.importable else "inspect-only"
        return f"{self.name}: placement {self.placement}, norm {self.norm}{extra} ({kind})"


FAMILIES: dict[str, Family] = {
    "gpt2": Family("GPT-2", "pre", "layernorm", importable=True),
    "gpt_neox": Family("GPT-NeoX/Pythia", "pre", "layernorm", "parallel residual (attention and FFN read the "
                       "same normalised x)"),
    "llama": Family("Llama", "pre", "rmsnorm", "RoPE, SwiGLU, grouped-query attention", importable=True),
    "mistral": Family("Mistral", "pre", "rmsnorm", "RoPE, SwiGLU, grouped-query attention, sliding window",
                      importable=True),
    "qwen2": Family("Qwen2", "pre", "rmsnorm", "RoPE, SwiGLU, grouped-query attention, q/k/v biases"),
    "qwen3": Family("Qwen3", "pre", "rmsnorm", "QK-norm (RMSNorm per head), grouped-query attention",
                    importable=True),
    "gemma2": Family("Gemma 2", "sandwich", "rmsnorm_1p", "embedding x sqrt(d), attention and output logit "
                     "soft-capping, sliding-window layers", importable=True),
    "gemma3_text": Family("Gemma 3", "sandwich", "rmsnorm_1p", "QK-norm (RMSNorm per head), sliding-window "
                          "layers with their own RoPE base", importable=True),
    "olmo2": Family("OLMo-2", "post_branch", "rmsnorm", "QK-norm (RMSNorm over the full q and k)",
                    importable=True),
    "olmo3": Family("OLMo-3", "post_branch", "rmsnorm", "QK-norm (RMSNorm over the full q and k), "
                    "sliding-window layers", importable=True),
    "bert": Family("BERT", "post", "layernorm", "bidirectional", causal=False),
    "roberta": Family("RoBERTa", "post", "layernorm", "bidirectional", causal=False),
}


def known() -> str:
    """'gpt2 (GPT-2), gpt_neox (GPT-NeoX/Pythia), ...' for error messages."""
    return ", ".join(f"{k} ({f.name})" for k, f in FAMILIES.items())


def family_of(hf_config: Any, source: str) -> Family:
    """The Family of a transformers config, refined by options that change the computation."""
    kind = getattr(hf_config, "model_type", None)
    fam = FAMILIES.get(kind) if isinstance(kind, str) else None
    if fam is None:
        raise UserError(f"{source}: unknown architecture model_type={kind!r}; known: {known()}")
    if kind == "gpt_neox" and not getattr(hf_config, "use_parallel_residual", True):
        fam = Family(fam.name, fam.placement, fam.norm, "sequential residual")
    return fam
