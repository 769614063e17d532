"""normlab: a laboratory for normalization placement in Transformers.

Public names are imported lazily so that ``import normlab`` (and ``normlab --help``)
stays fast and free of side effects.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "ModelConfig": "normlab.model.config",
    "TransformerLM": "normlab.model.transformer",
    "RunConfig": "normlab.config",
    "DataConfig": "normlab.data.config",
    "OptimConfig": "normlab.train.config",
    "TrainConfig": "normlab.train.config",
    "UserError": "normlab.errors",
    "ConfigError": "normlab.errors",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'normlab' has no attribute {name!r}")


__all__ = ["__version__", *_LAZY]
