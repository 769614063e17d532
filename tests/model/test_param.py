"""model.param (sp, mup, completep): each rule against a hand computation (init std, per-group lr,
weight decay and epsilon, output multiplier, softmax scale, residual-branch multiplier), sp left
byte for byte as it was, every placement composing or refused in one line, and the refusals."""

from __future__ import annotations

import math
import types
from typing import Any

import pytest
import torch

from normlab.core.errors import ConfigError
from normlab.core.schema import from_dict
from normlab.model.build import resolve_model
from normlab.model.catalogue import PARAMS, PLACEMENTS
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM
from normlab.run.train_config import OptimConfig, TrainConfig
from normlab.train.job import LoopConfig
from normlab.train.loop import Trainer
from normlab.train.optim import make_optimizer

TINY: dict[str, Any] = dict(vocab_size=20, context=8, n_layer=2, d_model=32, n_head=2)
MUP: dict[str, Any] = dict(param="mup", base_width=8)  # m_w = 4
COMPLETEP: dict[str, Any] = dict(param="completep", base_width=8, base_depth=1, n_layer=4)  # m_w = 4, m_d = 4


def _model(seed: int = 0, **kw: Any) -> TransformerLM:
    torch.manual_seed(seed)
    return TransformerLM(ModelConfig(**{**TINY, **kw}))


def test_a_default_model_config_is_unchanged() -> None:
    """Trial ids and run files hash the config's JSON: the new fields are left out while unset."""
    assert ModelConfig().to_dict() == {
        "vocab_size": 65, "context": 128, "n_layer": 6, "d_model": 128, "n_head": 4, "n_kv_head": None,
        "placement": "pre", "norm": "layernorm", "qk_norm": None, "qkv_norm": False, "qk_norm_span": "head",
        "final_norm": None, "init": "gpt2", "ffn": "gelu", "d_ff": None, "activation": "gelu", "pos": "learned",
        "rope_base": 10000.0, "bias": True, "dropout": 0.0, "tie_embeddings": True, "norm_eps": 1e-05}
    assert ModelConfig(base_width=64).to_dict()["base_width"] == 64  # (sp ignores it, the JSON keeps it)
    cfg = ModelConfig(param={"name": "completep", "alpha": 0.5}, base_width=64, base_depth=3)
    assert cfg.to_dict()["param"] == {"name": "completep", "alpha": 0.5} and from_dict(ModelConfig, cfg.to_dict()) == cfg


@pytest.mark.parametrize("init", ["gpt2", "xavier", "torch_default"])
def test_mup_at_its_base_width_draws_what_sp_draws(init: str) -> None:
    sp, mup = _model(init=init), _model(init=init, param="mup", base_width=32)
    assert all(torch.equal(a, b) for a, b in zip(sp.parameters(), mup.parameters()))
    assert mup.output_mult == 1.0 and mup.embed_scale == sp.embed_scale


def test_mup_init_std_by_hand() -> None:
    """gpt2 (constant std): the hidden weights x 1/sqrt(m_w) = 1/2, W_O and W_2 keeping GPT-2's
    1/sqrt(2L); embeddings as drawn. xavier (already 1/fan-in): hidden weights as drawn, the
    embedding at the base model's std 1/sqrt(8) with its multiplier sqrt(8)."""
    sp, mup = _model(), _model(**MUP)
    for (name, a), (_, b) in zip(sp.named_parameters(), mup.named_parameters()):
        hidden = name.endswith("weight") and ("qkv" in name or "fc" in name or "proj" in name)
        assert torch.equal(b, a * 0.5 if hidden else a), name
    assert mup.blocks[0].attn.branch.proj.weight.std().item() == pytest.approx(0.02 / 2 / 2, rel=0.1)  # 1/sqrt(2L), L=2
    xs, xm = _model(init="xavier"), _model(init="xavier", **MUP)
    assert torch.allclose(xm.blocks[1].ffn.branch.proj.weight, xs.blocks[1].ffn.branch.proj.weight, rtol=1e-6)
    assert torch.allclose(xm.wte.weight, xs.wte.weight * 2, rtol=1e-6)  # (1/sqrt(8)) / (1/sqrt(32))
    assert xm.embed_scale == pytest.approx(math.sqrt(8)) and xs.embed_scale == pytest.approx(math.sqrt(32))
    td, tm = _model(init="torch_default", tie_embeddings=False), _model(init="torch_default", tie_embeddings=False, **MUP)
    assert torch.allclose(tm.lm_head.weight, td.lm_head.weight * 2, rtol=1e-6)  # the head at the base model's std


