"""TrainingDiagnostics against direct computations in a hand-written training loop."""

from __future__ import annotations

import json
import math

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.diagnostics.training import TrainingDiagnostics


def _setup(tmp_path, placement: str = "pre"):
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=17, context=8, n_layer=2, d_model=16, n_head=2,
                                      placement=placement, init="xavier"))
    g = torch.Generator().manual_seed(1)
    fixed = (torch.randint(0, 17, (3, 8), generator=g), torch.randint(0, 17, (3, 8), generator=g))
    diag = TrainingDiagnostics(model, tmp_path, fixed, every=2, fixed_rows=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    return model, diag, opt, fixed, g


def test_one_line_per_active_step_with_hand_checked_values(tmp_path) -> None:
    model, diag, opt, fixed, g = _setup(tmp_path)
    ref = model(fixed[0][:2])[0].detach()
    recs = []
    for step in range(4):
        idx, tgt = torch.randint(0, 17, (4, 8), generator=g), torch.randint(0, 17, (4, 8), generator=g)
        on = diag.active(step)
        if on:
            diag.before_forward(step)
        opt.zero_grad()
        _, loss = model(idx, tgt)
        loss.backward()
        if on:
            diag.after_backward(step)
            grads = {n: p.grad.clone() for n, p in model.named_parameters()}
            before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        model.after_step()
        if on:
            recs.append(diag.after_step(step, {"train/loss": loss.item()}))
            r = recs[-1]
            b1 = [n for n in grads if n.startswith("blocks.0.")]
            want = math.sqrt(sum(grads[n].norm().item() ** 2 for n in b1))
            assert r["grad_norm"][1] == pytest.approx(want, rel=1e-5)
            upd = math.sqrt(sum((p.detach() - before[n]).norm().item() ** 2
                                for n, p in model.named_parameters() if n in b1))
            w = math.sqrt(sum(p.detach().norm().item() ** 2 for n, p in model.named_parameters() if n in b1))
            assert r["update_ratio"][1] == pytest.approx(upd / w, rel=1e-4)
            with torch.no_grad():  # activation statistics: first 2 fixed rows, after the update
                x = fixed[0][:2]
                out, _ = model(x)
                x0 = model.embed(x)
                x1 = model.blocks[0](x0)
            assert r["rms"][0] == pytest.approx(x0.pow(2).mean().sqrt().item(), rel=1e-5)
            assert r["max_abs"][1] == pytest.approx(x1.abs().max().item(), rel=1e-5)
            c = torch.nn.functional.cosine_similarity(x0, x1, dim=-1)
            assert r["cos"][0] == pytest.approx(c.mean().item(), rel=1e-5)
            assert r["output_change"] == pytest.approx(((out - ref).norm() / ref.norm()).item(), rel=1e-4)
            assert r["log_z"] == pytest.approx(torch.logsumexp(out, -1).mean().item(), rel=1e-5)
    diag.close()
    lines = [json.loads(s) for s in (tmp_path / "diagnostics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 2] == [r["step"] for r in recs]
    r = lines[0]
    assert len(r["grad_norm"]) == len(r["update_ratio"]) == 4           # embeddings, 2 blocks, final
    assert len(r["rms"]) == len(r["max_abs"]) == 3 and len(r["cos"]) == len(r["angular_distance"]) == 2
    assert all(a > 0 for a in r["attn_max_logit"]) and r["output_change"] > 0
    assert all(not b._forward_hooks for b in model.blocks)                # hooks removed
    assert all(not b.attn.branch.record for b in model.blocks)             # fast path restored


def test_resume_keeps_reference_and_works_for_resi_dual(tmp_path) -> None:
    model, diag, opt, fixed, g = _setup(tmp_path, "resi_dual")
    diag.before_forward(0)
    _, loss = model(*fixed)
    loss.backward()
    diag.after_backward(0)
    opt.step()
    r = diag.after_step(0)
    assert r["output_change"] > 0 and len(r["rms"]) == 3
    again = TrainingDiagnostics(model, tmp_path, fixed, every=1, fixed_rows=2)  # "resumed": same W_0 reference
    torch.testing.assert_close(again.ref, diag.ref)
    with pytest.raises(ValueError):
        TrainingDiagnostics(model, tmp_path, fixed, every=0)
