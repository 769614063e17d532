"""The one-step output change of ``liu-amplification`` updates the blocks' parameters alone
(Liu et al.'s Theorem 2 perturbs the sub-layers); ``deepnorm-bounded`` keeps every parameter."""

from __future__ import annotations

import pytest
import torch

import normlab.diagnostics.measurements as mb


def _stepped(blocks_only: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict]:
    """(weights before, weights after) of the model one_step_change stepped."""
    seen: dict[str, dict] = {}
    real = mb._setup

    def setup(*a, **kw):  # type: ignore[no-untyped-def]
        model, batch, ev = real(*a, **kw)
        seen["before"] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        seen["model"] = model
        return model, batch, ev

    monkeypatch.setattr(mb, "_setup", setup)
    mb.one_step_change("post", 2, 0, blocks_only=blocks_only)
    after = {k: v.detach().clone() for k, v in seen["model"].state_dict().items()}
    return seen["before"], after


@pytest.mark.parametrize("blocks_only", [True, False])
def test_which_parameters_one_step_updates(blocks_only: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    before, after = _stepped(blocks_only, monkeypatch)
    moved = {k for k in before if before[k].dtype.is_floating_point and not torch.equal(before[k], after[k])}
    in_blocks = {k for k in moved if k.startswith("blocks.")}
    assert in_blocks  # the blocks move either way
    outside = moved - in_blocks
    if blocks_only:
        assert outside == set()
    else:
        assert {"wte.weight", "lm_head.weight"} & outside  # embedding and head updated too


def test_the_extra_keys_measure_the_two_quantities() -> None:
    out: dict = {}
    mb.measure_extra("one_step_blocks:post", out, seeds=1, depths=[2], ref_depth=2)
    mb.measure_extra("one_step:post", out, seeds=1, depths=[2], ref_depth=2)
    blocks, every = out["one_step_blocks"]["post"][2][0]["change"], out["one_step"]["post"][2][0]["change"]
    assert blocks > 0 and every > 0 and blocks != every
