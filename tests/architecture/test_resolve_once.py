"""A training run resolves its model config once (item "resolve_model once per run"): the
checks, the step budget's meta-device model, the build and ``TransformerLM`` all use the
ResolvedModel that ``prepare`` made. Counted at ``build._layout``, which only ``resolve_model`` calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.model import build
from normlab.run.resolve import resolve
from normlab.train import run_training


@pytest.fixture
def layouts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = build._layout

    def counted(cfg):  # type: ignore[no-untyped-def]
        calls.append(cfg.n_layer)
        return real(cfg)

    monkeypatch.setattr(build, "_layout", counted)
    return calls


def test_a_run_resolves_its_model_once(layouts: list[int], tmp_path: Path) -> None:
    cfg = resolve("smoke", overrides=["train.steps=2", "train.eval_every=2", "model.n_layer=1",
                                      "train.diag_every=1"])
    assert run_training(cfg, tmp_path / "run", quiet=True)["status"] == "completed"
    assert layouts == [1]


def test_the_counter_sees_a_resolution(layouts: list[int]) -> None:
    """Without a plan, building resolves: the count above is not vacuous."""
    build.build_model(resolve("smoke", overrides=["model.n_layer=2"]).model)
    assert layouts == [2]
