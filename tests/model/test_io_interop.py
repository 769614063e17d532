"""Save/load round trip, the nGPT sphere hook, the HF GPT-2 parity, and the CLI tables."""

from __future__ import annotations

import json

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.cli import main
from normlab.core.errors import UserError
from normlab.model.interop import from_hf_gpt2
from normlab.model.io import save_model

SMALL = dict(vocab_size=13, context=8, d_model=16, n_head=2)


@pytest.mark.parametrize("kw", [
    dict(placement="admin"),
    dict(placement="resi_dual", tie_embeddings=False, ffn="swiglu", pos="rope"),
    dict(placement="ngpt", bias=False),
    dict(placement=[{"attn": "pre", "ffn": "post"}, "sandwich"], qk_norm="l2", norm="rmsnorm"),
])
def test_save_load_round_trip(tmp_path, kw: dict) -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(n_layer=2, **SMALL, **kw))
    with torch.no_grad():  # move every tensor away from its init, omega included
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
        for name, b in model.named_buffers():
            if name.endswith("omega"):
                b.fill_(1.2345)
    save_model(model, tmp_path / "ck")
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["model.safetensors", "model_config.json"]
    assert json.loads((tmp_path / "ck" / "model_config.json").read_text())["placement"] == kw["placement"]
    torch.manual_seed(99)  # a different init that load must overwrite
    loaded = TransformerLM.load(tmp_path / "ck")
    assert loaded.cfg == model.cfg
    idx = torch.randint(0, 13, (2, 8))
    assert torch.equal(loaded(idx)[0], model(idx)[0])
    for (n1, t1), (n2, t2) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert n1 == n2 and torch.equal(t1, t2), n1
    if kw["placement"] == "admin":
        assert float(loaded.blocks[1].ffn.omega) == pytest.approx(1.2345)
    if kw.get("tie_embeddings", True):
        assert loaded.lm_head.weight is loaded.wte.weight


def test_load_errors(tmp_path) -> None:
    with pytest.raises(UserError, match="model_config.json: no such file"):
        TransformerLM.load(tmp_path)
    save_model(TransformerLM(ModelConfig(n_layer=1, **SMALL)), tmp_path)
    cfg = json.loads((tmp_path / "model_config.json").read_text())
    cfg["n_layer"] = 2
    (tmp_path / "model_config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match="cannot load weights"):
        TransformerLM.load(tmp_path)
    cfg["placement"] = "bogus"
    (tmp_path / "model_config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match=r"model\.placement='bogus'"):
        TransformerLM.load(tmp_path)


def test_ngpt_after_step_keeps_weights_on_the_sphere() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(n_layer=2, placement="ngpt", bias=False, tie_embeddings=False, **SMALL))
    b = model.blocks[0]
    reads = [model.wte.weight, model.wpe.weight, model.lm_head.weight, b.attn.branch.qkv.weight, b.ffn.branch.fc.weight]
    writes = [b.attn.branch.proj.weight, b.ffn.branch.proj.weight]

    def on_sphere() -> bool:
        return (all(torch.allclose(w.norm(dim=1), torch.ones(w.size(0)), atol=1e-5) for w in reads)
                and all(torch.allclose(w.norm(dim=0), torch.ones(w.size(1)), atol=1e-5) for w in writes))

    assert on_sphere()  # init_ projects
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    idx = torch.randint(0, 13, (2, 8))
    _, loss = model(idx, idx)
    loss.backward()
    opt.step()
    assert not on_sphere()
    model.after_step()
    assert on_sphere()
    h = model.stream.begin(model.embed(idx))
    for blk in model.blocks:
        h = blk(h)
        assert torch.allclose(h.norm(dim=-1), torch.ones(2, 8), atol=1e-5)  # hidden states on the sphere
    assert model.blocks[0].attn.alpha().mean().item() == pytest.approx(0.05, rel=0.2)


def test_hf_gpt2_parity() -> None:
    transformers = pytest.importorskip("transformers")
    for seed, (n_layer, n_embd, n_head, n_inner, eps) in enumerate([(2, 32, 4, None, 1e-5), (3, 24, 3, 40, 1e-6)]):
        torch.manual_seed(seed)
        hf_cfg = transformers.GPT2Config(vocab_size=57, n_positions=16, n_embd=n_embd, n_layer=n_layer,
                                         n_head=n_head, n_inner=n_inner, layer_norm_epsilon=eps,
                                         bos_token_id=0, eos_token_id=0)
        hf = transformers.GPT2LMHeadModel(hf_cfg).eval()
        with torch.no_grad():  # GPT-2 starts LN at (1, 0): move them so ln_1/ln_2/ln_f mapping matters
            for name, p in hf.named_parameters():
                if ".ln_" in name or "ln_f" in name or name.endswith(".bias"):
                    p.add_(0.2 * torch.randn_like(p))
        ours = from_hf_gpt2(hf).eval()
        assert ours.cfg.placement == "pre" and ours.cfg.n_head == n_head
        idx = torch.randint(0, 57, (3, 16))
        with torch.no_grad():
            ref = hf(idx).logits
            assert torch.allclose(ours(idx)[0], ref, atol=1e-5, rtol=0)
            from_sd = from_hf_gpt2(hf.state_dict(), config=hf_cfg).eval()
            assert torch.allclose(from_sd(idx)[0], ref, atol=1e-5, rtol=0)
    with pytest.raises(UserError, match="needs config="):
        from_hf_gpt2(hf.state_dict())
    with pytest.raises(UserError, match="activation_function='relu'"):
        from_hf_gpt2(transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=57, n_positions=16, n_embd=16, n_layer=1, n_head=2, activation_function="relu")))


def test_cli_tables(capsys) -> None:
    assert main(["placements"]) == 0
    out = capsys.readouterr().out
    for name, formula in [("pre_post", "LN_out(x + F(LN_in(x)))"), ("sandwich", "x + LN_out(F(LN_in(x)))"),
                          ("resi_dual", "x_L + LN(d_L)"), ("ngpt", "Norm(h + alpha*(Norm(F(h)) - h))"),
                          ("mix", "floor(alpha*L)"), ("admin", "omega"), ("deepnorm", "(8L)^(-1/4)")]:
        line = next(ln for ln in out.splitlines() if ln.startswith(name + " "))
        assert formula in line
    assert main(["norms"]) == 0
    out = capsys.readouterr().out
    assert "sqrt(mean(x^2) + eps)" in out and "Zhu et al. 2025" in out and "Henry et al. 2020" in out
    assert main(["inits"]) == 0
    out = capsys.readouterr().out
    assert "0.02/sqrt(2L)" in out and "1/fan_in" in out
