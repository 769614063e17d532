"""The step budget's costs of a deep stack: extrapolated from shallow builds, equal to the whole
build's, and never a build of every block (20000 blocks took a minute even on the meta device)."""

from __future__ import annotations

import pytest

from normlab.model import cost
from normlab.model.config import ModelConfig
from normlab.run.config import RunConfig
from normlab.run.train_config import TrainConfig
from normlab.train import budget


def _whole(cfg: RunConfig, monkeypatch: pytest.MonkeyPatch) -> budget.StepEstimate:
    with monkeypatch.context() as m:
        m.setattr(budget, "EXTRAPOLATE_ABOVE", 10**9)
        return budget.estimate(cfg.model, cfg.train)


@pytest.mark.parametrize("placement", ["post", "pre", "deepnorm", "resi_dual", "mix", "admin", "ngpt", "hybridnorm"])
def test_a_deep_stack_costs_what_its_whole_build_costs(placement: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = RunConfig(model=ModelConfig(n_layer=97, placement=placement, d_model=64, n_head=2))
    got, want = budget.estimate(cfg.model, cfg.train), _whole(cfg, monkeypatch)
    assert got.bytes == pytest.approx(want.bytes, rel=1e-12) and got.flops == pytest.approx(want.flops, rel=1e-12)


def test_twenty_thousand_blocks_are_never_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    real = cost.meta_model

    def spy(what, plan=None):
        if isinstance(what, ModelConfig):
            built.append(what.n_layer)
        return real(what, plan)

    monkeypatch.setattr(cost, "meta_model", spy)
    est = budget.estimate(ModelConfig(n_layer=20000), TrainConfig())
    assert built and max(built) <= budget.EXTRAPOLATE_ABOVE, built
    # 20000 blocks of the default width: 12 d^2 weights a block (d = 128) at 16 bytes each, at least
    assert est.bytes > 20000 * 12 * 128**2 * 16


def test_a_per_layer_placement_list_is_built_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    real = cost.meta_model
    monkeypatch.setattr(cost, "meta_model", lambda what, plan=None: (
        built.append(what.n_layer) if isinstance(what, ModelConfig) else None) or real(what, plan))
    budget.estimate(ModelConfig(n_layer=66, placement=["post"] * 6 + ["pre"] * 60), TrainConfig())
    assert built == [66]
