"""optim.name=muon: which parameters Muon gets, that its update is torch.optim.Muon's, the lr of
each group under the schedule, the new options' defaults leaving old configs alone, and the
refusals (an unknown name, the batched loop, another model.impl)."""

from __future__ import annotations

import types

import pytest
import torch

from normlab.core.errors import ConfigError
from normlab.core.schema import from_dict
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM
from normlab.run.config import RunConfig
from normlab.run.train_config import OPTIMIZERS, OptimConfig, TrainConfig
from normlab.train.job import LoopConfig
from normlab.train.loop import Trainer
from normlab.train.muon import MuonAdamW, is_muon_group, muon_names
from normlab.train.optim import BUILDERS, make_optimizer
from normlab.train.plan import incompatibility

MUON = OptimConfig(name="muon", lr=1e-3, muon_lr=0.02, weight_decay=0.1, muon_weight_decay=0.01)


def _model(**kw) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(ModelConfig(n_layer=2, d_model=16, n_head=2, context=8, vocab_size=11, **kw))


def _grads(model: torch.nn.Module, seed: int = 1) -> None:
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=g)


def _groups(opt: torch.optim.Optimizer, model: torch.nn.Module) -> list[set[str]]:
    name = {id(p): n for n, p in model.named_parameters()}
    return [{name[id(p)] for p in g["params"]} for g in opt.param_groups]


def test_hidden_matrices_go_to_muon_everything_else_to_adamw():
    m = _model(tie_embeddings=False)
    opt = make_optimizer(m, MUON)
    assert isinstance(opt, MuonAdamW)
    muon, decay, keep = _groups(opt, m)
    assert [is_muon_group(g) for g in opt.param_groups] == [True, False, False]
    # the attention and MLP projections of both blocks, nothing else
    assert muon == {f"blocks.{i}.{sub}.weight" for i in (0, 1)
                    for sub in ("attn.branch.qkv", "attn.branch.proj", "ffn.branch.fc", "ffn.branch.proj")}
    assert decay == {"lm_head.weight"}  # the untied head: AdamW, decayed as before
    assert {"wte.weight", "wpe.weight", "norm_f.weight", "norm_f.bias"} <= keep
    named = dict(m.named_parameters())
    assert all(named[n].ndim == 1 for n in keep - {"wte.weight", "wpe.weight"})  # gains and biases
    assert sorted(n for g in (muon, decay, keep) for n in g) == sorted(n for n, _ in m.named_parameters())
    tied = _model()  # the tied head is the embedding: AdamW, undecayed (no decayed group is left)
    groups = _groups(make_optimizer(tied, MUON), tied)
    assert len(groups) == 2 and groups[0] == muon == muon_names(tied) and "wte.weight" in groups[1]


def test_lr_and_hyper_parameters_reach_each_group():
    m = _model()
    opt = make_optimizer(m, MUON)
    muon, adamw = opt.param_groups[0], opt.param_groups[-1]
    assert (muon["lr"], muon["weight_decay"], muon["momentum"], muon["nesterov"], muon["adjust_lr_fn"]) == (
        0.02, 0.01, 0.95, True, "original")
    assert adamw["lr"] == 1e-3 and adamw["fused"] and adamw["betas"] == (0.9, 0.99)


def test_the_update_is_torch_muon_on_the_matrices_and_adamw_on_the_rest():
    """One step of the wiring against torch's own optimisers on copies of two parameters: the
    bits must agree, so the right tensor went to the right optimiser with the right options."""
    m = _model()
    cfg = OptimConfig(name="muon", muon_lr=0.05, muon_momentum=0.9, muon_weight_decay=0.1,
                      muon_adjust_lr="match_rms_adamw", lr=3e-3, weight_decay=0.0)
    opt = make_optimizer(m, cfg)
    named = dict(m.named_parameters())
    fc, wte = (named[n].detach().clone().requires_grad_() for n in ("blocks.1.ffn.branch.fc.weight", "wte.weight"))
    ref_muon = torch.optim.Muon([fc], lr=0.05, momentum=0.9, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    ref_adamw = torch.optim.AdamW([wte], lr=3e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.0, fused=True)
    for seed in (1, 2):  # two steps: the second reads the momentum the first left
        _grads(m, seed)
        fc.grad, wte.grad = named["blocks.1.ffn.branch.fc.weight"].grad.clone(), named["wte.weight"].grad.clone()
        opt.step()
        ref_muon.step()
        ref_adamw.step()
    assert torch.equal(named["blocks.1.ffn.branch.fc.weight"], fc)
    assert torch.equal(named["wte.weight"], wte)
    assert not torch.equal(fc, _model().blocks[1].ffn.branch.fc.weight)  # (it moved)


def test_the_schedule_scales_both_groups_by_one_factor():
    o = OptimConfig(name="muon", lr=1e-3, min_lr=1e-4, muon_lr=0.02, schedule="wsd", warmup_steps=10)
    opt = make_optimizer(_model(tie_embeddings=False), o)  # three groups: Muon's, AdamW's two
    trainer = types.SimpleNamespace(loop=LoopConfig(TrainConfig(steps=110), o), opt=opt)
    for step, factor in ((4, 0.5), (50, 1.0), (109, 0.1)):
        assert Trainer.set_lr(trainer, step) == pytest.approx(1e-3 * factor, rel=1e-12)  # AdamW's, logged
        assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.02 * factor, 1e-3 * factor, 1e-3 * factor],
                                                                    rel=1e-12)
    adamw = OptimConfig(schedule="wsd", warmup_steps=10, muon_lr=0.5)  # (muon_lr unread without Muon)
    opt = make_optimizer(_model(), adamw)
    Trainer.set_lr(types.SimpleNamespace(loop=LoopConfig(TrainConfig(steps=110), adamw), opt=opt), 109)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([1e-4, 1e-4], rel=1e-12)


