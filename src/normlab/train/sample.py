"""Generate text from a trained run: load RUN's config, tokenizer and checkpoint, then sample."""

from __future__ import annotations

from pathlib import Path

import torch

from normlab.core.errors import UserError
from normlab.data.tokenizers import tokenizer_from_state
from normlab.model.sampling import generate
from normlab.run.dir import RunDir, note_if_written
from normlab.train.env import pick_device


def sample_run(run_dir: str | Path, prompt: str, tokens: int, temperature: float = 0.8,
               top_k: int | None = 200, seed: int = 0, which: str = "best", device: str = "cpu") -> str:
    """Text continuing ``prompt`` from checkpoint ``which`` (best, else latest) of ``run_dir``."""

    run = RunDir(run_dir)
    run.config("sample")  # not a run: say so before anything else
    note_if_written(run_dir, "sample")  # a reader: it never locks, and says so
    if tokens < 0:
        raise UserError(f"--tokens={tokens}: must be >= 0")
    dev = pick_device(device)
    model, cfg, state = run.load_model(which, "sample", dev)  # a damaged checkpoint is an error, never passed over
    tok = tokenizer_from_state(state["tokenizer"])
    ids = tok.encode(prompt) if prompt else [0]
    idx = torch.tensor([ids], dtype=torch.long, device=dev)
    gen = torch.Generator(device=dev).manual_seed(seed)
    out = generate(model, idx, tokens, cfg.model.context, temperature, top_k, gen)
    return tok.decode(out[0].tolist())
