"""Run presets: named functions returning a RunConfig (``normlab presets`` lists them).

Study presets (grids of runs) live in ``normlab.study.presets``.
"""

from __future__ import annotations

from typing import Callable

from normlab.core.registry import Registry
from normlab.data.config import DataConfig
from normlab.model.config import ModelConfig
from normlab.run.config import RunConfig
from normlab.run.train_config import OptimConfig, TrainConfig

PresetFn = Callable[[], RunConfig]
PRESETS: Registry[PresetFn] = Registry("preset", "--preset", catalogue="normlab.run.catalogue")


def smoke() -> RunConfig:
    """A seconds-long run for checking that everything works (2 layers, d=32, 50 steps, 1 thread)."""
    return RunConfig(
        model=ModelConfig(n_layer=2, d_model=32, n_head=2, context=32),
        data=DataConfig(),
        optim=OptimConfig(lr=1e-3, warmup_steps=10, min_lr=1e-4),
        train=TrainConfig(steps=50, batch_size=8, eval_every=25, eval_batches=4,
                          log_every=5, checkpoint_every=25, threads=1),
    )


def nanogpt_cpu() -> RunConfig:
    """nanoGPT's CPU model and batch (4 layers, 4 heads, d=128, context 64, batch 12, dropout 0,
    AdamW beta2 0.99, warm-up 100, cosine to 1e-4) on a shorter, hotter schedule: lr 4e-3 for
    1400 steps instead of nanoGPT's 1e-3 for 2000. Val loss 1.864 in 48.5 s on 2 cores with the
    exact GELU (seed 0, measured 2026-12-06; with the tanh GELU it had before, 1.840-1.868 over 3
    seeds in about 55 s), where nanoGPT's schedule reaches 1.897 in 80 s (docs/performance.md).
    nanoGPT's own recipe: --set optim.lr=1e-3 --set train.steps=2000."""
    return RunConfig(
        model=ModelConfig(n_layer=4, n_head=4, d_model=128, context=64, dropout=0.0),
        optim=OptimConfig(lr=4e-3, min_lr=1e-4, warmup_steps=100, schedule="cosine",
                          weight_decay=0.1, beta2=0.99),
        train=TrainConfig(steps=1400, batch_size=12, eval_every=250, eval_batches=20),
    )


def baby_gpt() -> RunConfig:
    """nanoGPT's shakespeare_char: 6 layers, 6 heads, d=384, context 256, batch 64,
    dropout 0.2, lr 1e-3, 5000 steps (nanoGPT: best val loss 1.4697 on an A100)."""
    return RunConfig(
        model=ModelConfig(n_layer=6, n_head=6, d_model=384, context=256, dropout=0.2),
        optim=OptimConfig(lr=1e-3, min_lr=1e-4, warmup_steps=100, schedule="cosine", beta2=0.99),
        train=TrainConfig(steps=5000, batch_size=64, eval_every=250, eval_batches=20),
    )


def seed_pet_project() -> RunConfig:
    """Seed 002's pet project: 6 blocks, AdamW lr 3e-4 constant, batch 32, Tiny Shakespeare
    char. Sized for a laptop CPU: d=128, 4 heads, context 64, 1500 steps, no warm-up."""
    return RunConfig(
        model=ModelConfig(n_layer=6, n_head=4, d_model=128, context=64),
        optim=OptimConfig(lr=3e-4, min_lr=3e-4, warmup_steps=0, schedule="constant",
                          weight_decay=0.01, beta2=0.999, grad_clip=0.0),
        train=TrainConfig(steps=1500, batch_size=32, eval_every=250, eval_batches=20),
    )
