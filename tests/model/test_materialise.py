"""A TransformerLM built on the meta device and materialised (``build.materialise``) is the model
a direct build gives, bit for bit: every parameter and buffer (non-persistent ones too) and
the global RNG state after, for every placement, norm, qk-norm, init, FFN and position kind.
A tensor no step writes, or a module that cannot re-make its tensors, is an error."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from torch import nn

from normlab import ModelConfig, TransformerLM
from normlab.model import cost
from normlab.model.build import build_model, materialise, resolve_model
from normlab.model.catalogue import FFNS, INITS, NORMS, PLACEMENTS, QK_NORMS

TINY: dict[str, Any] = dict(vocab_size=20, context=16, n_layer=2, d_model=16, n_head=2)
SEED = 1234


def _cases() -> list[Any]:
    cases = []
    for p in PLACEMENTS.names():
        for init in INITS.names():
            cases.append(pytest.param(dict(placement=p, init=init), id=f"{p}-{init}"))
        # RoPE, a gated FFN, an untied head, RMSNorm without biases, dropout: the other half of the options
        cases.append(pytest.param(dict(placement=p, norm="rmsnorm", pos="rope", ffn="swiglu", bias=False,
                                       tie_embeddings=False, dropout=0.1), id=f"{p}-rope-untied"))
    for n in NORMS.names():
        cases.append(pytest.param(dict(placement="pre", norm=n), id=f"norm-{n}"))
        cases.append(pytest.param(dict(placement="sandwich", norm=n, bias=False, n_layer=3), id=f"norm-{n}-nobias"))
    for q in QK_NORMS.names():
        cases.append(pytest.param(dict(placement="pre", qk_norm=q, qkv_norm=q != "l2"), id=f"qk-{q}"))
        cases.append(pytest.param(dict(placement="ngpt", qk_norm=q, pos="rope"), id=f"qk-{q}-ngpt"))
    for f in FFNS.names():
        cases.append(pytest.param(dict(placement="pre", ffn=f, dropout=0.2, pos="rope"), id=f"ffn-{f}"))
    return cases + [
        pytest.param(dict(placement={"name": "admin", "omega": "closed_form"}), id="admin-closed-form"),
        pytest.param(dict(placement={"name": "admin", "omega": "profile"}, init="xavier", n_layer=3), id="admin-profile"),
        pytest.param(dict(placement={"name": "none", "rezero": True}), id="rezero"),
        pytest.param(dict(placement={"name": "sandwich", "embed_norm": True}), id="peri-ln"),
        pytest.param(dict(placement={"name": "keel", "alpha": "blocks"}, norm="rmsnorm"), id="keel-blocks"),
        pytest.param(dict(placement="mix", n_layer=3), id="layout-mix"),
        pytest.param(dict(placement=[{"attn": "pre", "ffn": "post"}, {"attn": "layerscale", "ffn": "admin"}]),
                     id="per-sublayer"),
        pytest.param(dict(placement=["normformer", "subln", "hybridnorm"], n_layer=3), id="per-layer"),
        pytest.param(dict(placement="pre", n_head=4, n_kv_head=2, pos="rope", qk_norm="rmsnorm",
                          qk_norm_span="full"), id="gqa-full-span"),
        pytest.param(dict(placement="pre", d_head=4, qk_norm="l2", final_norm=False), id="d_head-l2"),
        pytest.param(dict(placement="pre", pos="rope", sliding_window=4, rope_local_base=100.0, attn_scale=0.3),
                     id="sliding-window"),
        pytest.param(dict(placement="post_branch", n_layer=3, d_model=32, n_head=4, dropout=0.3,
                          tie_embeddings=False, final_norm=True), id="wider-untied"),
    ]


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor a model holds: its state_dict, its buffers (non-persistent ones too) and its parameters."""
    return {**{f"state:{k}": v for k, v in model.state_dict().items()},
            **{f"buffer:{k}": v for k, v in model.named_buffers()},
            **{f"param:{k}": v for k, v in model.named_parameters()}}


def _assert_same(cfg: ModelConfig, plan: Any = None) -> TransformerLM:
    torch.manual_seed(SEED)
    direct = TransformerLM(cfg)
    rng_direct = torch.get_rng_state()
    meta = cost.meta_model(cfg, plan)  # the pre-flight's model
    assert all(t.is_meta for t in _state(meta).values())
    torch.manual_seed(SEED)
    built = materialise(meta, "cpu")
    assert built is meta  # the one model, now on the CPU
    a, b = _state(direct), _state(built)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].requires_grad == b[k].requires_grad, k
        assert torch.equal(a[k], b[k]), k
    assert torch.equal(rng_direct, torch.get_rng_state())  # training draws the same numbers after
    assert (built.lm_head.weight is built.wte.weight) == cfg.tie_embeddings
    # buffers and structure the state_dict does not show: the same model computes the same logits
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.context), generator=torch.Generator().manual_seed(0))
    direct.eval(), built.eval()
    assert torch.equal(direct(idx)[0], built(idx)[0])
    return built


@pytest.mark.parametrize("options", _cases())
def test_materialised_equals_direct_build(options: dict[str, Any]) -> None:
    _assert_same(ModelConfig(**{**TINY, **options}))


