"""`normlab train --init-from DIR` continues an imported tiny Llama and Qwen3 (QK-norm per head,
a head width apart from d/H, a sliding-window layer): the loss of step 0 equals transformers'
loss on the same batch, and training goes on from there."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

from normlab.cli import main  # noqa: E402

pytest.importorskip("transformers")


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_train_init_from_imported_model(family: str, data_dir: Path, tmp_path: Path) -> None:
    corpus = (data_dir / "tinyshakespeare.txt").read_text(encoding="utf-8")
    hf_dir = tiny.save(family, corpus, tmp_path / "hf")
    lab = tmp_path / "lab"
    assert main(["import", str(hf_dir), str(lab)]) == 0
    run = tmp_path / "run"
    sets = ["train.steps=3", "train.log_every=1", "train.eval_every=0", "train.batch_size=2", "train.device=cpu",
            "train.checkpoint_every=0", "model.context=32", "optim.warmup_steps=0", "optim.lr=3e-3"]
    argv = ["train", "--init-from", str(lab), "--out", str(run), "--quiet"]
    assert main(argv + [a for s in sets for a in ("--set", s)]) == 0
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["train"]["init_from"] == str(lab) and cfg["data"]["tokenizer"] == str(lab / "tokenizer.json")
    assert cfg["model"]["n_kv_head"] == 2 and cfg["model"]["norm"] == "rmsnorm" and cfg["model"]["context"] == 32
    if family == "qwen3":  # the options it needs travel into the run's config
        assert (cfg["model"]["qk_norm"], cfg["model"]["d_head"], cfg["model"]["window_layers"]) == ("rmsnorm", 16, [2])
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]

    # the batch of step 0, drawn the way the loop draws it, scored by transformers
    import transformers

    from normlab.data import load_corpus
    from normlab.data.batches import train_batch
    from normlab.data.config import DataConfig

    tokens = load_corpus(DataConfig(tokenizer=str(lab / "tokenizer.json"))).train
    x, y = train_batch(tokens, 32, 2, cfg["seed"], 0, 0)
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        ref = F.cross_entropy(hf(x).logits.flatten(0, 1), y.flatten()).item()
    assert metrics[0]["train/loss"] == pytest.approx(ref, rel=1e-5)
    # it trains on from the checkpoint: the trained model scores the step-0 batch better than transformers did
    from normlab.run.dir import RunDir

    trained, _, _ = RunDir(run).load_model("latest")
    with torch.no_grad():
        assert F.cross_entropy(trained(x)[0].flatten(0, 1), y.flatten()).item() < ref


def test_init_from_refuses_what_does_not_fit(data_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    corpus = (data_dir / "tinyshakespeare.txt").read_text(encoding="utf-8")
    lab = tmp_path / "lab"
    assert main(["import", str(tiny.save("llama", corpus, tmp_path / "hf")), str(lab)]) == 0
    capsys.readouterr()
    run = tmp_path / "run"
    # sandwich has two norms per sub-layer where the Llama has one: the weights cannot load
    assert main(["train", "--init-from", str(lab), "--out", str(run), "--quiet", "--placement", "sandwich",
                 "--set", "train.steps=1", "--set", "train.device=cpu"]) == 2
    err = capsys.readouterr().err
    assert "weights do not fit model (placement 'sandwich')" in err and len(err.strip().splitlines()) == 1
    assert not run.exists()
    assert main(["train", "--init-from", str(tmp_path / "nothing"), "--out", str(run), "--quiet"]) == 2
    assert "no model.safetensors there" in capsys.readouterr().err and not run.exists()
