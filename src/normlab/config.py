"""RunConfig: everything one training run needs, loadable from TOML and ``--set`` overrides.

Resolution order (later wins): dataclass defaults < preset < TOML file < ``--placement``
< ``--set key=value`` overrides. The result is validated as a whole and can be dumped to
JSON and read back to an equal object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from normlab.data.config import DataConfig
from normlab.errors import ConfigError, UserError
from normlab.model.config import ModelConfig
from normlab.schema import Section, apply_overrides, doc, from_dict, merge, to_dict
from normlab.train.config import OptimConfig, TrainConfig


@dataclass
class RunConfig(Section):
    """One training run: model, data, optimiser, loop, and the seed."""

    model: ModelConfig = doc("the network", default_factory=ModelConfig)
    data: DataConfig = doc("corpus and tokenizer", default_factory=DataConfig)
    optim: OptimConfig = doc("optimiser and lr schedule", default_factory=OptimConfig)
    train: TrainConfig = doc("training loop", default_factory=TrainConfig)
    seed: int = doc("seed of weights, batches and dropout", 1337)
    name: str = doc("free-form label carried into reports", "")

    def __post_init__(self) -> None:
        self.check(self.seed >= 0, "seed", "must be >= 0")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        return from_dict(cls, data)

    def to_json(self) -> str:
        return json.dumps(to_dict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RunConfig":
        return from_dict(cls, json.loads(text))


def load_toml(path: str | Path, label: str = "--config") -> dict[str, Any]:
    """Read a TOML file into plain data (validated later, as a whole); errors start with
    ``label`` (the option or kind of file) and the path."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise UserError(f"{label} {p}: no such file") from None
    except UnicodeDecodeError as e:  # tomllib decodes bytes itself and lets this through
        raise UserError(f"{label} {p}: not UTF-8 text (byte {e.start}); TOML files must be UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{label} {p}: not valid TOML ({e})") from None


def resolve(preset: str | None = None, config: str | Path | None = None,
            placement: str | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Build the RunConfig a command line asks for (see the module docstring for the order)."""
    from normlab.presets import PRESETS

    data = to_dict(PRESETS.get(preset, "--preset")()) if preset else {}
    if config:
        data = merge(data, load_toml(config))
    if placement:
        data = merge(data, {"model": {"placement": placement}})
    data = apply_overrides(RunConfig, data, list(overrides or []))
    return RunConfig.from_dict(data)


__all__ = ["RunConfig", "ModelConfig", "DataConfig", "OptimConfig", "TrainConfig",
           "ConfigError", "resolve", "load_toml"]
