"""Each schedule's lr(step) against values computed by hand."""

from __future__ import annotations

import math

import pytest

from normlab.core.errors import ConfigError
from normlab.run.schedules import SCHEDULES, lr_at
from normlab.run.train_config import OptimConfig


# (schedule, step, warmup, total, lr=1.0, min_lr=0.1) -> expected
@pytest.mark.parametrize("name, step, warmup, total, expected", [
    # warm-up is (step + 1) / W for every schedule but "none"
    ("cosine", 0, 10, 110, 0.1), ("cosine", 4, 10, 110, 0.5), ("cosine", 9, 10, 110, 1.0),
    # cosine: 0.1 + 0.9 * (1 + cos(pi p)) / 2 with p = (s - 10) / 100
    ("cosine", 10, 10, 110, 1.0), ("cosine", 60, 10, 110, 0.55), ("cosine", 110, 10, 110, 0.1),
    ("cosine", 35, 10, 110, 0.1 + 0.9 * (1 + math.cos(math.pi / 4)) / 2),
    ("cosine", 0, 0, 100, 1.0), ("cosine", 50, 0, 100, 0.55),
    # linear: 1 - 0.9 p
    ("linear", 35, 10, 110, 0.775), ("linear", 60, 10, 110, 0.55), ("linear", 110, 10, 110, 0.1),
    ("linear", 200, 10, 110, 0.1), ("linear", 2, 10, 110, 0.3),
    # constant
    ("constant", 1, 4, 100, 0.5), ("constant", 4, 4, 100, 1.0), ("constant", 99, 0, 100, 1.0),
    # inverse square root: sqrt(W) / sqrt(s + 1) after warm-up; 1/sqrt(s+1) with no warm-up
    ("inverse_sqrt", 3, 4, 100, 1.0), ("inverse_sqrt", 15, 4, 100, 0.5), ("inverse_sqrt", 63, 4, 100, 0.25),
    ("inverse_sqrt", 0, 0, 100, 1.0), ("inverse_sqrt", 3, 0, 100, 0.5), ("inverse_sqrt", 1, 4, 100, 0.5),
    # none ignores warm-up
    ("none", 0, 10, 100, 1.0), ("none", 50, 10, 100, 1.0),
])
def test_schedule_values(name, step, warmup, total, expected):
    assert lr_at(name, step, 1.0, warmup, total, 0.1) == pytest.approx(expected, rel=1e-12)


def test_absolute_lr_scales_with_peak():
    # lr 3e-4, min 3e-5: halfway through cosine is (3e-4 + 3e-5) / 2
    assert lr_at("cosine", 50, 3e-4, 0, 100, 3e-5) == pytest.approx(1.65e-4)


def test_every_registered_schedule_is_covered():
    assert set(SCHEDULES.names()) == {"constant", "cosine", "linear", "inverse_sqrt", "none"}


def test_unknown_schedule_lists_valid_names():
    with pytest.raises(ConfigError, match="optim.schedule.*cosine"):
        OptimConfig(schedule="cosin")


def test_negative_warmup_is_a_config_error():
    with pytest.raises(ConfigError, match=r"optim.warmup_steps=-1"):
        OptimConfig(warmup_steps=-1)