def test_completep_init_takes_depth_factors_at_the_base_depth() -> None:
    """W_O, W_2 under gpt2: 0.02/sqrt(2 base_depth)/sqrt(m_w), i.e. sp's draw x sqrt(L/L_0)/sqrt(m_w) = 1."""
    sp, cp = _model(n_layer=4), _model(**COMPLETEP)
    a, b = sp.blocks[2].ffn.branch.proj.weight, cp.blocks[2].ffn.branch.proj.weight
    assert torch.allclose(b, a * math.sqrt(4 / 1) / 2, rtol=1e-6)
    assert torch.equal(cp.blocks[2].ffn.branch.fc.weight, sp.blocks[2].ffn.branch.fc.weight * 0.5)


def _group_of(opt: torch.optim.Optimizer, model: torch.nn.Module, name: str) -> dict:
    p = dict(model.named_parameters())[name]
    return next(g for g in opt.param_groups if any(q is p for q in g["params"]))


def test_per_group_lr_weight_decay_and_eps_by_hand() -> None:
    o = OptimConfig(lr=1e-3, weight_decay=0.1, eps=1e-8, warmup_steps=0, schedule="constant")
    m = _model(**MUP, tie_embeddings=False)
    opt = make_optimizer(m, o)
    Trainer.set_lr(types.SimpleNamespace(loop=LoopConfig(TrainConfig(steps=10), o), opt=opt), 3)
    hidden = _group_of(opt, m, "blocks.1.attn.branch.qkv.weight")
    assert (hidden["lr"], hidden["weight_decay"], hidden["eps"]) == (pytest.approx(2.5e-4), pytest.approx(0.4), 1e-8)
    for name, wd in (("lm_head.weight", 0.1), ("wte.weight", 0.0), ("blocks.0.attn.norm.weight", 0.0)):
        g = _group_of(opt, m, name)
        assert (g["lr"], g["weight_decay"], g["eps"]) == (1e-3, wd, 1e-8), name
    c = _model(**{**COMPLETEP, "param": {"name": "completep", "alpha": 0.5}})
    opt = make_optimizer(c, o)
    md = 4 ** -0.5  # m_d^(alpha-1) = 4^(-1/2); inner eps x 1/(m_w m_d^alpha) = 1/(4 x 2)
    g = _group_of(opt, c, "blocks.3.ffn.branch.fc.weight")
    assert (g["lr"], g["weight_decay"], g["eps"]) == (pytest.approx(1e-3 * md / 4), pytest.approx(0.4),
                                                      pytest.approx(1e-8 / 8))
    g = _group_of(opt, c, "blocks.3.ffn.norm.bias")
    assert (g["lr"], g["weight_decay"], g["eps"]) == (pytest.approx(1e-3 * md), 0.0, pytest.approx(1e-8 / 8))
    g = _group_of(opt, c, "wte.weight")
    assert (g["lr"], g["eps"]) == (1e-3, pytest.approx(1e-8 / 4))
    sp = make_optimizer(_model(), o)  # sp: the two groups, no extra key (checkpoints as before)
    assert [sorted(g) for g in sp.param_groups] == [sorted(g) for g in make_optimizer(_model(), o).param_groups]
    assert len(sp.param_groups) == 2 and not any("lr_scale" in g for g in sp.param_groups)


