"""Config system: TOML/JSON round trips, every validation error path, --set parsing."""

from __future__ import annotations

import dataclasses
import json

import pytest

from normlab.core.coerce import parse_text
from normlab.core.errors import ConfigError, UserError
from normlab.core.schema import apply_overrides, dotted_keys, explain, to_dict
from normlab.data.config import DataConfig
from normlab.model.config import ModelConfig
from normlab.run.presets import PRESETS
from normlab.run.resolve import RunConfig, load_toml, resolve
from normlab.run.train_config import OptimConfig, TrainConfig

TOML = """
seed = 7
name = "roundtrip"
[model]
n_layer = 3
d_model = 64
n_head = 4
placement = ["post", {attn = "pre", ffn = "post"}, "sandwich"]
qk_norm = "rmsnorm"
d_ff = 96
[optim]
lr = 3e-4
schedule = "inverse_sqrt"
warmup_steps = 0
[train]
steps = 10
batch_size = 4
[data]
tokenizer = "byte"
"""


def test_toml_dataclass_json_roundtrip(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(TOML)
    cfg = resolve(config=path)
    assert cfg.model.placement == ["post", {"attn": "pre", "ffn": "post"}, "sandwich"]
    assert cfg.model.d_ff == 96 and cfg.optim.lr == 3e-4 and cfg.data.tokenizer == "byte"
    again = RunConfig.from_json(cfg.to_json())
    assert again == cfg
    assert json.loads(again.to_json()) == to_dict(cfg)


def test_every_preset_is_valid_and_roundtrips():
    assert len(PRESETS) >= 4
    for name, fn in PRESETS.items():
        cfg = fn()
        assert isinstance(cfg, RunConfig), name
        assert RunConfig.from_json(cfg.to_json()) == cfg, name


def test_resolution_order_preset_toml_placement_set(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[model]\nn_layer = 5\nplacement = "post"\n')
    cfg = resolve("nanogpt-cpu", path, "sandwich", ["model.n_layer=7"])
    assert cfg.model.d_model == 128          # from the preset
    assert cfg.model.n_layer == 7            # --set beats the TOML
    assert cfg.model.placement == "sandwich"  # --placement beats the TOML


@pytest.mark.parametrize("text,tp,expected", [
    ("12", int, 12),
    ("3e-4", float, 3e-4),
    ("2", float, 2.0),
    ("true", bool, True),
    ("false", bool, False),
    ("post", str, "post"),
    ('"post"', str, "post"),
    ("none", int | None, None),
    ("null", str | None, None),
    ("64", int | None, 64),
    ('["post","pre"]', ModelConfig.__dataclass_fields__["placement"].type, ["post", "pre"]),
])
def test_parse_text_by_type(text, tp, expected):
    if isinstance(tp, str):  # the placement annotation is a forward reference
        import typing

        tp = typing.get_type_hints(ModelConfig)["placement"]
    assert parse_text(text, tp, "k") == expected


def test_override_placement_list_and_table():
    data = apply_overrides(RunConfig, {}, ['model.placement=[{attn="pre", ffn="post"}, "pre"]',
                                           "model.n_layer=2"])
    cfg = RunConfig.from_dict(data)
    assert cfg.model.placement == [{"attn": "pre", "ffn": "post"}, "pre"]


@pytest.mark.parametrize("override,field", [
    ("model.n_layer=abc", "model.n_layer"),
    ("optim.lr=fast", "optim.lr"),
    ("train.compile=maybe", "train.compile"),
    ("model.d_ff=1.5", "model.d_ff"),
])
def test_override_type_errors_name_the_field(override, field):
    with pytest.raises(ConfigError) as e:
        resolve(overrides=[override])
    assert e.value.field == field
    assert str(e.value).startswith(field)


def test_unknown_key_suggests_closest():
    with pytest.raises(ConfigError, match=r"model.n_layr: no such option; did you mean 'model.n_layer'"):
        resolve(overrides=["model.n_layr=3"])
    with pytest.raises(ConfigError, match="did you mean 'optim.warmup_steps'"):
        resolve(overrides=["optim.warmup=3"])
    with pytest.raises(ConfigError, match="write it as dotted.key=value"):
        resolve(overrides=["model.n_layer"])


def test_unknown_key_in_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[model]\nnlayer = 3\n")
    with pytest.raises(ConfigError, match="did you mean 'model.n_layer'"):
        resolve(config=path)
    path.write_text("[modle]\nn_layer = 3\n")
    with pytest.raises(ConfigError, match="did you mean 'model'"):
        resolve(config=path)


def test_toml_file_errors(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_toml(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_toml(bad)


def Built(**kw):
    """Names and placement options are checked where the model is built, not by ModelConfig."""
    from normlab.model.build import resolve_model

    return resolve_model(ModelConfig(**kw))


# Every validation rule: (section class, kwargs, dotted field, fragment of the fix).
INVALID = [
    (ModelConfig, {"n_layer": 0}, "model.n_layer", ">= 1"),
    (ModelConfig, {"vocab_size": 0}, "model.vocab_size", ">= 1"),
    (ModelConfig, {"context": 0}, "model.context", ">= 1"),
    (ModelConfig, {"d_model": 0}, "model.d_model", ">= 1"),
    (ModelConfig, {"n_head": 0}, "model.n_head", ">= 1"),
    (ModelConfig, {"d_model": 128, "n_head": 5}, "model.n_head", "must divide model.d_model=128"),
    (ModelConfig, {"d_ff": 0}, "model.d_ff", ">= 1"),
    (ModelConfig, {"dropout": 1.0}, "model.dropout", "[0, 1)"),
    (Built, {"placement": {"name": "mix", "fraction": 1.5}}, "model.placement.fraction", "[0, 1]"),
    (ModelConfig, {"norm_eps": 0.0}, "model.norm_eps", "> 0"),
    (Built, {"placement": {"name": "admin", "omega": "guess"}}, "model.placement.omega", "profile"),
    (Built, {"ffn": "relu2"}, "model.ffn", "gelu or swiglu"),
    (Built, {"activation": "gelu_fast"}, "model.activation", "gelu, gelu_tanh"),
    (ModelConfig, {"pos": "alibi"}, "model.pos", "learned or rope"),
    (ModelConfig, {"pos": "rope", "d_model": 12, "n_head": 4}, "model.pos", "even head dim"),
    (Built, {"norm": "batchnorm"}, "model.norm", "valid: layernorm"),
    (Built, {"qk_norm": "l3"}, "model.qk_norm", "valid: layernorm"),
    (Built, {"impl": "hf"}, "model.impl", "valid: normlab, hf-gpt2"),
    (Built, {"impl": "hf-gpt2", "placement": "post"}, "model.impl", "GPT-2 cannot compute this model: placement post"),
    (ModelConfig, {"qkv_norm": True}, "model.qkv_norm", "set model.qk_norm"),
    (Built, {"init": "kaiming"}, "model.init", "valid: gpt2"),
    (Built, {"placement": "pree"}, "model.placement", "did you mean 'pre'"),
    (Built, {"placement": ["pre"], "n_layer": 2}, "model.placement", "needs model.n_layer=2 entries"),
    (Built, {"placement": [{"attn": "pre"}], "n_layer": 1}, "model.placement[0]", "keys attn and ffn"),
    (Built, {"placement": ["mix"], "n_layer": 1}, "model.placement[0]", "layout for the whole model"),
    (Built, {"placement": [3], "n_layer": 1}, "model.placement[0]", "placement name or a table"),
    (Built, {"placement": {"name": "none", "rezero": 1}}, "model.placement.rezero", "true/false"),
    (Built, {"placement": {"name": "pre", "rezero": True}}, "model.placement.rezero", "has no options"),
    (ModelConfig, {"n_kv_head": 3}, "model.n_kv_head", "must divide model.n_head=4"),
    (Built, {"n_kv_head": 2, "placement": "deepnorm"}, "model.n_kv_head", "set model.n_kv_head=none"),
    (ModelConfig, {"qk_norm_span": "all"}, "model.qk_norm_span", "use head or full"),
    (ModelConfig, {"attn_gate": "sigmoid"}, "model.attn_gate", "use elementwise, headwise or none"),
    (ModelConfig, {"qk_norm_span": "full"}, "model.qk_norm_span", "set model.qk_norm too"),
    (ModelConfig, {"rope_base": 0.0}, "model.rope_base", "> 0"),
    (ModelConfig, {"d_head": 0}, "model.d_head", ">= 1 or none"),
    (ModelConfig, {"attn_scale": -0.1}, "model.attn_scale", "> 0 or none"),
    (Built, {"attn_scale": 0.1, "qk_norm": "l2"}, "model.attn_scale", "learns its own softmax scale"),
    (ModelConfig, {"attn_softcap": 0.0}, "model.attn_softcap", "> 0 or none"),
    (Built, {"param": "mu"}, "model.param", "valid: sp, mup, completep"),
    (ModelConfig, {"base_width": 0}, "model.base_width", ">= 1 or none"),
    (ModelConfig, {"base_depth": 0}, "model.base_depth", ">= 1 or none"),
    (ModelConfig, {"logit_softcap": float("inf")}, "model.logit_softcap", "> 0 or none"),
    (ModelConfig, {"embed_scale": 0.0}, "model.embed_scale", "> 0 or none"),
    (ModelConfig, {"sliding_window": 0}, "model.sliding_window", ">= 1 tokens"),
    (ModelConfig, {"window_layers": [1]}, "model.window_layers", "set model.sliding_window"),
    (ModelConfig, {"sliding_window": 4, "window_layers": [0, 7], "n_layer": 6}, "model.window_layers",
     "blocks are 1..model.n_layer=6, got [0, 7]"),
    (ModelConfig, {"sliding_window": 4, "window_layers": [1, 1]}, "model.window_layers", "each block once"),
    (ModelConfig, {"rope_local_base": 10.0, "pos": "rope"}, "model.rope_local_base", "set model.sliding_window"),
    (ModelConfig, {"rope_local_base": 10.0, "sliding_window": 4}, "model.rope_local_base", "model.pos=rope"),
    (OptimConfig, {"lr": 0.0}, "optim.lr", "> 0"),
    (OptimConfig, {"lr": 1e-3, "min_lr": 1e-2}, "optim.min_lr", "[0, optim.lr"),
    (OptimConfig, {"warmup_steps": -1}, "optim.warmup_steps", ">= 0"),
    (OptimConfig, {"weight_decay": -0.1}, "optim.weight_decay", ">= 0"),
    (OptimConfig, {"beta1": 1.0}, "optim.beta1", "[0, 1)"),
    (OptimConfig, {"beta2": -0.1}, "optim.beta2", "[0, 1)"),
    (OptimConfig, {"eps": 0.0}, "optim.eps", "> 0"),
    (OptimConfig, {"grad_clip": -1.0}, "optim.grad_clip", ">= 0"),
    (OptimConfig, {"z_loss": -1e-4}, "optim.z_loss", ">= 0"),
    (OptimConfig, {"schedule": "cosin"}, "optim.schedule", "did you mean 'cosine'"),
    (OptimConfig, {"name": "adam"}, "optim.name", "did you mean 'adamw'"),
    (OptimConfig, {"muon_lr": 0.0}, "optim.muon_lr", "> 0"),
    (OptimConfig, {"muon_momentum": 1.0}, "optim.muon_momentum", "[0, 1)"),
    (OptimConfig, {"muon_weight_decay": -0.1}, "optim.muon_weight_decay", ">= 0"),
    (OptimConfig, {"muon_adjust_lr": "rms"}, "optim.muon_adjust_lr", "original or match_rms_adamw"),
    (OptimConfig, {"decay_frac": 1.5}, "optim.decay_frac", "(0, 1]"),
    (OptimConfig, {"decay_shape": "cosine"}, "optim.decay_shape", "1-sqrt or linear"),
    (TrainConfig, {"steps": 0}, "train.steps", ">= 1"),
    (TrainConfig, {"batch_size": 0}, "train.batch_size", ">= 1"),
    (TrainConfig, {"grad_accum": 0}, "train.grad_accum", ">= 1"),
    (TrainConfig, {"eval_batches": 0}, "train.eval_batches", ">= 1"),
    (TrainConfig, {"log_every": 0}, "train.log_every", ">= 1"),
    (TrainConfig, {"eval_every": -1}, "train.eval_every", ">= 0"),
    (TrainConfig, {"checkpoint_every": -1}, "train.checkpoint_every", ">= 0"),
    (TrainConfig, {"keep_checkpoints": True, "checkpoint_every": 0}, "train.keep_checkpoints",
     "needs train.checkpoint_every > 0"),
    (TrainConfig, {"diag_every": -1}, "train.diag_every", ">= 0"),
    (TrainConfig, {"diag_every": 10, "sharpness_every": 15}, "train.sharpness_every", "a multiple of train.diag_every"),
    (TrainConfig, {"sharpness_iters": 0}, "train.sharpness_iters", ">= 1"),
    (TrainConfig, {"threads": -1}, "train.threads", ">= 0"),
    (TrainConfig, {"loggers": [" "]}, "train.loggers", "name each logger"),
    (TrainConfig, {"batch_size": 12, "grad_accum": 5}, "train.grad_accum", "must divide train.batch_size=12"),
    (TrainConfig, {"diverge_loss": 0.0}, "train.diverge_loss", "> 0"),
    (TrainConfig, {"device": "tpu"}, "train.device", "auto, cpu, cuda"),
    (TrainConfig, {"dtype": "float16"}, "train.dtype", "float32 or bfloat16"),
    (TrainConfig, {"init_from": " "}, "train.init_from", "a model directory"),
    (DataConfig, {"corpus": ""}, "data.corpus", "name a corpus"),
    (DataConfig, {"tokenizer": "word"}, "data.tokenizer", "char, byte"),
    (DataConfig, {"bpe_vocab": 100}, "data.bpe_vocab", ">= 257"),
    (DataConfig, {"train_fraction": 1.0}, "data.train_fraction", "(0, 1)"),
    (RunConfig, {"seed": -1}, "seed", ">= 0"),
]


@pytest.mark.parametrize("cls,kwargs,field,fix", INVALID, ids=[f"{r[2]}-{i}" for i, r in enumerate(INVALID)])
def test_validation_errors_name_field_value_and_fix(cls, kwargs, field, fix):
    with pytest.raises(ConfigError) as e:
        cls(**kwargs)
    assert e.value.field == field
    assert fix in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_every_validated_field_has_an_invalid_case():
    """Guards the table above: each documented field of each section is either exercised
    by INVALID or listed here as accepting any value of its type."""
    free = {"model.bias", "model.tie_embeddings", "model.final_norm",
            "data.data_dir", "train.compile", "name", "optim.muon_nesterov"}
    covered = {f.split("[")[0] for _, _, f, _ in INVALID}
    for key in dotted_keys(RunConfig):
        assert key in covered or key in free, f"no invalid-value test for {key}"


def test_every_field_is_documented():
    for key, _, _, help in explain(RunConfig):
        assert help, f"{key} has no help text"


def test_dataclass_defaults_are_valid():
    cfg = RunConfig()
    assert dataclasses.asdict(cfg)["model"]["placement"] == "pre"


@pytest.mark.parametrize("key,value,new", [("mix_fraction", "0.5", '{name = "mix", fraction = 0.25}'),
                                           ("admin_omega", "closed_form", '{name = "admin", omega = "profile"}'),
                                           ("rezero", "true", '{name = "none", rezero = true}')])
def test_moved_options_fail_naming_the_new_spelling(tmp_path, key, value, new):
    """Placement options live with their placement; the old model.* keys say where they went."""
    with pytest.raises(ConfigError) as e:
        resolve(overrides=[f"model.{key}={value}"])
    assert str(e.value) == f"model.{key}: no longer an option of its own; write model.placement = {new}"
    toml = tmp_path / "old.toml"
    toml.write_text(f"[model]\n{key} = {value if value in ('true', '0.5') else repr(value)}\n".replace("'", '"'))
    with pytest.raises(ConfigError, match=rf"^model\.{key}: no longer an option of its own; write model\.placement"):
        resolve(config=toml)


def test_stored_configs_with_moved_options_still_load():
    """A run directory written before the move reads back with the options in their new place."""
    old = json.loads(RunConfig().to_json())
    old["model"].update(placement="admin", admin_omega="closed_form", mix_fraction=0.25, rezero=False)
    cfg = RunConfig.from_json(json.dumps(old))
    assert cfg.model.placement == {"name": "admin", "omega": "closed_form"}
    old["model"].update(placement=["none", {"attn": "mix", "ffn": "pre"}], admin_omega="profile", rezero=True)
    cfg = RunConfig.from_json(json.dumps(old))
    assert cfg.model.placement == [{"name": "none", "rezero": True}, {"attn": "mix", "ffn": "pre"}]


def test_help_lists_the_names_its_registry_holds():
    """Help texts that list names read them from the registry, so a new name shows up."""
    from normlab.model.catalogue import NORMS

    NORMS.add("test_norm", NORMS.get("layernorm"))
    try:
        helps = {key: help for key, _, _, help in explain(RunConfig)}
    finally:
        NORMS.remove("test_norm")
    assert "test_norm" in helps["model.norm"] and "{names}" not in helps["model.norm"]
    assert "tensorboard" in helps["train.loggers"] and "jsonl" not in helps["train.loggers"].split(": ")[-1]


def test_family_options_leave_old_configs_unchanged() -> None:
    """The options Gemma, Qwen3 and OLMo-3 brought are left out of a config's JSON while unset
    (so stored configs and study trial ids stay as they were) and written once set."""
    new = ("d_head", "attn_scale", "attn_softcap", "logit_softcap", "embed_scale", "sliding_window",
           "window_layers", "rope_local_base")
    assert not set(new) & set(ModelConfig().to_dict())
    from normlab.core.coerce import parse_text

    window = parse_text("[1, 3]", list[int] | None, "model.window_layers")
    cfg = ModelConfig(n_layer=4, sliding_window=8, window_layers=window, d_head=16)
    assert cfg.to_dict()["window_layers"] == [1, 3] and cfg.to_dict()["d_head"] == 16
    assert [cfg.windowed(i) for i in (1, 2, 3, 4)] == [True, False, True, False]
    from normlab.core.schema import from_dict

    assert cfg.q_width == 4 * 16 and from_dict(ModelConfig, cfg.to_dict()) == cfg
