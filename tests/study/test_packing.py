"""GPU trial packs: a trial's memory measured from its own forward, and K from a (fake) budget.

Every budget here is planted: no test needs a GPU. The activation count is checked against a
real CPU forward of the same tiny config under the same hooks (the meta count must equal it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from normlab.core.errors import UserError
from normlab.model import cost
from normlab.run.presets import smoke
from normlab.run.resolve import RunConfig
from normlab.study import packing
from normlab.study.packing import (
    MiB,
    activation_bytes,
    choose_pack,
    device_memory,
    pack_bytes,
    saved_bytes,
    shared_bytes,
    trial_cost,
)


def tiny(seed: int = 0, lr: float = 1e-3, z_loss: float = 0.0, **changes: Any) -> RunConfig:
    """The smoke preset (2 blocks, d=32, context 32, batch 8) with model/train fields changed."""
    base = smoke()
    model = {k: v for k, v in changes.items() if hasattr(base.model, k)}
    train = {k: v for k, v in changes.items() if k not in model}
    return dataclasses.replace(base, seed=seed, model=dataclasses.replace(base.model, **model),
                               train=dataclasses.replace(base.train, **train),
                               optim=dataclasses.replace(base.optim, lr=lr, z_loss=z_loss))


# Each variant changes what autograd keeps: learned or rotary positions, grouped-query heads,
# a sliding-window mask (SDPA turns it into a float mask), QK-norm, SwiGLU, the z-loss, a
# post-norm and a gradient-accumulated micro-batch. Dropout and nGPT train alone (the solo loop).
VARIANTS = {
    "pre": {}, "post": {"placement": "post"}, "rope-gqa": {"pos": "rope", "n_kv_head": 1},
    "window": {"sliding_window": 8}, "qk-swiglu": {"qk_norm": "rmsnorm", "ffn": "swiglu"},
    "z-loss": {"z_loss": 1e-4}, "accum": {"grad_accum": 2}, "dropout": {"dropout": 0.1},
    "ngpt": {"placement": "ngpt"},
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_meta_count_equals_a_real_cpu_forward(name: str) -> None:
    cfg = tiny(**VARIANTS[name])
    meta = saved_bytes(cfg)
    assert meta == saved_bytes(cfg, "cpu")
    assert meta > 4 * cfg.model.context * cfg.model.d_model * cfg.model.n_layer  # not just the ids


def test_bfloat16_scaled_from_two_sequences_equals_the_whole_micro_batch() -> None:
    cfg = tiny(dtype="bfloat16")
    got = activation_bytes(cfg)
    assert got == saved_bytes(cfg, "cpu")        # 8 sequences measured whole
    assert got < saved_bytes(tiny())             # bfloat16 inputs to the matmuls: fewer bytes than float32
    with pytest.raises(ValueError, match="autocast has no meta device"):
        saved_bytes(cfg)


def test_activations_are_linear_in_the_batch_and_doubling_it_doubles_them() -> None:
    a1, a2, a4 = (saved_bytes(tiny(batch_size=b)) for b in (4, 8, 16))
    # a(B) = c + B s: c is what a forward saves once whatever its rows (the position ids,
    # context int64, and a scalar), a few hundred bytes against hundreds of KiB
    c = 2 * a1 - a2
    assert 2 * a2 - a4 == c and 0 <= c <= 8 * 32 + 8
    assert a2 == pytest.approx(2 * a1, rel=1e-3)
    assert saved_bytes(tiny(batch_size=8, grad_accum=2)) == a1  # the micro-batch is what counts


def test_activations_grow_linearly_with_the_block_length_without_a_window_mask() -> None:
    # The fused attention kernel keeps no T x T matrix, so every saved tensor is linear in T...
    a1, a2, a4 = (saved_bytes(tiny(context=t)) for t in (16, 32, 64))
    assert a4 - a2 == 2 * (a2 - a1)
    # ... but a sliding window's mask is T x T: the growth is faster than linear
    w1, w2, w4 = (saved_bytes(tiny(context=t, sliding_window=8)) for t in (16, 32, 64))
    assert w4 - w2 > 2 * (w2 - w1)


def test_the_weights_gradients_and_moments_come_from_the_parameters() -> None:
    cfg = tiny()
    n = cost.parameters(cfg.model)
    c = trial_cost(cfg)
    assert (c.grads, c.optimizer) == (4 * n, 8 * n)   # float32 gradients, AdamW's two float32 moments
    assert c.params >= 4 * n                           # (+ buffers)
    assert c.activations == saved_bytes(cfg)
    assert c.total == c.params + c.grads + c.optimizer + c.activations
    assert f"activations {c.activations / MiB:.1f}" in c.text()


def _planted(cfg: RunConfig, trials: float) -> tuple[int, int]:
    """(memory giving a budget of the shared bytes plus ``trials`` trials at reserve 0, one trial's need)."""
    need = pack_bytes(trial_cost(cfg))
    return int(shared_bytes(cfg) + trials * need), need


def test_k_is_the_number_of_whole_trials_the_budget_holds() -> None:
    cfgs = [tiny(seed=s) for s in range(10)]
    memory, need = _planted(cfgs[0], 3.5)
    assert choose_pack(cfgs, memory, reserve=0.0).k == 3
    exact, _ = _planted(cfgs[0], 3)
    assert choose_pack(cfgs, exact, reserve=0.0).k == 3
    assert choose_pack(cfgs, exact - 1, reserve=0.0).k == 2
    # a pack holds each trial's weights twice (stacked, and its own model)
    c = trial_cost(cfgs[0])
    assert need == c.total + c.params


def test_k_is_clipped_by_the_trials_given_and_by_the_limit() -> None:
    cfgs = [tiny(seed=s) for s in range(5)]
    memory, _ = _planted(cfgs[0], 100)
    assert choose_pack(cfgs, memory).k == 5
    assert choose_pack(cfgs, memory, limit=2).k == 2
    assert choose_pack(cfgs[:1], memory).k == 1


def test_a_trial_over_the_budget_is_refused_naming_its_cost_and_the_fix() -> None:
    cfg = tiny()
    memory, need = _planted(cfg, 0.5)
    with pytest.raises(UserError) as e:
        choose_pack([cfg], memory, reserve=0.0)
    msg = str(e.value)
    assert f"{(need + shared_bytes(cfg)) / MiB:.1f} MiB" in msg and f"budget is {memory / MiB:.0f} MiB" in msg
    assert "train.grad_accum" in msg and "device with more memory" in msg


def test_the_reserve_is_kept_free() -> None:
    cfgs = [tiny(seed=s) for s in range(10)]
    memory, need = _planted(cfgs[0], 4)
    assert choose_pack(cfgs, memory, reserve=0.0).k == 4
    half = choose_pack(cfgs, memory, reserve=0.5)
    assert half.budget == int(0.5 * memory)
    assert half.k == (half.budget - half.shared) // need == 1
    with pytest.raises(UserError, match="reserve"):
        choose_pack(cfgs, memory, reserve=1.0)


def test_the_text_names_k_and_the_numbers_in_mib() -> None:
    cfgs = [tiny(seed=s, lr=1e-3 * (s + 1)) for s in range(10)]  # other seeds and lrs: the same sizes
    memory, need = _planted(cfgs[0], 6.2)
    pack = choose_pack(cfgs, int(memory / 0.9))
    c = pack.costs[0]
    text = pack.text()
    assert text.startswith("packs 6 trials per GPU: each needs ")
    for part in (f"{need / MiB:.1f} MiB", f"params {c.params / MiB:.1f}", f"grads {c.grads / MiB:.1f}",
                 f"Adam {c.optimizer / MiB:.1f}", f"activations {c.activations / MiB:.1f}",
                 f"budget {pack.budget / MiB:.0f} MiB (90% of {memory / 0.9 / MiB:.0f})"):
        assert part in text, part


def test_the_trials_of_a_pack_are_costed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = packing.trial_cost
    monkeypatch.setattr(packing, "trial_cost", lambda c: calls.append(c) or real(c))
    choose_pack([tiny(seed=s, lr=1e-3 * (s + 1)) for s in range(6)], 10**9)
    assert len(calls) == 1


def test_a_pack_ends_at_the_first_trial_that_cannot_share_its_batch() -> None:
    cfgs = [tiny(seed=0), tiny(seed=1), tiny(seed=2, batch_size=4), tiny(seed=3)]
    assert choose_pack(cfgs, 10**9).k == 2
    alone = choose_pack([tiny(dropout=0.1), tiny(seed=1, dropout=0.1)], 10**9)  # the batched trainer refuses dropout
    assert (alone.k, alone.batched, alone.shared) == (1, False, 0)
    assert alone.needs[0] == alone.costs[0].total and "alone" in alone.text()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_without_cuda_there_is_no_device_memory() -> None:
    assert device_memory() is None and device_memory("cuda:0") is None and device_memory("cpu") is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_with_cuda_the_device_memory_is_its_total() -> None:
    total = torch.cuda.get_device_properties(0).total_memory
    assert device_memory("cuda:0") == total and device_memory("cpu") is None


def test_measuring_leaves_the_random_state_alone() -> None:
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    activation_bytes(tiny(dtype="bfloat16"))   # a real CPU forward, built from the trial's seed
    assert torch.equal(torch.random.get_rng_state(), before)