def test_output_multiplier_and_softmax_scale_by_hand() -> None:
    m = _model(**MUP)
    idx = torch.randint(0, 20, (2, 8), generator=torch.Generator().manual_seed(1))
    z = m.run(idx)
    m.output_mult = 1.0
    assert torch.allclose(z, m.run(idx) * (8 / 32), rtol=1e-6, atol=0)
    d_head = 32 // 2
    assert all(b.attn.branch.scale == 1 / d_head for b in m.blocks)
    assert all(b.attn.branch.scale == 1 / math.sqrt(d_head) for b in _model().blocks)
    hybrid = _model(placement="hybridnorm", **MUP)  # a placement that installs its own q/k norms keeps it
    assert hybrid.blocks[0].attn.branch.scale == 1 / d_head


@pytest.mark.parametrize("placement", ["pre", "post", "sandwich", "post_branch", "pre_post", "normformer", "none"])
def test_the_residual_branch_multiplier_at_each_add(placement: str) -> None:
    """completep with n_layer = 4 x base_depth: every branch x 4^-1 where the placement adds it."""
    m = _model(placement=placement, **COMPLETEP)
    s = m.blocks[1].ffn
    assert s.branch_mult == 0.25
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(2))
    norm = getattr(s, "norm", getattr(s, "norm_in", None))
    expected = {
        "pre": lambda: x + 0.25 * s.branch(s.norm(x)),
        "post": lambda: s.norm(x + 0.25 * s.branch(x)),
        "sandwich": lambda: x + 0.25 * s.norm_out(s.branch(s.norm_in(x))),
        "post_branch": lambda: x + 0.25 * s.norm(s.branch(x)),
        "pre_post": lambda: s.norm_out(x + 0.25 * s.branch(s.norm_in(x))),
        "normformer": lambda: x + 0.25 * s.branch(norm(x)),
        "none": lambda: x + 0.25 * s.branch(x),
    }[placement]()
    assert torch.allclose(s(x), expected, rtol=1e-6, atol=1e-7)
    alpha = _model(placement=placement, **{**COMPLETEP, "param": {"name": "completep", "alpha": 0.5}})
    assert alpha.blocks[0].attn.branch_mult == 0.5 and _model(placement=placement, **MUP).blocks[0].attn.branch_mult == 1


def test_resi_dual_scales_the_branch_on_both_streams() -> None:
    s = _model(placement="resi_dual", **COMPLETEP).blocks[0].attn
    x, d = torch.randn(2, 2, 8, 32, generator=torch.Generator().manual_seed(3))
    f = s.branch(x)
    nx, nd = s((x, d))
    assert torch.allclose(nx, s.norm(x + 0.25 * f), atol=1e-6) and torch.allclose(nd, d + 0.25 * f, atol=1e-7)


@pytest.mark.parametrize("param", ["mup", "completep"])
@pytest.mark.parametrize("placement", PLACEMENTS.names())
def test_every_placement_composes_or_is_refused_in_one_line(placement: str, param: str) -> None:
    cfg = dict(TINY, placement=placement, param=param, base_width=16, base_depth=1,
               norm="rmsnorm" if placement in ("admin", "keel") else "layernorm")
    try:
        m = _model(**cfg)
    except ConfigError as e:
        text = str(e)
        assert "\n" not in text and text.startswith("model.param=") and f"{param} cannot drive placement {placement}: it " in text
        cls = PLACEMENTS.get(placement)
        assert cls.fixed_scales or (param == "completep" and cls.depth_scaling)
        return
    assert not PLACEMENTS.get(placement).fixed_scales
    idx = torch.randint(0, 20, (2, 8), generator=torch.Generator().manual_seed(4))
    assert torch.isfinite(m(idx)[0]).all()


