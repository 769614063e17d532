"""`TransformerLM.generate`, `.save` and `TransformerLM.load`: where a PyTorch user looks."""

from __future__ import annotations

import pytest
import torch

from normlab import ModelConfig, TransformerLM, UserError


def _model(**kw) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(ModelConfig(n_layer=2, d_model=32, n_head=2, context=8, vocab_size=11, **kw))


def test_generate_continues_the_prompt_past_the_context_in_eval_mode():
    m = _model(dropout=0.5)
    m.train()
    idx = torch.tensor([[1, 2, 3]])
    a = m.generate(idx, 20, temperature=0)      # greedy: dropout off, or the two would differ
    b = m.generate(idx, 20, temperature=0)
    assert a.shape == (1, 23) and torch.equal(a, b) and torch.equal(a[:, :3], idx)
    assert m.training  # the flag is restored
    g = [torch.Generator().manual_seed(5) for _ in range(2)]
    s1, s2 = (m.generate(idx, 10, temperature=1.0, top_k=3, generator=x) for x in g)
    assert torch.equal(s1, s2) and int(s1.max()) < 11
    with pytest.raises(UserError, match="max_new_tokens=-1"):
        m.generate(idx, -1)
    with pytest.raises(UserError, match="token ids"):
        m.generate(torch.tensor([[99]]), 1)


def test_save_then_load_gives_the_same_model(tmp_path):
    m = _model(placement="sandwich", norm="rmsnorm")
    m.save(tmp_path / "m")
    loaded = TransformerLM.load(tmp_path / "m")
    assert loaded.cfg == m.cfg
    idx = torch.randint(0, 11, (2, 8))
    assert torch.equal(loaded(idx)[0], m(idx)[0])


def test_one_return_convention() -> None:
    # model(idx) and model(idx, targets) return the same shape of result, so unpacking a
    # call without targets never splits the batch (B = 2 would unpack silently otherwise).
    m = TransformerLM(ModelConfig(vocab_size=11, context=8, n_layer=1, d_model=16, n_head=2)).eval()
    idx = torch.randint(0, 11, (2, 8))
    logits, loss = m(idx)
    assert logits.shape == (2, 8, 11) and loss is None
    logits2, loss2 = m(idx, targets=idx)
    assert torch.equal(logits2, logits)
    want = torch.nn.functional.cross_entropy(logits.view(-1, 11), idx.view(-1))
    assert loss2 is not None and torch.allclose(loss2, want)
