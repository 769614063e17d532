"""model.impl = "hf-gpt2": transformers' GPT-2 as the lab Pre-LN's baseline. Same seeded init and
parameter count as the lab model (so any difference is the implementation's), equal step-0 loss,
losses that stay together under the lab's optimizer, and one-line refusals of everything GPT-2
or the lab's TransformerLM-only machinery cannot do."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from normlab.core.errors import ConfigError, UserError
from normlab.core.schema import to_dict
from normlab.model.build import build_model, resolve_model
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM

pytest.importorskip("transformers")

CFG = ModelConfig(vocab_size=65, context=32, n_layer=2, d_model=32, n_head=2, impl="hf-gpt2")
LAB = dataclasses.replace(CFG, impl="normlab")


def _pair(seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module, float, float]:
    torch.manual_seed(seed)
    hf = build_model(CFG)
    after_hf = float(torch.rand(()))  # the global RNG after the build
    torch.manual_seed(seed)
    lab = build_model(LAB)
    return hf, lab, after_hf, float(torch.rand(()))


def test_same_init_same_parameter_count_same_step0_loss() -> None:
    hf, lab, after_hf, after_lab = _pair()
    assert type(hf).__name__ == "HFGPT2" and isinstance(lab, TransformerLM)
    assert after_hf == after_lab  # transformers' own init drew from a forked RNG
    count = [sum(p.numel() for p in m.parameters()) for m in (hf, lab)]
    assert count[0] == count[1] == 28576  # 65*32 + 32*32 + 2 * 12704 + 64 (blocks, final norm; tied head once)
    assert torch.equal(hf.hf.transformer.wte.weight, lab.wte.weight)
    assert torch.equal(hf.hf.transformer.h[1].attn.c_attn.weight, lab.blocks[1].attn.branch.qkv.weight.t())
    assert hf.hf.lm_head.weight is hf.hf.transformer.wte.weight  # tied, as the lab's
    g = torch.Generator().manual_seed(1)
    x, y = torch.randint(0, 65, (4, 32), generator=g), torch.randint(0, 65, (4, 32), generator=g)
    with torch.no_grad():
        (lh, loss_hf), (ll, loss_lab) = hf(x, y), lab(x, y)
    assert lh.shape == ll.shape == (4, 32, 65)
    assert float((lh - ll).abs().max()) < 1e-5 and abs(float(loss_hf) - float(loss_lab)) < 1e-6
    assert hf(x)[1] is None


def test_losses_stay_together_under_the_labs_optimizer() -> None:
    from normlab.run.train_config import OptimConfig
    from normlab.train.optim import make_optimizer, param_groups

    hf, lab, _, _ = _pair()
    o = OptimConfig(lr=3e-3)
    # the same AdamW groups: decay on the same matrices (GPT-2's Conv1D weights are 2-D too)
    assert [len(g["params"]) for g in param_groups(hf, 0.1)] == [len(g["params"]) for g in param_groups(lab, 0.1)]
    opts = [make_optimizer(m, o) for m in (hf, lab)]
    g = torch.Generator().manual_seed(2)
    gaps = []
    for _ in range(8):
        x, y = torch.randint(0, 65, (8, 32), generator=g), torch.randint(0, 65, (8, 32), generator=g)
        losses = []
        for m, opt in zip((hf, lab), opts):
            _, loss = m(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(float(loss.detach()))
        gaps.append(abs(losses[0] - losses[1]))
    # float32 rounding of two implementations of one computation, after 8 AdamW steps: stated
    # tolerance 1e-4 nats (measured: 5e-7 at most)
    assert max(gaps) < 1e-4


@pytest.mark.parametrize("change, words", [
    (dict(placement="post"), "GPT-2 cannot compute this model: placement post"),
    (dict(pos="rope"), "model.pos='rope'"),
    (dict(norm="rmsnorm", ffn="swiglu", pos="rope", bias=False), "this model is llama's"),
    (dict(impl="hf-gtp2"), "did you mean 'hf-gpt2'?); valid: normlab, hf-gpt2"),
])
def test_configs_gpt2_does_not_compute_are_refused_in_one_line(change, words) -> None:
    with pytest.raises(ConfigError) as e:
        resolve_model(dataclasses.replace(CFG, **change))
    assert words in str(e.value) and "\n" not in str(e.value) and e.value.field == "model.impl"


def test_lab_only_machinery_refuses_the_baseline(tmp_path) -> None:
    from normlab.model.build import lab_internals
    from normlab.run.resolve import RunConfig
    from normlab.train.plan import check_train, incompatibility

    run = RunConfig(model=CFG)

    def check_config(cfg: RunConfig) -> None:
        check_train(cfg.train, lab_internals(cfg.model), cfg.model.impl)

    check_config(run)  # diagnostics off, no init_from: accepted
    with pytest.raises(ConfigError, match=r"train.diag_every=10: in-training diagnostics read the lab model's "
                                          r"blocks and model.impl='hf-gpt2' .*set train.diag_every=0"):
        check_config(dataclasses.replace(run, train=dataclasses.replace(run.train, diag_every=10)))
    with pytest.raises(ConfigError, match="train.init_from=.*leave train.init_from empty"):
        check_config(dataclasses.replace(run, train=dataclasses.replace(run.train, init_from=str(tmp_path))))
    assert "run it solo" in (incompatibility([run, dataclasses.replace(run, seed=2)]) or "")
    from normlab.model.io import save_model

    save_model(build_model(CFG), tmp_path / "m")
    with pytest.raises(UserError, match="holds a model.impl='hf-gpt2' model, not a TransformerLM"):
        TransformerLM.load(tmp_path / "m")


def test_impl_is_written_only_when_it_is_not_the_default() -> None:
    from normlab.run.resolve import RunConfig

    assert "impl" not in to_dict(LAB) and to_dict(CFG)["impl"] == "hf-gpt2"
    run = RunConfig(model=CFG)
    assert RunConfig.from_json(run.to_json()) == run
    assert RunConfig.from_json(RunConfig(model=LAB).to_json()).model.impl == "normlab"
