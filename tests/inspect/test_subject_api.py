"""The public subject API: a nanoGPT written here, a transformers model outside the family
table (Phi) and a TransformerLens bridge go through ``subject_from_module`` into the
probe's and inspect's statistics; every row checked is recomputed here from the model's
own hidden states (the test's hooks, ``output_hidden_states``, TransformerLens' cache)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

from normlab.core.errors import UserError  # noqa: E402
from normlab.diagnostics.capture import make_batch, measure  # noqa: E402
from normlab.diagnostics.probe import probe_model  # noqa: E402
from normlab.inspect import Family, Subject, inspect_subject, subject_from_module  # noqa: E402


class Block(nn.Module):  # the classic nanoGPT block: x + attn(ln_1(x)), x + mlp(ln_2(x))
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.ModuleDict({"c_attn": nn.Linear(d, 3 * d), "c_proj": nn.Linear(d, d)})
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.attn["c_attn"](self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(B, T, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, d)
        x = x + self.attn["c_proj"](y)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's layout (transformer.wte/wpe/h/ln_f, tied lm_head); like nanoGPT, without
    targets it returns the logits of the last position only."""

    def __init__(self, vocab: int = 50, d: int = 32, L: int = 3, T: int = 16) -> None:
        super().__init__()
        self.config = SimpleNamespace(vocab_size=vocab, n_embd=d, n_layer=L, block_size=T)  # as nanoGPT's GPTConfig
        self.transformer = nn.ModuleDict({"wte": nn.Embedding(vocab, d), "wpe": nn.Embedding(T, d),
                                          "h": nn.ModuleList(Block(d, 4) for _ in range(L)), "ln_f": nn.LayerNorm(d)})
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.transformer["wte"].weight

    def states(self, idx: torch.Tensor, skip: int | None = None) -> list[torch.Tensor]:
        """x_0..x_L, computed block by block (the test's own forward)."""
        x = self.transformer["wte"](idx) + self.transformer["wpe"](torch.arange(idx.size(1)))
        xs = [x]
        for i, b in enumerate(self.transformer["h"]):
            x = x if i == skip else b(x)
            xs.append(x)
        return xs

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        x = self.transformer["ln_f"](self.states(idx)[-1])
        if targets is None:
            return self.lm_head(x[:, [-1], :]), None
        logits = self.lm_head(x)
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def _nanogpt() -> tuple[GPT, Subject]:
    torch.manual_seed(0)
    gpt = GPT().eval()
    chars = "abcdefghijklmnopqrstuvwxyz ,.;:!?'\n"
    tok = lambda text: [chars.index(c) for c in text.lower() if c in chars]  # noqa: E731  # a character tokenizer
    return gpt, subject_from_module(gpt, blocks="transformer.h", embed="transformer.wte", tokenizer=tok,
                                    forward=lambda ids: gpt(ids, ids)[0], name="nanogpt",
                                    family=Family("nanoGPT", "pre", "layernorm"))


def _table(rows: list[tuple]) -> dict[tuple[str, str, int, str], float]:
    return {(metric, sub, layer, param): value for layer, sub, param, metric, value in rows}


def _check_stream(got: dict, xs: list[torch.Tensor]) -> None:
    """mean_sq, max_abs, cos across each block, token_cos of x_0..x_L against the states ``xs``."""
    for i, x in enumerate(xs):
        assert got[("mean_sq", "stream", i, "x")] == pytest.approx(x.pow(2).mean().item(), rel=1e-5)
        assert got[("max_abs", "stream", i, "x")] == pytest.approx(x.abs().max().item(), rel=1e-5)
        if i + 1 < len(xs):
            cos = F.cosine_similarity(x, xs[i + 1], dim=-1).mean().item()
            assert got[("cos", "block", i + 1, "all")] == pytest.approx(cos, abs=1e-5)
        u = F.normalize(x, dim=-1)
        T = x.size(1)
        gram = u @ u.transpose(1, 2)
        tcos = ((gram.sum((1, 2)) - gram.diagonal(dim1=1, dim2=2).sum(-1)) / (T * (T - 1))).mean().item()
        assert got[("token_cos", "stream", i, "x")] == pytest.approx(tcos, abs=1e-5)


