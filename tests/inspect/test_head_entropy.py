"""Each head's attention entropy of a transformers model, as `normlab inspect` captures it
(the probabilities its eager attention returns, through transformers' attention interface),
equals the entropy of the attentions transformers itself returns; the sharpness of such a
model is measured through the same recording (its fused attention has no second derivative)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from normlab.diagnostics.capture import measure
from normlab.diagnostics.curvature import sharpness
from normlab.diagnostics.subject import subject_from_module

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402


@pytest.mark.parametrize("family", ["gpt2", "llama", "gemma2"])  # MHA, grouped-query, soft-capped windows
def test_head_entropy_is_that_of_transformers_attentions(family: str) -> None:
    hf = tiny.hf_model(family)
    x = torch.randint(0, tiny.VOCAB, (2, 12), generator=torch.Generator().manual_seed(0))
    c, _ = measure(subject_from_module(hf), x, x, sharpness_iters=3)
    assert "attention" in c.provided and "hessian" in c.provided
    hf.set_attn_implementation("eager")  # (transformers returns attentions from the eager path only)
    with torch.no_grad():
        att = hf(x, output_attentions=True).attentions
    want = torch.stack([torch.special.entr(a.float()).sum(-1).mean(dim=(0, 2)) for a in att])  # (L, H)
    torch.testing.assert_close(c.attention["head_entropy"], want, rtol=1e-5, atol=1e-6)
    assert bool((want > 0).all()) and bool((want <= math.log(12)).all())
    got = sharpness(c)  # the default sdpa of the model, switched to the recording for the duration
    assert got is not None and math.isfinite(got.item())
