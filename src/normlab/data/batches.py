"""Batches as a pure function of (seed, step, micro-batch): resume needs no sampler state.

Each (seed, step, micro) triple seeds its own counter-based Philox generator, so step
1234 of a run draws the same windows whether the run was resumed or not, and every run of
a study with the same seed sees the same data. Validation uses a fixed set of windows
drawn from a constant seed, independent of the run seed, so every run is scored on
identical text.
"""

from __future__ import annotations

import numpy as np
import torch

from normlab.core.errors import UserError

VAL_SEED = 0x5EED_0FA1  # fixed: validation windows never depend on the run seed
_TRAIN_STREAM = 1       # separates the training stream from any other use of the run seed


def _offsets(n_tokens: int, context: int, count: int, key: list[int]) -> np.ndarray:
    gen = np.random.Generator(np.random.Philox(key=np.random.SeedSequence(key).generate_state(2, np.uint64)))
    return gen.integers(0, n_tokens - context - 1, size=count, endpoint=True)


def windows(tokens: np.ndarray, offsets: np.ndarray, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) int64 (B, T): tokens at offsets and the same shifted by one."""
    idx = offsets[:, None] + np.arange(context + 1)[None, :]   # (B, T+1)
    block = torch.from_numpy(np.asarray(tokens[idx], dtype=np.int64))
    return block[:, :-1], block[:, 1:]


def check_fits(n_tokens: int, context: int, split: str) -> None:
    """One window needs context + 1 tokens; say what to change when a split is too short."""
    if n_tokens < context + 1:
        raise UserError(f"model.context={context} needs {context + 1} tokens but the {split} split "
                        f"has {n_tokens}; lower model.context or use a longer corpus")


def train_batch(tokens: np.ndarray, context: int, rows: int, seed: int, step: int, micro: int,
                rank_slice: slice = slice(None)) -> tuple[torch.Tensor, torch.Tensor]:
    """Micro-batch ``micro`` of optimizer step ``step``: ``rows`` windows, then this rank's slice.

    Under DDP every rank draws the same global micro-batch and keeps its own rows, so a
    2-process run sees exactly the data of the 1-process run.
    """
    off = _offsets(len(tokens), context, rows, [seed, _TRAIN_STREAM, step, micro])
    return windows(tokens, off[rank_slice], context)


def val_batches(tokens: np.ndarray, context: int, rows: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed validation set: ``count`` batches of ``rows`` windows each."""
    return [windows(tokens, _offsets(len(tokens), context, rows, [VAL_SEED, i]), context)
            for i in range(count)]
