"""Imported GPT-2, Llama (grouped-query attention) and OLMo-2 give transformers' logits to 1e-5
in float32; one perturbed weight breaks the equality (so the comparison can fail). Qwen3, OLMo-3
and Gemma 2/3: test_families.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

from normlab.core.errors import UserError  # noqa: E402
from normlab.model.interop import from_hf  # noqa: E402

pytest.importorskip("transformers")


@pytest.mark.parametrize("family,placement", [("gpt2", "pre"), ("llama", "pre"), ("olmo2", "post_branch")])
def test_logits_match_transformers(family: str, placement: str) -> None:
    hf = tiny.hf_model(family)
    ours = from_hf(hf).eval()
    assert ours.cfg.placement == placement
    if family != "gpt2":
        assert (ours.cfg.n_head, ours.cfg.kv_heads) == (4, 2)  # grouped-query attention kept
    idx = torch.randint(0, tiny.VOCAB, (3, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = hf(idx).logits
        got, _ = ours(idx)
        assert ref.abs().max() > 0.1  # not a trivially small output
        assert torch.allclose(got, ref, atol=1e-5, rtol=0), (got - ref).abs().max()
        # A hand-planted difference: one entry of layer 1's W_V (a row shared by two query heads with GQA).
        cfg = ours.cfg
        ours.blocks[1].attn.branch.qkv.weight[cfg.d_model + cfg.kv_heads * cfg.head_dim + 3, 5] += 0.5
        assert not torch.allclose(ours(idx)[0], ref, atol=1e-5, rtol=0)


def test_inspect_only_families_are_refused_with_the_reason() -> None:
    with pytest.raises(UserError, match="inspect-only: BERT is bidirectional"):
        from_hf(tiny.hf_model("bert"))


def test_unsupported_llama_variants_are_refused() -> None:
    import transformers as t

    cfg = tiny.hf_config("llama")
    cfg.rope_parameters = {"rope_type": "linear", "rope_theta": 500.0, "factor": 2.0}
    with pytest.raises(UserError, match="rope_type='linear'"):
        from_hf(t.LlamaForCausalLM(cfg))
    cfg = tiny.hf_config("llama")
    cfg.attention_bias = True
    with pytest.raises(UserError, match="LlamaConfig.attention_bias=True"):
        from_hf(t.LlamaForCausalLM(cfg))
