"""analyze (layer deletion, angles, CKA), LR sensitivity, and the CLI commands end to end."""

from __future__ import annotations

import json
import math

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.cli import main
from normlab.core.errors import UserError
from normlab.diagnostics.analyze import analyze_model
from normlab.diagnostics.sensitivity import lr_sensitivity, per_lr_losses


def test_lr_sensitivity_by_hand() -> None:
    init = 4.0
    pts = [(1e-4, 3.0, init), (1e-3, 2.0, init), (1e-2, 5.0, init), (1e-1, float("nan"), init),
           (1e-3, 2.4, init)]  # two seeds at 1e-3 are averaged
    # per lr: 3.0, 2.2, min(5, 4)=4, diverged -> 4; best 2.2
    assert per_lr_losses(pts) == pytest.approx({1e-4: 3.0, 1e-3: 2.2, 1e-2: 4.0, 1e-1: 4.0})
    assert lr_sensitivity(pts) == pytest.approx((3.0 + 2.2 + 4.0 + 4.0) / 4 - 2.2)
    assert lr_sensitivity([(1e-3, None, init), (1e-2, 1.0, init)]) == pytest.approx(1.5)
    with pytest.raises(UserError):
        lr_sensitivity([])
    with pytest.raises(UserError, match=r"needs runs at >= 2 learning rates, got only lr=0\.001"):
        lr_sensitivity([(1e-3, 2.0, init), (1e-3, 2.4, init)])


def test_analyze_model_deletion_and_pairs() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=13, context=8, n_layer=3, d_model=16, n_head=2,
                                      placement="pre", init="xavier")).eval()
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randint(0, 13, (2, 8), generator=g), torch.randint(0, 13, (2, 8), generator=g))]
    res = analyze_model(model, batches)
    idx, tgt = batches[0]
    with torch.no_grad():
        h = model.embed(idx)
        h = model.blocks[2](model.blocks[0](h))  # block 2 (index 1) deleted
        want = torch.nn.functional.cross_entropy(model.head(h).flatten(0, 1), tgt.flatten()).item()
        full = model(idx, tgt)[1].item()
    assert res["deletion_loss"][1] == pytest.approx(want, rel=1e-5)
    assert res["val_loss"] == pytest.approx(full, rel=1e-5)
    n = len(res["cka"])
    assert n == 4 and all(res["cka"][i][i] == pytest.approx(1.0, rel=1e-5) for i in range(n))
    assert all(res["angular_distance"][i][i] == pytest.approx(0.0, abs=2e-3) for i in range(n))
    assert res["angular_distance"][0][1] == pytest.approx(res["angular_distance"][1][0], rel=1e-6)
    with torch.no_grad():
        x0 = model.embed(idx)
        c = torch.nn.functional.cosine_similarity(x0, model.blocks[0](x0), dim=-1)
    assert res["block_influence"][0] == pytest.approx(1 - c.mean().item(), rel=1e-5)
    assert res["angular_distance"][0][1] == pytest.approx((c.clamp(-1, 1).arccos() / math.pi).mean().item(), rel=1e-4)


def test_probe_cli_writes_tables(tmp_path, capsys) -> None:
    out = tmp_path / "p"
    rc = main(["probe", "--placements", "post,pre", "--depths", "1,2", "--d-model", "16", "--n-head", "2",
               "--seeds", "2", "--context", "8", "--batch-size", "2", "--data", "random", "--quiet",
               "--out", str(out)])
    assert rc == 0
    header = (out / "probe.csv").read_text().splitlines()[0]
    assert header == "placement,init,n_layer,d_model,seed,layer,sublayer,param,metric,value"
    s = json.loads((out / "summary.json").read_text())
    assert set(s["w2_slope"]) == {"post", "pre"} and "post" in s["ratio_to_pre"]
    assert json.loads((out / "probe_config.json").read_text())["depths"] == [1, 2]
    rc = main(["probe", "--placements", "postt", "--out", str(out)])
    assert rc == 2 and "did you mean 'post'" in capsys.readouterr().err


def test_train_analyze_and_lr_sensitivity_cli(tmp_path, data_dir, capsys) -> None:
    runs = []
    for lr in ("1e-3", "3e-2"):
        run = tmp_path / f"lr{lr}"
        rc = main(["train", "--out", str(run), "--quiet", "--data-dir", str(data_dir), "--diag-every", "4",
                   "--set", "model.n_layer=2", "--set", "model.d_model=16", "--set", "model.n_head=2",
                   "--set", "model.context=16", "--set", "train.steps=8", "--set", "train.eval_every=4",
                   "--set", "train.batch_size=4", "--set", "train.eval_batches=2", "--set", f"optim.lr={lr}"])
        assert rc == 0
        runs.append(str(run))
    assert len((tmp_path / "lr1e-3" / "diagnostics.jsonl").read_text().splitlines()) == 2
    assert main(["analyze", runs[0], "--batches", "2", "--batch-size", "2"]) == 0
    rows = (tmp_path / "lr1e-3" / "analysis" / "analysis.csv").read_text().splitlines()
    assert len([r for r in rows if ",deletion_loss," in r]) == 2
    capsys.readouterr()
    assert main(["lr-sensitivity", *runs, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["lr_sensitivity"] >= 0 and len(res["per_lr"]) == 2
    # One lr (two runs of it): an error naming the fix, not a 0.0000 that reads as "insensitive".
    assert main(["lr-sensitivity", runs[0], runs[0]]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and ">= 2 learning rates" in err and "--set optim.lr=" in err
    assert main(["analyze", str(tmp_path / "nope")]) == 2