def test_nanogpt_probe_rows_equal_the_models_own_states() -> None:
    gpt, subject = _nanogpt()
    gen = torch.Generator().manual_seed(1)
    seq = torch.randint(0, 50, (4, 17), generator=gen)
    idx, tgt = seq[:, :-1], seq[:, 1:]
    got = _table(probe_model(subject, idx, tgt, n_proj=1, gen=torch.Generator().manual_seed(0)))
    xs = [x.requires_grad_() if i == 0 else x for i, x in enumerate(gpt.states(idx))]
    xs[0].retain_grad()
    _check_stream(got, [x.detach() for x in xs])
    # loss and gradients, by autograd on the test's forward
    x = xs[0]
    outs = [x]
    for b in gpt.transformer["h"]:
        x = b(x)
        outs.append(x)
    for o in outs:
        o.retain_grad()
    loss = F.cross_entropy(gpt.lm_head(gpt.transformer["ln_f"](x)).flatten(0, 1), tgt.flatten())
    gpt.zero_grad()
    loss.backward()
    assert got[("loss", "model", 0, "loss")] == pytest.approx(loss.item(), rel=1e-6)
    for i in range(3):
        assert got[("grad_norm", "stream", i, "x")] == pytest.approx(outs[i].grad.norm().item(), rel=1e-4)
        block = gpt.transformer["h"][i]
        gn = math.sqrt(sum(p.grad.pow(2).sum().item() for p in block.parameters()))
        assert got[("grad_norm", "block", i + 1, "all")] == pytest.approx(gn, rel=1e-4)
        w = block.attn["c_attn"].weight.grad.norm().item()
        assert got[("grad_norm", "attn", i + 1, "c_attn.weight")] == pytest.approx(w, rel=1e-4)
        assert ("mean_sq", "block", i + 1, "ln_1.input") in got  # the norms' inputs, named by path
    assert got[("mean_sq", "final", 3, "transformer.ln_f.input")] == pytest.approx(outs[-1].pow(2).mean().item(),
                                                                                    rel=1e-5)
    assert ("jac_rms_to_last", "stream", 0, "x") in got


def test_nanogpt_inspect_measures_deletion_and_has_no_attention() -> None:
    gpt, subject = _nanogpt()
    x = torch.randint(0, 36, (2, 16), generator=torch.Generator().manual_seed(2))
    captured, raw = measure(subject, x, x.clone())
    with torch.no_grad():
        for i in range(3):  # block i skipped: its input passed on
            logits = gpt.lm_head(gpt.transformer["ln_f"](gpt.states(x, skip=i)[-1]))
            want = F.cross_entropy(logits[:, :-1].flatten(0, 1), x[:, 1:].flatten()).item()
            assert raw["deletion_loss"][i] == pytest.approx(want, rel=1e-5)
    assert all(math.isnan(v) for v in raw["attn_max_logit"])  # nothing can read nanoGPT's SDPA
    assert subject.context == 16  # config.block_size


def test_a_subject_built_by_hand_measures_with_the_default_attention() -> None:
    gpt, _ = _nanogpt()
    sub = Subject("by-hand", Family("nanoGPT", "pre", "layernorm"), gpt, list(gpt.transformer["h"]),
                  lambda ids: gpt(ids, ids)[0], lambda s: [], 16, 32)
    x = torch.randint(0, 50, (1, 16))
    _, raw = measure(sub, x, x.clone())  # raised TypeError when the default was nullcontext
    assert len(raw["attn_max_logit"]) == 3


def test_mistakes_name_the_argument() -> None:
    gpt, _ = _nanogpt()
    with pytest.raises(UserError, match="forward="):  # nanoGPT's own forward gives one position
        subject_from_module(gpt).forward(torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(UserError, match="blocks='transformer.x'.*children: transformer, lm_head"):
        subject_from_module(gpt, blocks="transformer.x")
    with pytest.raises(UserError, match="pass blocks="):
        subject_from_module(nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5)))
    assert len(subject_from_module(gpt).layers) == 3  # found: the ModuleList of the most parameters


# ------------------------------------------------------------------ transformers, outside the table
def _phi():
    t = pytest.importorskip("transformers")
    from normlab.diagnostics.families import FAMILIES

    cfg = t.PhiConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                      num_attention_heads=4, max_position_embeddings=32, partial_rotary_factor=0.5)
    assert cfg.model_type not in FAMILIES
    torch.manual_seed(0)
    return t.PhiForCausalLM(cfg).eval()


