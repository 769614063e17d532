"""One smoke run per placement and norm of issue 34: a tiny model trains three steps on the
corpus, writes finite losses, and its checkpoint loads back strictly (every new tensor has a
name and a shape the loader accepts), with the method's own tensor moved by training."""

from __future__ import annotations

import math

import pytest
import torch

from normlab.core.fsutil import read_jsonl
from normlab.model.transformer import TransformerLM
from normlab.train import run_training

SHORT = ("train.steps=3", "train.eval_every=3", "train.log_every=1", "train.checkpoint_every=3")
CASES = {  # id -> (--set items, a tensor only this method has, its value at init)
    "hybridnorm": (('model.placement="hybridnorm"', "model.norm=rmsnorm"), "blocks.1.attn.branch.v_norm.weight", 1.0),
    "hybridnorm_star": (('model.placement="hybridnorm_star"',), "blocks.0.attn.norm.weight", 1.0),
    "normformer": (('model.placement="normformer"', "model.ffn=swiglu"), "blocks.0.attn.branch.pre_proj.weight", 1.0),
    "subln": (('model.placement="subln"', "model.n_kv_head=1"), "blocks.1.ffn.branch.pre_proj.weight", 1.0),
    "peri_ln_embed_norm": (('model.placement={name="sandwich",embed_norm=true}',), "blocks.0.attn.embed_norm.weight",
                           1.0),
    "keel": (('model.placement={name="keel",alpha="sublayers"}', "model.norm=rmsnorm", "model.bias=false"),
             "blocks.0.attn.norm_in.weight", 1.0),
    "derf": (("model.norm=derf",), "blocks.0.attn.norm.shift", 0.0),
    "seednorm": (("model.norm=seednorm",), "blocks.0.ffn.norm.beta", 0.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_trains_three_steps_and_reloads(case: str, tmp_path, tiny) -> None:
    items, tensor, init = CASES[case]
    run = tmp_path / "run"
    s = run_training(tiny.cfg(*SHORT, *items), run, quiet=True)
    assert s["status"] == "completed" and s["steps"] == 3 and s["diverged_at_step"] is None
    losses = [r["train/loss"] for r in read_jsonl(run / "metrics.jsonl")]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    model = TransformerLM.load(run / "checkpoints" / "latest").eval()
    idx = torch.randint(0, model.cfg.vocab_size, (2, model.cfg.context))
    with torch.no_grad():
        logits = model(idx)[0]
    assert torch.isfinite(logits).all()
    trained = model.state_dict()[tensor]   # the method's own tensor was saved, and the gradient reached it
    assert not torch.all(trained == init), f"{tensor} did not move from its init {init}"
