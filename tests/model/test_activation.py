"""``model.activation``: the GELU of the MLP and GeGLU, a checked name; what each name computes
by hand; GPT-2 and Gemma import their tanh GELU explicitly; a stored config written before the
option existed reads as the tanh GELU whatever today's default; export writes a GELU
transformers computes the same way."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from normlab.core.errors import ConfigError
from normlab.core.schema import from_dict, to_dict
from normlab.model.attention import MLP, GeGLU, SwiGLU
from normlab.model.build import resolve_model
from normlab.model.catalogue import ACTIVATIONS
from normlab.model.config import ModelConfig
from normlab.model.io import load_config, save_model
from normlab.model.transformer import TransformerLM
from normlab.run.config import RunConfig

SMALL = dict(vocab_size=40, context=16, n_layer=2, d_model=16, n_head=2)


def by_hand(name: str, h: torch.Tensor) -> torch.Tensor:
    if name == "gelu":  # x Phi(x), Phi the standard normal CDF
        return h * 0.5 * (1 + torch.erf(h / math.sqrt(2)))
    return 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))  # GPT-2's gelu_new


def test_the_names_are_the_two_gelus_and_a_typo_lists_them() -> None:
    assert ACTIVATIONS.names() == ["gelu", "gelu_tanh"]
    cfg = ModelConfig(**SMALL, activation="gelu_approx")
    for build in (resolve_model, TransformerLM):
        with pytest.raises(ConfigError) as e:
            build(cfg)
        assert str(e.value).startswith("model.activation='gelu_approx'") and "gelu, gelu_tanh" in str(e.value)
    with pytest.raises(ConfigError, match="model.activation"):  # checked with an FFN that has no GELU too
        resolve_model(dataclasses.replace(cfg, ffn="swiglu"))


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh"])
@pytest.mark.parametrize("cls", [MLP, GeGLU])
def test_each_name_computes_its_formula(name: str, cls: type) -> None:
    torch.manual_seed(0)
    m = cls(ModelConfig(**SMALL, activation=name))
    x = 2 * torch.randn(3, 5, 16)  # wide enough that the two GELUs differ beyond float noise
    h = x @ m.fc.weight.T + m.fc.bias
    if cls is GeGLU:
        gate, up = h.chunk(2, -1)
        h = by_hand(name, gate) * up
    else:
        h = by_hand(name, h)
    ref = h @ m.proj.weight.T + m.proj.bias
    other = by_hand("gelu_tanh" if name == "gelu" else "gelu", x @ m.fc.weight.T + m.fc.bias)
    with torch.no_grad():
        y = m(x)
    assert torch.allclose(y, ref, atol=1e-6, rtol=0)
    if cls is MLP:  # the other GELU is measurably another function here: the test can tell them apart
        assert (other @ m.proj.weight.T + m.proj.bias - ref).abs().max() > 1e-5


def test_swiglu_keeps_its_silu_gate() -> None:
    assert not SwiGLU.reads_activation and MLP.reads_activation and GeGLU.reads_activation
    torch.manual_seed(0)
    a = SwiGLU(ModelConfig(**SMALL, ffn="swiglu", activation="gelu"))
    torch.manual_seed(0)
    b = SwiGLU(ModelConfig(**SMALL, ffn="swiglu", activation="gelu_tanh"))
    x = torch.randn(2, 4, 16)
    assert torch.equal(a(x), b(x))


def test_a_stored_config_without_the_key_reads_the_tanh_gelu(tmp_path) -> None:
    """Runs and saved models written before the option existed computed the tanh GELU; they
    keep it however the default moves. User input without the key gets the default."""
    old = {k: v for k, v in to_dict(ModelConfig(**SMALL)).items() if k != "activation"}
    assert "activation" not in old
    assert from_dict(ModelConfig, ModelConfig.upgrade(old), "model.").activation == "gelu_tanh"
    run = to_dict(RunConfig())
    run["model"].pop("activation", None)
    assert RunConfig.from_json(json.dumps(run)).model.activation == "gelu_tanh"
    (tmp_path / "model_config.json").write_text(json.dumps(old))
    assert load_config(tmp_path).activation == "gelu_tanh"
    assert from_dict(ModelConfig, old, "model.").activation == ModelConfig().activation  # user input
    # A key that is there is read as written, whichever GELU it names.
    for name in ("gelu", "gelu_tanh"):
        cfg = ModelConfig(**SMALL, activation=name)
        assert RunConfig.from_json(RunConfig(model=cfg).to_json()).model.activation == name
        save_model(TransformerLM(cfg), tmp_path / name)
        assert load_config(tmp_path / name).activation == name


def test_gpt2_import_sets_the_tanh_gelu_and_export_writes_what_transformers_computes() -> None:
    transformers = pytest.importorskip("transformers")
    from normlab.model.hf_export import family_for, max_logit_diff, to_hf
    from normlab.model.interop import config_from_hf, from_hf

    hf_cfg = transformers.GPT2Config(vocab_size=40, n_positions=16, n_embd=16, n_layer=2, n_head=2)
    assert hf_cfg.activation_function == "gelu_new" and config_from_hf(hf_cfg).activation == "gelu_tanh"
    hf_cfg.activation_function = "gelu_pytorch_tanh"
    assert config_from_hf(hf_cfg).activation == "gelu_tanh"
    hf_cfg.activation_function = "gelu"
    assert config_from_hf(hf_cfg).activation == "gelu"
    ids = torch.randint(0, 40, (2, 16), generator=torch.Generator().manual_seed(0))
    for name, written in (("gelu_tanh", "gelu_new"), ("gelu", "gelu")):
        torch.manual_seed(0)
        model = TransformerLM(ModelConfig(**SMALL, activation=name)).eval()
        with torch.no_grad():
            for p in model.parameters():  # weights large enough that the two GELUs differ in the logits
                p.mul_(8.0)
        assert family_for(model.cfg) == "gpt2"
        hf = to_hf(model)
        assert hf.config.activation_function == written
        assert max_logit_diff(model, hf, ids) < 1e-5
        assert from_hf(hf).cfg.activation == name
        hf.config.activation_function = "gelu_new" if name == "gelu" else "gelu"  # the other GELU: told apart
        other = transformers.GPT2LMHeadModel(hf.config).eval()
        other.load_state_dict(hf.state_dict())
        assert max_logit_diff(model, other, ids) > 1e-4


def test_swiglu_export_ignores_the_option_and_gemma_maps_both_gelus() -> None:
    pytest.importorskip("transformers")
    from normlab.model.hf_export import family_for, hf_config
    from normlab.model.interop import llama_config_from_hf

    llama = dict(SMALL, pos="rope", norm="rmsnorm", ffn="swiglu", bias=False, tie_embeddings=False, init="xavier",
                 embed_scale=1.0)
    for name in ("gelu", "gelu_tanh"):  # a stored SwiGLU config reads gelu_tanh: still a Llama
        assert family_for(ModelConfig(**llama, activation=name)) == "llama"
    gemma = dict(SMALL, pos="rope", norm="rmsnorm_1p", ffn="geglu", bias=False, placement="sandwich",
                 embed_scale=16 ** 0.5, tie_embeddings=True)
    for name, written in (("gelu_tanh", "gelu_pytorch_tanh"), ("gelu", "gelu")):
        cfg = ModelConfig(**gemma, activation=name)
        assert family_for(cfg) == "gemma2"
        hf = hf_config(cfg, "gemma2")
        assert hf.hidden_activation == written and llama_config_from_hf(hf).activation == name


def test_lab_models_default_to_the_exact_gelu_and_every_config_writes_its_gelu() -> None:
    """The default is nanoGPT's and PyTorch's exact GELU (issue 42). The key is always written:
    a stored table without it reads as the tanh GELU, so leaving it out would change the model."""
    from normlab.model.attention import gelu

    cfg = ModelConfig(**SMALL)
    assert cfg.activation == "gelu" and TransformerLM(cfg).blocks[0].ffn.branch.act is gelu
    for name in ("gelu", "gelu_tanh"):
        assert to_dict(ModelConfig(**SMALL, activation=name))["activation"] == name
