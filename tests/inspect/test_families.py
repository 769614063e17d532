"""Qwen3, OLMo-3, Gemma 2 and Gemma 3 (tiny random configs built locally, never downloaded):
`normlab inspect` names family and placement; import gives transformers' logits (< 1e-4 in
float32) and every option it maps (window, RoPE bases, soft-caps, embedding scale, query
scale) changes the logits when dropped; lab models of each shape export with parity; what
the lab cannot compute is refused in one line naming it."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

from normlab.cli import main  # noqa: E402
from normlab.core.errors import UserError  # noqa: E402
from normlab.model.config import ModelConfig  # noqa: E402
from normlab.model.transformer import TransformerLM  # noqa: E402

transformers = pytest.importorskip("transformers")
from normlab.inspect.export import TOLERANCE, export_model  # noqa: E402
from normlab.model.hf_export import family_for  # noqa: E402
from normlab.model.interop import from_hf  # noqa: E402

NEW = {  # tiny family -> (first line of `normlab inspect`, transformers class, options import must map)
    "qwen3": ("family Qwen3; placement pre; norm rmsnorm; QK-norm", "Qwen3ForCausalLM",
              dict(qk_norm="rmsnorm", qk_norm_span="head", d_head=16, sliding_window=8, window_layers=[2])),
    "olmo3": ("family OLMo-3; placement post_branch; norm rmsnorm; QK-norm", "Olmo3ForCausalLM",
              dict(qk_norm="rmsnorm", qk_norm_span="full", sliding_window=8, window_layers=[1], rope_base=1000.0,
                   rope_local_base=50.0)),
    "gemma2": ("family Gemma 2; placement sandwich; norm rmsnorm_1p", "Gemma2ForCausalLM",
               dict(norm="rmsnorm_1p", ffn="geglu", d_head=16, attn_scale=12 ** -0.5, attn_softcap=50.0,
                    logit_softcap=5.0, embed_scale=32 ** 0.5, sliding_window=8, window_layers=[1])),
    "gemma3": ("family Gemma 3; placement sandwich; norm rmsnorm_1p; QK-norm", "Gemma3ForCausalLM",
               dict(norm="rmsnorm_1p", qk_norm="rmsnorm_1p", ffn="geglu", d_head=16, attn_scale=12 ** -0.5,
                    embed_scale=32 ** 0.5, sliding_window=8, window_layers=[1], rope_base=1000.0,
                    rope_local_base=50.0)),
}
IDS = torch.randint(0, tiny.VOCAB, (3, 24), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("family", NEW)
def test_inspect_names_family_and_placement(family: str, data_dir: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    corpus = (data_dir / "tinyshakespeare.txt").read_text(encoding="utf-8")
    model = tiny.save(family, corpus, tmp_path / family)
    out = tmp_path / "out"
    assert main(["inspect", str(model), "--out", str(out), "--context", "32", "--max-tokens", "64", "--quiet"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(NEW[family][0]) and "inspect-only" not in first, first
    summary = json.loads((out / "summary.json").read_text())
    # a random model: near ln(320) = 5.8 nats; Gemma's larger test weights put it somewhat above
    assert summary["importable"] and summary["n_layer"] == 2 and 3.0 < summary["loss"] < 3 * math.log(tiny.VOCAB)


@pytest.mark.parametrize("family", NEW)
def test_import_matches_transformers_and_every_option_counts(family: str) -> None:
    hf = tiny.hf_model(family)
    ours = from_hf(hf).eval()
    for key, value in NEW[family][2].items():
        got = getattr(ours.cfg, key)
        assert (got == pytest.approx(value)) if isinstance(value, float) else got == value, (key, got)
    with torch.no_grad():
        ref = hf(IDS).logits
        assert ref.abs().max() > 0.1  # not a trivially small output
        diff = (ours(IDS)[0] - ref).abs().max().item()
        print(f"{family}: import max |logit diff| {diff:.2e}")
        assert diff < 1e-4
        # Each option the import maps, dropped, breaks the match: none of them is decoration.
        for key in ("sliding_window", "rope_local_base", "attn_softcap", "logit_softcap", "embed_scale", "attn_scale"):
            if getattr(ours.cfg, key) is None:
                continue
            drop: dict = {key: None}
            if key == "sliding_window":
                drop.update(window_layers=None, rope_local_base=None)
            other = TransformerLM(dataclasses.replace(ours.cfg, **drop)).eval()
            other.load_state_dict(ours.state_dict())
            assert (other(IDS)[0] - ref).abs().max() > 1e-3, key


def test_gemma_with_the_exact_gelu_imports_as_activation_gelu() -> None:
    """Gemma's GeGLU is the tanh GELU; a config naming transformers' exact "gelu" imports as
    ``model.activation = "gelu"`` with transformers' logits, and differs from the tanh import."""
    cfg = tiny.hf_config("gemma2")
    assert from_hf(transformers.Gemma2ForCausalLM(cfg)).cfg.activation == "gelu_tanh"
    cfg.hidden_activation = "gelu"
    hf = transformers.Gemma2ForCausalLM(cfg).eval()
    ours = from_hf(hf).eval()
    assert ours.cfg.activation == "gelu"
    tanh = TransformerLM(dataclasses.replace(ours.cfg, activation="gelu_tanh")).eval()
    tanh.load_state_dict(ours.state_dict())
    with torch.no_grad():
        ref = hf(IDS).logits
        assert (ours(IDS)[0] - ref).abs().max() < 1e-4 < (tanh(IDS)[0] - ref).abs().max()


