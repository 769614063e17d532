"""Batches are a pure function of (seed, step, micro); validation windows ignore the run seed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normlab.core.errors import UserError
from normlab.data.batches import check_fits, train_batch, val_batches

TOKENS = np.arange(10_000, dtype=np.uint16) % 97


def test_same_key_same_batch_and_shift():
    x1, y1 = train_batch(TOKENS, 16, 8, seed=3, step=41, micro=1)
    x2, y2 = train_batch(TOKENS, 16, 8, seed=3, step=41, micro=1)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.shape == (8, 16) and x1.dtype == torch.int64
    assert torch.equal(x1[:, 1:], y1[:, :-1])
    # windows are contiguous slices of the token stream
    assert torch.equal((y1[:, -1] - x1[:, -1]) % 97, torch.ones(8, dtype=torch.int64))


@pytest.mark.parametrize("other", [dict(seed=4, step=41, micro=1), dict(seed=3, step=42, micro=1),
                                   dict(seed=3, step=41, micro=0)])
def test_any_key_change_changes_the_batch(other):
    x1, _ = train_batch(TOKENS, 16, 8, seed=3, step=41, micro=1)
    x2, _ = train_batch(TOKENS, 16, 8, **other)
    assert not torch.equal(x1, x2)


def test_rank_slices_partition_the_global_batch():
    full, _ = train_batch(TOKENS, 16, 8, 0, 5, 0)
    parts = [train_batch(TOKENS, 16, 8, 0, 5, 0, slice(r * 4, (r + 1) * 4))[0] for r in range(2)]
    assert torch.equal(torch.cat(parts), full)


def test_windows_stay_in_range():
    short = np.arange(18, dtype=np.uint16)  # exactly one position fits context 16 + 1 ... plus one
    x, y = train_batch(short, 16, 64, 0, 0, 0)
    assert int(x.min()) >= 0 and int(y.max()) <= 17
    assert set(x[:, 0].tolist()) <= {0, 1}


def test_validation_set_is_fixed():
    a = val_batches(TOKENS, 16, 4, 3)
    b = val_batches(TOKENS, 16, 4, 3)
    assert len(a) == 3 and all(torch.equal(p[0], q[0]) for p, q in zip(a, b))
    assert not torch.equal(a[0][0], a[1][0])


def test_context_longer_than_split():
    check_fits(17, 16, "validation")
    with pytest.raises(UserError, match=r"model.context=16 needs 17 tokens but the validation split has 16"):
        check_fits(16, 16, "validation")
