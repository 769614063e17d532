"""The model: configs, norms, placements, attention, init, the Transformer LM."""

from normlab.model.config import ModelConfig
from normlab.model.transformer import Block, TransformerLM

__all__ = ["ModelConfig", "TransformerLM", "Block"]