def test_the_refused_pairs() -> None:
    refused = {(p, n) for n in PLACEMENTS.names() for p in ("mup", "completep")
               if PARAMS.get(p)(ModelConfig(base_width=1, base_depth=1)).refusal(PLACEMENTS.get(n))}
    assert refused == {("mup", "ngpt"), *{("completep", n) for n in ("ngpt", "deepnorm", "admin", "keel",
                                                                       "layerscale", "lns", "subln", "siamese",
                                                                       "attn_res", "mhc")}}
    with pytest.raises(ConfigError, match=r"^model.param='completep': completep cannot drive placement deepnorm: it "
                                          r"scales its shortcut by alpha = \(2L\)\^\(1/4\).*would compound; use "
                                          r"model.param=mup$"):
        resolve_model(ModelConfig(placement="deepnorm", param="completep", base_width=64, base_depth=2))


def test_a_placement_that_adds_its_branch_by_hand_is_refused_with_completep() -> None:
    """A placement written before the parametrisations (x + F(LN(x)) by hand) would silently skip
    CompleteP's multiplier: refused, naming the fix; muP (no branch multiplier) takes it."""
    from normlab.model.placements import Pre

    class ByHand(Pre):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.branch(self.norm(x))

    PLACEMENTS.add("by_hand", ByHand)
    try:
        with pytest.raises(ConfigError, match=r"completep cannot drive placement by_hand: it adds its branch without "
                                              r"Placement.residual_add.*call self.residual_add\(x, f\)"):
            resolve_model(ModelConfig(**{**TINY, **COMPLETEP, "placement": "by_hand"}))
        resolve_model(ModelConfig(**{**TINY, **MUP, "placement": "by_hand"}))
    finally:
        PLACEMENTS.remove("by_hand")


@pytest.mark.parametrize("kw, match", [
    (dict(param="mu"), r"^model.param='mu': unknown name .*valid: sp, mup, completep"),
    (dict(param="mup"), r"^model.base_width: model.param='mup' scales from a base model; set it to the width "
                        r"the hyper-parameters were tuned at, e.g. model.base_width=32"),
    (dict(param="completep", base_width=8), r"^model.base_depth: .*e.g. model.base_depth=2"),
    (dict(param={"name": "completep", "alpha": 2.0}, base_width=8, base_depth=1), r"^model.param.alpha=2.0: must be in"),
    (dict(param={"name": "mup", "alpha": 1.0}, base_width=8), r"^model.param.alpha: parametrisation 'mup' has no options"),
    (dict(param=["mup"]), r"^model.param="),
    (dict(param="mup", base_width=8, attn_scale=0.5), r"^model.attn_scale=0.5: model.param='mup' sets the softmax"),
    (dict(base_width=0), r"^model.base_width=0: must be >= 1"),
])
def test_refusals_name_the_field_and_the_fix(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        resolve_model(ModelConfig(**{**TINY, **kw}))


def test_muon_the_batched_loop_and_hf_gpt2_refuse_a_parametrisation(tmp_path) -> None:
    from normlab.run.config import RunConfig
    from normlab.train.plan import incompatibility

    with pytest.raises(ConfigError, match=r"^optim.name='muon': Muon scales each matrix's step by its own shape rule"):
        make_optimizer(_model(**MUP), OptimConfig(name="muon"))
    run = RunConfig(model=ModelConfig(**{**TINY, **MUP}))
    why = incompatibility([run, run])
    assert why is not None and why.startswith("model.param='mup': the batched step") and "\n" not in why
    with pytest.raises(ConfigError, match=r"model.param='mup'"):
        resolve_model(ModelConfig(**{**TINY, **MUP, "impl": "hf-gpt2"}))


@pytest.mark.parametrize("kw", [MUP, COMPLETEP, dict(MUP, init="xavier", tie_embeddings=False)], ids=["mup", "completep", "xavier"])
def test_a_meta_build_materialises_to_the_direct_build(kw: dict[str, Any]) -> None:
    from normlab.model import cost
    from normlab.model.build import materialise

    cfg = ModelConfig(**{**TINY, **kw})
    direct = _model(**kw)
    torch.manual_seed(0)
    built = materialise(cost.meta_model(cfg, None), "cpu")
    assert all(torch.equal(a, b) for a, b in zip(direct.state_dict().values(), built.state_dict().values()))
