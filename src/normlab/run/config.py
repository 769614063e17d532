"""RunConfig: everything one training run needs (the sections model, data, optim, train and
the seed). Building one from a command line is ``normlab.run.resolve.resolve``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from normlab.core.schema import Section, doc, from_dict, to_dict
from normlab.data.config import DataConfig
from normlab.model.config import ModelConfig
from normlab.run.train_config import OptimConfig, TrainConfig


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
        """A stored config (a run's config.json, a study trial), written by this or an older
        normlab: options that have moved since are read in their new place. Logger names are
        never looked up by a config (only training needs them, and checks them: ``train.plan``),
        so a finished run stays readable after its logger plugin is uninstalled."""
        return cls.from_stored(json.loads(text))

    @classmethod
    def from_stored(cls, data: Any) -> "RunConfig":
        """``from_json`` of the parsed document (``RunDir.config`` reads the file and its damage)."""
        if isinstance(data, dict) and isinstance(data.get("model"), dict):
            data = {**data, "model": ModelConfig.upgrade(data["model"])}
        return from_dict(cls, data)