def lab_model(fields: dict) -> TransformerLM:
    """A random lab model of the given shape, norm gains moved off their init so their mapping matters."""
    torch.manual_seed(0)
    base = dict(vocab_size=65, context=32, n_layer=2, d_model=32, n_head=4, n_kv_head=2, pos="rope", bias=False,
                norm_eps=1e-6, ffn="swiglu", tie_embeddings=False, init="xavier", embed_scale=1.0)
    model = TransformerLM(ModelConfig(**{**base, **fields})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    return model


SHAPES = {  # lab config -> (model_type, transformers class)
    "qwen3": (dict(placement="pre", norm="rmsnorm", qk_norm="rmsnorm", d_head=16, sliding_window=6,
                   window_layers=[2]), "Qwen3ForCausalLM"),
    "mistral": (dict(placement="pre", norm="rmsnorm", sliding_window=6), "MistralForCausalLM"),
    "olmo3": (dict(placement="post_branch", norm="rmsnorm", qk_norm="rmsnorm", qk_norm_span="full", sliding_window=6,
                   window_layers=[1], rope_local_base=50.0), "Olmo3ForCausalLM"),
    "gemma2": (dict(placement="sandwich", norm="rmsnorm_1p", ffn="geglu", d_head=16, attn_scale=0.25,
                    attn_softcap=0.5, logit_softcap=2.0, embed_scale=32 ** 0.5, sliding_window=6, window_layers=[1],
                    tie_embeddings=True), "Gemma2ForCausalLM"),
    "gemma3_text": (dict(placement="sandwich", norm="rmsnorm_1p", qk_norm="rmsnorm_1p", ffn="geglu",
                         embed_scale=32 ** 0.5, sliding_window=6, window_layers=[1], rope_base=1000.0,
                         rope_local_base=50.0, tie_embeddings=True), "Gemma3ForCausalLM"),
}


@pytest.mark.parametrize("family", SHAPES)
def test_export_loads_in_transformers_with_the_same_logits(family: str, tmp_path: Path) -> None:
    from normlab.data.tokenizers import CharTokenizer
    from normlab.run import checkpoint as ckpt

    fields, cls = SHAPES[family]
    model = lab_model(fields)
    chars = "".join(chr(32 + i) for i in range(65))
    ckpt.save(tmp_path / "ckpt", model, {"step": 0, "tokenizer": CharTokenizer(chars).state()})
    done = export_model(tmp_path / "ckpt", tmp_path / "hf")
    assert (done.family, done.hf_class) == (family, cls) and done.max_logit_diff < TOLERANCE
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    ids = IDS % 65
    with torch.no_grad():
        ours = model(ids)[0]
        assert ours.abs().max() > 0.1
        diff = (hf(input_ids=ids).logits - ours).abs().max().item()
        again = (from_hf(hf).eval()(ids)[0] - ours).abs().max().item()
    print(f"{family}: lab->HF {diff:.2e}, lab->HF->lab {again:.2e}")
    assert diff < TOLERANCE and again < TOLERANCE


REFUSED_EXPORT = [  # lab config -> the refusal's start
    (dict(placement="sandwich", norm="rmsnorm"), "model.norm='rmsnorm': Gemma 2 (placement sandwich"),
    (dict(placement="sandwich", norm="rmsnorm_1p", ffn="swiglu", embed_scale=32 ** 0.5), "model.ffn='swiglu': Gemma 2"),
    (dict(placement="sandwich", norm="rmsnorm_1p", ffn="geglu"), "model.embed_scale=1.0: Gemma 2"),
    (dict(placement="sandwich", norm="rmsnorm_1p", ffn="geglu", embed_scale=32 ** 0.5, attn_scale=0.3),
     "model.attn_scale=0.3: Gemma 2"),  # query_pre_attn_scalar is an integer: 0.3^-2 is not
    (dict(placement="pre", norm="rmsnorm", logit_softcap=30.0), "model.logit_softcap=30.0: Llama"),
    (dict(placement="pre", norm="rmsnorm", qk_norm="layernorm"), "model.qk_norm='layernorm': Qwen3"),
    (dict(placement="post_branch", norm="rmsnorm", qk_norm="rmsnorm", sliding_window=6, window_layers=[1]),
     "model.qk_norm_span='head': OLMo-3"),
    (dict(placement="pre", norm="rmsnorm", embed_scale=None), "model.embed_scale=None (resolved: 5.65"),
]


@pytest.mark.parametrize("fields,reason", REFUSED_EXPORT, ids=[r[1].split(":")[0] for r in REFUSED_EXPORT])
def test_export_refuses_what_no_class_computes(fields: dict, reason: str) -> None:
    with pytest.raises(UserError) as e:
        family_for(lab_model(fields).cfg)
    assert str(e.value).startswith(reason) and "\n" not in str(e.value), str(e.value)


def test_import_refuses_what_the_lab_cannot_compute() -> None:
    cfg = tiny.hf_config("gemma3")
    cfg.use_bidirectional_attention = True
    with pytest.raises(UserError, match=r"^Gemma3TextConfig.use_bidirectional_attention=True: "):
        from_hf(transformers.Gemma3ForCausalLM(cfg))
    cfg = tiny.hf_config("gemma3")  # Gemma 3 4B and larger scale the global RoPE linearly
    cfg.rope_parameters["full_attention"] = {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000.0}
    with pytest.raises(UserError, match=r"^rope_type='linear' \(full_attention\): "):
        from_hf(transformers.Gemma3ForCausalLM(cfg))
    cfg = tiny.hf_config("qwen3")
    cfg.attention_bias = True
    with pytest.raises(UserError, match=r"^Qwen3Config.attention_bias=True: "):
        from_hf(transformers.Qwen3ForCausalLM(cfg))
    cfg = tiny.hf_config("gemma2")  # the exact GELU imports (model.activation = "gelu"); no other activation
    cfg.hidden_activation = "relu"
    with pytest.raises(UserError, match=r"^Gemma2Config.hidden_activation='relu': "):
        from_hf(transformers.Gemma2ForCausalLM(cfg))