def test_registry_names_and_builders_agree():
    assert set(OPTIMIZERS.names()) == set(BUILDERS) == {"adamw", "muon"}


def test_unknown_optimizer_lists_the_valid_ones():
    with pytest.raises(ConfigError, match=r"^optim.name='adam': unknown name \(did you mean 'adamw'\?\); "
                                          r"valid: adamw, muon"):
        OptimConfig(name="adam")


@pytest.mark.parametrize("field, value, fix", [
    ("muon_lr", 0.0, "must be > 0"), ("muon_momentum", 1.0, r"must be in \[0, 1\)"),
    ("muon_weight_decay", -0.1, "must be >= 0"), ("muon_adjust_lr", "rms", "use original or match_rms_adamw"),
])
def test_muon_options_are_checked(field, value, fix):
    with pytest.raises(ConfigError, match=rf"^optim.{field}="):
        OptimConfig(**{field: value})
    with pytest.raises(ConfigError, match=fix):
        OptimConfig(**{field: value})


def test_default_optim_section_is_unchanged():
    """Trial ids hash the config's JSON: the new options are left out while at their defaults,
    so every stored config, trial id and run file stays byte for byte what it was."""
    assert OptimConfig().to_dict() == {"lr": 1e-3, "min_lr": 1e-4, "schedule": "cosine", "warmup_steps": 100,
                                       "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8,
                                       "grad_clip": 1.0, "z_loss": 0.0}
    assert list(RunConfig().to_dict()["optim"]) == list(OptimConfig().to_dict())
    set_ = OptimConfig(name="muon", schedule="wsd", decay_shape="linear").to_dict()
    assert set_["name"] == "muon" and set_["decay_shape"] == "linear" and "muon_lr" not in set_
    assert from_dict(OptimConfig, set_) == OptimConfig(name="muon", schedule="wsd", decay_shape="linear")


def test_explain_shows_the_new_options(capsys):
    from normlab.cli import main

    assert main(["config", "--explain"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("optim.")}
    for key in ("name", "muon_lr", "muon_momentum", "muon_nesterov", "muon_weight_decay", "muon_adjust_lr",
                "decay_frac", "decay_shape"):
        assert f"optim.{key}" in rows, key
    assert "adamw, muon" in rows["optim.name"] and "wsd" in rows["optim.schedule"]
    assert "match_rms_adamw" in rows["optim.muon_adjust_lr"] and "1-sqrt" in rows["optim.decay_shape"]


def test_batched_training_refuses_muon_in_one_line_and_takes_wsd():
    def cfg(**optim) -> RunConfig:
        return RunConfig(model=ModelConfig(n_layer=2, d_model=16, n_head=2, context=8), optim=OptimConfig(**optim))

    why = incompatibility([cfg(), cfg(name="muon")])
    assert why is not None and why.startswith("trial 1: optim.name='muon'") and "\n" not in why
    assert incompatibility([cfg(schedule="wsd"), cfg(schedule="wsd", lr=3e-3)]) is None


def test_muon_refuses_a_transposed_implementation(tmp_path):
    from normlab.run.resolve import resolve
    from normlab.train.plan import prepare

    cfg = resolve(None, None, None, ["model.impl=hf-gpt2", "optim.name=muon", "model.n_layer=1",
                                     "model.d_model=16", "model.n_head=2", "model.context=8"])
    with pytest.raises(ConfigError, match=r"^optim.name='muon': .*use model.impl=normlab"):
        prepare(cfg, tmp_path / "run")
