"""`normlab export`: tiny random GPT-2-, Llama- (GQA) and OLMo-2-shaped lab models, saved with the
lab's checkpoint route, load with AutoModelForCausalLM and give the lab's logits (< 1e-4 in
float32), and import back (``from_hf``) to the same logits; a planted difference in a weight or a
config field is detected; models no transformers class computes are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from normlab.cli import main
from normlab.core.errors import UserError
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM

transformers = pytest.importorskip("transformers")
from normlab.inspect.export import TOLERANCE, export_model  # noqa: E402
from normlab.model.hf_export import family_for, max_logit_diff, to_hf  # noqa: E402

CHARS = "\n !&',-.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # 65, as Tiny Shakespeare
BASE = dict(vocab_size=len(CHARS), context=32, n_layer=2, d_model=32, n_head=4)
SHAPES = {  # family -> (lab config, transformers class)
    "gpt2": (dict(placement="pre", norm="layernorm", ffn="gelu", pos="learned", bias=True, d_ff=48, norm_eps=1e-5),
             "GPT2LMHeadModel"),
    "llama": (dict(placement="pre", norm="rmsnorm", ffn="swiglu", pos="rope", bias=False, n_kv_head=2,
                   rope_base=500.0, norm_eps=1e-6, tie_embeddings=False), "LlamaForCausalLM"),
    "olmo2": (dict(placement="post_branch", norm="rmsnorm", ffn="swiglu", pos="rope", bias=False, n_kv_head=2,
                   qk_norm="rmsnorm", qk_norm_span="full", rope_base=500.0, norm_eps=1e-6, tie_embeddings=False),
              "Olmo2ForCausalLM"),
}


def lab_model(family_or_cfg: str | dict, seed: int = 0) -> TransformerLM:
    """A random model, its norm gains and biases moved off (1, 0) so their mapping matters."""
    fields = SHAPES[family_or_cfg][0] if isinstance(family_or_cfg, str) else family_or_cfg
    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(**{**BASE, **fields})).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith(".bias"):
                p.add_(0.3 * torch.randn_like(p))
    return model


def checkpoint(model: TransformerLM, folder: Path) -> Path:
    """The lab's own save route: a training checkpoint with the char tokenizer's state."""
    from normlab.data.tokenizers import CharTokenizer
    from normlab.run import checkpoint as ckpt

    ckpt.save(folder, model, {"step": 0, "tokenizer": CharTokenizer(CHARS).state()})
    return folder


IDS = torch.randint(0, len(CHARS), (3, 24), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("family", SHAPES)
def test_round_trip_lab_to_transformers_to_lab(family: str, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from normlab.model.interop import from_hf

    model = lab_model(family)
    done = export_model(checkpoint(model, tmp_path / "ckpt"), tmp_path / "hf")
    assert (done.family, done.hf_class) == (family, SHAPES[family][1]) and done.max_logit_diff < TOLERANCE
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        p.name for p in (tmp_path / "hf").iterdir()}
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    if family != "gpt2":  # grouped-query attention and the RoPE base are written, not defaulted
        assert config["num_key_value_heads"] == 2 and config["rope_parameters"]["rope_theta"] == 500.0
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    assert type(hf).__name__ == SHAPES[family][1]
    with torch.no_grad():
        ours = model(IDS)[0]
        assert ours.abs().max() > 0.1  # not a trivially small output
        diff = (hf(input_ids=IDS).logits - ours).abs().max().item()
        back = from_hf(hf).eval()
        assert back.cfg.placement == model.cfg.placement and back.cfg.kv_heads == model.cfg.kv_heads
        again = (back(IDS)[0] - ours).abs().max().item()
    print(f"{family}: lab->HF {diff:.2e}, lab->HF->lab {again:.2e}")
    assert diff < TOLERANCE and again < TOLERANCE


def test_planted_differences_break_parity(tmp_path: Path) -> None:
    """One exported weight, the RoPE base or the RMSNorm eps changed: the comparison fails,
    and export_model itself refuses to write a model that differs."""
    model = lab_model("llama")
    hf = to_hf(model)
    assert max_logit_diff(model, hf, IDS) < TOLERANCE
    with torch.no_grad():  # one entry of layer 1's W_V (read by two query heads under GQA)
        hf.model.layers[1].self_attn.v_proj.weight[3, 5] += 0.5
    assert max_logit_diff(model, hf, IDS) > TOLERANCE
    for field, value in (("rope_base", 10000.0), ("norm_eps", 1e-1)):
        other = TransformerLM(ModelConfig(**{**BASE, **SHAPES["llama"][0], field: value}))
        other.load_state_dict(model.state_dict())
        hf = to_hf(other)  # the exported config carries the swapped field
        assert max_logit_diff(model, hf, IDS) > TOLERANCE, field

    import normlab.inspect.export as ex  # where export_model looks to_hf up

    def planted(m: TransformerLM):
        out = to_hf(m)
        with torch.no_grad():
            out.lm_head.weight[0, 0] += 1.0
        return out

    orig, ex.to_hf = ex.to_hf, planted
    try:
        with pytest.raises(UserError, match=r"differs from the lab model \(max \|logit diff\|"):
            export_model(checkpoint(model, tmp_path / "ckpt"), tmp_path / "hf")
    finally:
        ex.to_hf = orig
    assert not (tmp_path / "hf").exists() and not (tmp_path / "hf.tmp").exists()


REFUSED = [  # lab config -> the reason's start
    (dict(placement="post"), "placement post: none of GPT-2, Llama, Qwen3, OLMo-2/3 and Gemma 2/3 (the classes "
                             "export writes) applies the norm after the residual add"),
    (dict(placement="sandwich"), "model.norm='layernorm': Gemma 2 (placement sandwich"),
    (dict(placement="deepnorm"), "placement deepnorm: none of"),
    (dict(placement=["pre", "post"]), "model.placement mixes post, pre"),
    (dict(placement="pre", norm="layernorm", pos="rope"), "model.pos='rope': GPT-2"),
    (dict(placement="pre", norm="layernorm", bias=False), "model.bias=False: GPT-2"),
    (dict(placement="pre", norm="layernorm", n_kv_head=2), "model.n_kv_head=2: GPT-2"),
    (dict(placement="pre", norm="rmsnorm", pos="rope", ffn="gelu", bias=False), "model.ffn='gelu': Llama"),
    (dict(placement="pre", norm="rmsnorm", pos="rope", ffn="swiglu", bias=False, qk_norm="rmsnorm",
          qk_norm_span="full"), "model.qk_norm_span='full': Qwen3"),
    (dict(placement="post_branch", norm="rmsnorm", pos="rope", ffn="swiglu", bias=False), "model.qk_norm=None: OLMo-2"),
    (dict(placement="post_branch", norm="rmsnorm", pos="rope", ffn="swiglu", bias=False, qk_norm="rmsnorm"),
     "model.qk_norm_span='head': OLMo-2"),
    (dict(placement="pre", norm="rmsnorm", pos="learned", ffn="swiglu", bias=False), "model.pos='learned': Llama"),
    # the placements of issue 34: no transformers family computes them
    (dict(placement="hybridnorm", norm="rmsnorm", pos="rope", ffn="swiglu", bias=False),
     "placement hybridnorm: none of GPT-2, Llama, Qwen3, OLMo-2/3 and Gemma 2/3 (the classes export writes) normalises v"),
    (dict(placement="hybridnorm_star", norm="rmsnorm"), "placement hybridnorm_star: none of"),
    (dict(placement="normformer"), "placement normformer: none of"),
    (dict(placement="subln", norm="rmsnorm", pos="rope", ffn="swiglu", bias=False),
     "placement subln: none of GPT-2, Llama, Qwen3, OLMo-2/3 and Gemma 2/3 (the classes export writes) normalises the input of W_O"),
    (dict(placement="keel", norm="rmsnorm", pos="rope", ffn="swiglu", bias=False),
     "placement keel: none of GPT-2, Llama, Qwen3, OLMo-2/3 and Gemma 2/3 (the classes export writes) up-weights the shortcut"),
    (dict(placement={"name": "keel", "alpha": 3}), "placement keel (with options): not exported; none of"),
    (dict(placement={"name": "sandwich", "embed_norm": True}), "placement sandwich (with options): not exported"),
    (dict(placement="pre", norm="derf"), "model.norm='derf': GPT-2 uses layernorm"),
    (dict(placement="pre", norm="seednorm"), "model.norm='seednorm': GPT-2 uses layernorm"),
]


@pytest.mark.parametrize("fields,reason", REFUSED, ids=[r[1].split(":")[0] for r in REFUSED])
def test_models_no_class_computes_are_refused(fields: dict, reason: str) -> None:
    with pytest.raises(UserError) as e:
        family_for(ModelConfig(**{**BASE, **fields}))
    assert str(e.value).startswith(reason) and "\n" not in str(e.value)


def test_cli_exports_and_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    ckpt = checkpoint(lab_model("gpt2"), tmp_path / "ckpt")
    assert main(["export", str(ckpt), str(tmp_path / "hf")]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 'hf'}: GPT2LMHeadModel; max |logit diff| ")
    assert main(["export", str(ckpt), str(tmp_path / "hf")]) == 2  # DIR exists
    assert "already exists" in capsys.readouterr().err
    post = checkpoint(lab_model(dict(placement="post")), tmp_path / "post")
    assert main(["export", str(post), str(tmp_path / "hf-post")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("normlab export: error: placement post: ") and "\n" not in err
    assert not (tmp_path / "hf-post").exists()


def test_tokenizers_encode_as_the_lab_does(data_dir: Path) -> None:
    from normlab.data.tokenizers import BPETokenizer, ByteTokenizer, CharTokenizer
    from normlab.inspect.export import hf_tokenizer

    text = (data_dir / "tinyshakespeare.txt").read_text(encoding="utf-8")[:20_000]
    char = CharTokenizer()
    char.fit(text)
    bpe = BPETokenizer(300)
    bpe.fit(text)
    for lab, sample in ((char, text), (ByteTokenizer(), text[:2000] + " héllo ✓\n\x00\x7f"), (bpe, text)):
        hf = hf_tokenizer(lab)
        ids = hf(sample, add_special_tokens=False)["input_ids"]
        assert ids == lab.encode(sample), lab.name
        assert hf.decode(ids) == sample, lab.name
        assert len(hf) == lab.vocab_size, lab.name


def test_scaled_rope_is_refused_on_import() -> None:
    """Llama 3.1's scaled RoPE, however the installed transformers stores it, is never imported as unscaled."""
    from normlab.model.interop import llama_config_from_hf

    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 32}
    common = dict(vocab_size=65, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=48,
                  max_position_embeddings=64)
    for cfg in (transformers.LlamaConfig(**common, rope_scaling=llama3, rope_theta=500000.0),
                transformers.LlamaConfig(**common, rope_parameters={**llama3, "rope_theta": 500000.0})):
        with pytest.raises(UserError, match="rope_type='llama3'"):
            llama_config_from_hf(cfg)
    cfg = transformers.LlamaConfig(**common)
    cfg.rope_scaling = {"type": "linear", "factor": 2.0}  # the spelling of transformers 4.x configs
    with pytest.raises(UserError, match="rope_type='linear'"):
        llama_config_from_hf(cfg)
    plain = transformers.LlamaConfig(**common, rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    assert llama_config_from_hf(plain).rope_base == 500.0


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_export_states_its_context_and_generates_as_far_as_its_positions_allow(family: str, tmp_path: Path) -> None:
    """A 64-token model: tokenizer and generation config say 64. A RoPE model (Llama) generates
    100 new tokens through transformers; learned positions (GPT-2) have no position 64, so a
    plain generate() stops at the context, and an explicit request past it still fails inside
    transformers' position embedding (nothing in the files can refuse it; docs/inspect.md)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = TransformerLM(ModelConfig(**{**BASE, **SHAPES[family][0], "context": 64})).eval()
    export_model(checkpoint(model, tmp_path / "ckpt"), tmp_path / "hf")
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", dtype=torch.float32).eval()
    assert tok.model_max_length == 64 and hf.generation_config.max_length == 64
    ids = tok("ROMEO:", return_tensors="pt")["input_ids"]
    assert ids.shape == (1, 6)
    with torch.no_grad():
        plain = hf.generate(ids, do_sample=False)
        assert plain.shape == (1, 64)  # no eos: a plain generate() runs to the context and stops there
        if family == "llama":
            long = hf.generate(ids, do_sample=False, max_new_tokens=100)
            assert long.shape == (1, 106)  # past the 64-token context, without an error
            ours = model(long[:, :64])[0][0, -1].argmax().item()
            assert long[0, 64].item() == ours  # greedy: the token the lab model picks after the first 64
        else:
            with pytest.raises(IndexError):
                hf.generate(ids, do_sample=False, max_new_tokens=100)