def test_materialised_with_a_resolved_plan_and_a_later_vocabulary() -> None:
    """The training run's path: the plan resolved once, the vocabulary fixed by the corpus after."""
    cfg = ModelConfig(**{**TINY, "placement": "admin", "pos": "rope"})
    plan = resolve_model(cfg)
    later = dataclasses.replace(cfg, vocab_size=23)
    built = _assert_same(later, plan.for_config(later))
    assert built.wte.weight.shape == (23, 16)


def test_materialise_equals_build_model_then_to() -> None:
    """What train/run.py does today: seed, build_model(cfg).to(device)."""
    cfg = ModelConfig(**{**TINY, "placement": "ngpt", "ffn": "swiglu"})
    torch.manual_seed(SEED)
    direct = build_model(cfg).to("cpu")
    meta = cost.meta_model(cfg)
    torch.manual_seed(SEED)
    built = materialise(meta, torch.device("cpu"))
    assert all(torch.equal(v, _state(built)[k]) for k, v in _state(direct).items())


def test_the_replayed_draws_matter() -> None:
    """The RNG check above can fail: without the default draws of nn.Linear/nn.Embedding the
    generator ends elsewhere (so the numbers drawn after construction would differ)."""
    cfg = ModelConfig(**TINY)
    torch.manual_seed(SEED)
    TransformerLM(cfg)
    after_build = torch.get_rng_state()
    torch.manual_seed(SEED)
    with torch.device("meta"):
        TransformerLM(cfg)  # building on meta draws nothing ...
    assert not torch.equal(after_build, torch.get_rng_state())  # ... so materialise must draw for it


class NoReset(nn.Module):
    """A planted module with a parameter set in __init__ and no reset_parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.ones(3))


class HalfReset(nn.Module):
    """A planted module whose reset_parameters forgets one of its tensors (a buffer)."""

    def __init__(self) -> None:
        super().__init__()
        self.g = nn.Parameter(torch.empty(3))
        self.register_buffer("table", torch.empty(4), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.g.fill_(1.0)  # and no word of table


def _meta() -> TransformerLM:
    return cost.meta_model(ModelConfig(**TINY))


def test_a_module_without_reset_is_refused_before_any_draw() -> None:
    meta = _meta()
    with torch.device("meta"):
        meta.blocks[1].ffn.planted = NoReset()
    torch.manual_seed(SEED)
    before = torch.get_rng_state()
    with pytest.raises(ValueError, match=r"blocks\.1\.ffn\.planted \(NoReset\).*reset_parameters"):
        materialise(meta, "cpu")
    assert torch.equal(before, torch.get_rng_state())
    assert all(t.is_meta for t in _state(meta).values())  # untouched: still the meta model
    trained = materialise(_meta(), "cpu")
    with torch.device("meta"):
        trained.blocks[1].ffn.planted = NoReset()
    before = torch.get_rng_state()
    with pytest.raises(ValueError, match=r"blocks\.1\.ffn\.planted \(NoReset\)"):
        materialise(trained, "cpu")  # a real model is refused as well, before any draw
    assert torch.equal(before, torch.get_rng_state())


def test_a_forgotten_tensor_is_named() -> None:
    meta = _meta()
    with torch.device("meta"):
        meta.blocks[0].attn.planted = HalfReset()
    with pytest.raises(RuntimeError, match=r"blocks\.0\.attn\.planted\.table not written") as e:
        materialise(meta, "cpu")
    assert "planted.g" not in str(e.value)  # the tensor its reset writes is not blamed


def test_materialising_again_restores_the_initial_values_in_place() -> None:
    """The divergence replay's restart: the trained model materialised again under the same seed
    is the direct build once more, in the same Parameter objects (its optimizer stays valid)."""
    cfg = ModelConfig(**{**TINY, "placement": "admin", "pos": "rope", "ffn": "swiglu"})
    torch.manual_seed(SEED)
    model = materialise(cost.meta_model(cfg), "cpu")
    params = dict(model.named_parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.context))
    model(idx, idx)[1].backward()
    opt.step()
    model.blocks[0].attn.omega.fill_(7.0)
    torch.manual_seed(SEED)
    direct = TransformerLM(cfg)
    rng_direct = torch.get_rng_state()
    assert not torch.equal(direct.wte.weight, model.wte.weight)  # the step moved it
    torch.manual_seed(SEED)
    assert materialise(model, "cpu") is model
    assert torch.equal(rng_direct, torch.get_rng_state())
    a, b = _state(direct), _state(model)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert all(p is params[n] for n, p in model.named_parameters())
    assert model.lm_head.weight is model.wte.weight
    assert {id(p) for g in opt.param_groups for p in g["params"]} == {id(p) for p in params.values()}


def test_another_implementation_is_refused() -> None:
    """model.impl other than the lab's: the pre-flight still counts a TransformerLM, but the
    model that trains is another implementation's, built directly."""
    meta = cost.meta_model(ModelConfig(**{**TINY, "impl": "hf-gpt2"}))
    with pytest.raises(ValueError, match=r"model\.impl='hf-gpt2'.*build_model"):
        materialise(meta, "cpu")
    with pytest.raises(TypeError, match="expected a TransformerLM built on the meta device, got Linear"):
        materialise(nn.Linear(2, 2), "cpu")