def test_transformers_model_outside_the_family_table() -> None:
    from transformers import AttentionInterface

    model = _phi()
    before = model.config._attn_implementation
    subject = subject_from_module(model)
    assert subject.family.placement == "unknown" and subject.family.name == "phi"
    assert subject.d_model == 32 and subject.context == 32 and subject.info["vocab_size"] == 64
    seq = torch.randint(0, 64, (2, 13), generator=torch.Generator().manual_seed(3))
    idx, tgt = seq[:, :-1], seq[:, 1:]
    got = _table(probe_model(subject, idx, tgt, n_proj=0))
    last: list[torch.Tensor] = []
    # a decoder layer returns its state alone (transformers 5.2+) or first in a tuple (5.1)
    h = model.model.layers[-1].register_forward_hook(
        lambda _m, _a, out: last.append(out[0] if isinstance(out, tuple) else out))
    with torch.no_grad():
        out = model(input_ids=idx, output_hidden_states=True)
    h.remove()
    xs = [*out.hidden_states[:2], last[0]]  # hidden_states[-1] is after the final norm: x_L from a hook
    _check_stream(got, xs)
    loss = F.cross_entropy(out.logits.flatten(0, 1), tgt.flatten()).item()
    assert got[("loss", "model", 0, "loss")] == pytest.approx(loss, rel=1e-6)
    # the attention is read through transformers' public interface, and leaves the model as it was
    captured, raw = measure(subject, idx, idx.clone())
    assert all(v > 0 and math.isfinite(v) for v in raw["attn_max_logit"])
    assert model.config._attn_implementation == before
    assert AttentionInterface().get_interface("eager", None) is None  # "eager" was never overwritten
    with torch.no_grad():
        assert torch.equal(model(input_ids=idx).logits, out.logits)


def test_report_compares_two_subjects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import os

    from normlab.cli import main

    data = Path(os.environ.get("NORMLAB_DATA_DIR", "")) / "tinyshakespeare.txt"
    if not data.is_file():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    text = tmp_path / "text.txt"
    text.write_text(data.read_text(encoding="utf-8")[:4000], encoding="utf-8")
    _, gpt = _nanogpt()
    a = inspect_subject(gpt, tmp_path / "nanogpt", str(text), max_tokens=32)
    model = _phi()
    phi = subject_from_module(model, tokenizer=lambda s: [ord(c) % 64 for c in s], name="phi", context=16)
    b = inspect_subject(phi, tmp_path / "phi", str(text), max_tokens=32)
    assert (a["family"], a["placement"], b["family"], b["placement"]) == ("nanoGPT", "pre", "phi", "unknown")
    assert a["n_layer"] == 3 and b["n_layer"] == 2 and math.isfinite(b["loss"])
    assert main(["report", str(tmp_path / "nanogpt"), str(tmp_path / "phi"), "--out", str(tmp_path / "cmp"),
                 "--quiet"]) == 0
    page = (tmp_path / "cmp" / "index.html").read_text(encoding="utf-8")
    assert "nanogpt" in page and "phi" in page
    assert main(["report", str(tmp_path / "phi"), "--quiet"]) == 0
    assert (tmp_path / "phi" / "report" / "index.html").is_file()


# ------------------------------------------------------------------ TransformerLens
def test_transformer_lens_bridge(tmp_path: Path) -> None:
    pytest.importorskip("transformer_lens", reason="transformer_lens is not installed (pip install "
                        "transformer_lens); the TransformerBridge adapter is tested where it is")
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoTokenizer

    from normlab.inspect import subject_from_bridge

    text = "".join(chr(97 + (i * 7) % 26) + (" " if i % 5 == 0 else "") for i in range(3000))
    folder = tiny.save("gpt2", text, tmp_path / "gpt2")
    bridge = TransformerBridge.boot_transformers(str(folder), hf_model=tiny.hf_model("gpt2"),
                                                 tokenizer=AutoTokenizer.from_pretrained(folder), device="cpu")
    subject = subject_from_bridge(bridge)
    assert subject.family.name == "GPT-2" and len(subject.layers) == 2 and subject.d_model == 32
    x, y = make_batch(subject, subject.encode(text), 64, 0)
    got = _table(probe_model(subject, x[:, :-1], x[:, 1:], n_proj=0))
    _, cache = bridge.run_with_cache(x[:, :-1])
    xs = [cache["blocks.0.hook_resid_pre"], cache["blocks.0.hook_resid_post"], cache["blocks.1.hook_resid_post"]]
    _check_stream(got, xs)
    # the bridge's attention scores agree with transformers' own attention on the same weights
    c, raw = measure(subject, x, y)
    cp, plain = measure(subject_from_module(tiny.hf_model("gpt2")), x, y)
    assert raw["attn_max_logit"] == pytest.approx(plain["attn_max_logit"], rel=1e-4)
    # and so do its probabilities (hook_pattern): each head's entropy
    torch.testing.assert_close(c.attention["head_entropy"], cp.attention["head_entropy"], rtol=1e-4, atol=1e-6)
    assert raw["deletion_loss"] == pytest.approx(plain["deletion_loss"], rel=1e-5)
