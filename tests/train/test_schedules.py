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


# wsd, lr 1, min_lr 0.1, W = 10, S = 110, decay_frac 0.2: D = 22 decay steps from s0 = 88,
# q = (s + 1 - 88) / 22, 1-sqrt: 0.1 + 0.9 * (1 - sqrt(q))
@pytest.mark.parametrize("step, expected", [
    (4, 0.5), (9, 1.0),                             # warm-up, its end at the peak
    (10, 1.0), (50, 1.0), (87, 1.0),                # stable: the first, the middle, the last
    (88, 0.1 + 0.9 * (1 - math.sqrt(1 / 22))),      # the decay's first step is already below the peak
    (98, 0.1 + 0.9 * (1 - math.sqrt(0.5))),         # half-way through the decay: 0.36360...
    (109, 0.1),                                     # the run's last step trains at min_lr exactly
    (150, 0.1),                                     # past the end (never trained): stays at the floor
])
def test_wsd_values(step, expected):
    assert lr_at("wsd", step, 1.0, 10, 110, 0.1) == pytest.approx(expected, rel=1e-12)
    assert lr_at("wsd", step, 1.0, 10, 110, 0.1, decay_frac=0.2, decay_shape="1-sqrt") == lr_at(
        "wsd", step, 1.0, 10, 110, 0.1)  # the defaults are the paper's


@pytest.mark.parametrize("step, warmup, total, frac, shape, expected", [
    (98, 10, 110, 0.2, "linear", 0.55),             # linear decay: 0.1 + 0.9 * (1 - q), q = 1/2
    (54, 10, 110, 0.5, "1-sqrt", 1.0), (55, 10, 110, 0.5, "1-sqrt", 0.1 + 0.9 * (1 - math.sqrt(1 / 55))),
    (6, 0, 10, 0.25, "linear", 1.0),                # 0.25 * 10 = 2.5 rounds half up: D = 3, s0 = 7
    (7, 0, 10, 0.25, "linear", 0.1 + 0.9 * 2 / 3),
    (9, 10, 20, 0.9, "linear", 1.0),                # a decay longer than the run after warm-up starts
    (10, 10, 20, 0.9, "linear", 0.1 + 0.9 * 0.9),   # where warm-up ends: D = 18 becomes 10
    (19, 10, 20, 0.9, "linear", 0.1),
])
def test_wsd_options(step, warmup, total, frac, shape, expected):
    assert lr_at("wsd", step, 1.0, warmup, total, 0.1, decay_frac=frac, decay_shape=shape) == pytest.approx(
        expected, rel=1e-12)


def test_wsd_scales_with_peak_and_decays_to_zero_as_the_paper():
    assert lr_at("wsd", 50, 3e-4, 10, 110, 3e-5) == 3e-4
    assert lr_at("wsd", 109, 3e-4, 10, 110, 0.0) == 0.0 and lr_at("wsd", 108, 3e-4, 10, 110, 0.0) > 0


def test_other_schedules_ignore_the_wsd_options():
    for name in ("constant", "cosine", "linear", "inverse_sqrt", "none"):
        assert lr_at(name, 60, 1.0, 10, 110, 0.1, decay_frac=0.9, decay_shape="linear") == lr_at(
            name, 60, 1.0, 10, 110, 0.1)


def test_wsd_options_are_checked():
    with pytest.raises(ConfigError, match=r"optim.decay_frac=0.0: must be in \(0, 1\]"):
        OptimConfig(decay_frac=0.0)
    with pytest.raises(ConfigError, match=r"optim.decay_shape='sqrt': use 1-sqrt or linear"):
        OptimConfig(decay_shape="sqrt")


def test_absolute_lr_scales_with_peak():
    # lr 3e-4, min 3e-5: halfway through cosine is (3e-4 + 3e-5) / 2
    assert lr_at("cosine", 50, 3e-4, 0, 100, 3e-5) == pytest.approx(1.65e-4)


def test_every_registered_schedule_is_covered():
    assert set(SCHEDULES.names()) == {"constant", "cosine", "linear", "inverse_sqrt", "none", "wsd"}


def test_unknown_schedule_lists_valid_names():
    with pytest.raises(ConfigError, match="optim.schedule.*cosine"):
        OptimConfig(schedule="cosin")


def test_negative_warmup_is_a_config_error():
    with pytest.raises(ConfigError, match=r"optim.warmup_steps=-1"):
        OptimConfig(warmup_steps=-1)
