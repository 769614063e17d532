"""NaN/inf injected at step k: the run ends ``diverged`` at k, and with diagnostics on,
summary.json names where the first non-finite value appeared (forward layer or gradient)."""

from __future__ import annotations

import json

import pytest
import torch

from normlab.train import run_training
from normlab.train.loop import Trainer

from .conftest import tiny_cfg

K = 13  # 1-based optimizer step that goes bad (between checkpoints 10 and 20, not a log step)


@pytest.fixture
def at_step(monkeypatch):
    """``at_step.s`` = the 0-based step whose batches the Trainer is computing (replays included)."""
    state = type("S", (), {"s": -1})()
    real = Trainer._batch

    def spy(self, s, m):
        state.s = s
        return real(self, s, m)

    monkeypatch.setattr(Trainer, "_batch", spy)
    return state


def _inject_activation(monkeypatch, at_step, layer: int, kind: str, bad_step: int = K) -> None:
    """A forward hook on block ``layer``'s ``kind`` branch returning inf during training step k."""
    real_init = Trainer.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        branch = getattr(self.model.blocks[layer], kind).branch

        def hook(_m, _args, out):
            if torch.is_grad_enabled() and at_step.s == bad_step - 1:
                return out * float("inf")  # (B, T, d) all +-inf / nan
            return None

        branch.register_forward_hook(hook)

    monkeypatch.setattr(Trainer, "__init__", init)


def _inject_gradient(monkeypatch, at_step, param: str) -> None:
    real_init = Trainer.__init__

    def init(self, *a, **k):
        real_init(self, *a, **k)
        p = dict(self.model.named_parameters())[param]
        p.register_hook(lambda g: g * float("inf") if at_step.s == K - 1 else g)

    monkeypatch.setattr(Trainer, "__init__", init)


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
@pytest.mark.parametrize("layer, kind, diag", [(1, "ffn", True), (0, "attn", True), (1, "ffn", False)])
def test_activation_inf_at_step_k(layer, kind, diag, tmp_path, monkeypatch, at_step):
    _inject_activation(monkeypatch, at_step, layer, kind)
    extra = ["train.diag_every=100"] if diag else []  # diagnostics on, but not active at step K
    s = run_training(tiny_cfg(*extra), tmp_path / "run", quiet=True)
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["status"] == on_disk["status"] == "diverged"
    assert s["diverged_at_step"] == K and s["steps"] == 15  # stops at the next sync point (log step)
    if diag:
        assert on_disk["first_nonfinite"] == {"step": K, "stage": "forward", "where": f"blocks.{layer}.{kind}"}
    else:
        assert "first_nonfinite" not in on_disk  # no diagnostics: no replay, no cost


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_activation_inf_before_any_checkpoint_replays_from_init(tmp_path, monkeypatch, at_step):
    _inject_activation(monkeypatch, at_step, 1, "attn", bad_step=3)
    s = run_training(tiny_cfg("train.diag_every=100"), tmp_path / "run", quiet=True)
    assert s["diverged_at_step"] == 3
    assert s["first_nonfinite"] == {"step": 3, "stage": "forward", "where": "blocks.1.attn"}


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_gradient_inf_at_step_k_is_divergence_at_k_and_names_the_parameter(tmp_path, monkeypatch, at_step):
    name = "blocks.0.ffn.branch.fc.weight"
    _inject_gradient(monkeypatch, at_step, name)
    s = run_training(tiny_cfg("train.diag_every=100"), tmp_path / "run", quiet=True)
    # The loss of step K is still finite; the gradient norm is not: diverged at K, not K + 1.
    assert s["status"] == "diverged" and s["diverged_at_step"] == K
    assert s["first_nonfinite"] == {"step": K, "stage": "backward", "where": name}
