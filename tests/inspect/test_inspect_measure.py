"""`normlab inspect --measure`: the sub-layer measurements of diagnostics/sublayers.py on a lab
model, per block, equal to calling those functions on the inspection's own batch; which apply
to which placement; a model that is not a lab TransformerLM, and a series, refused in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from normlab.cli import main
from normlab.diagnostics import sublayers
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402


def test_inspect_measure_of_a_lab_run(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from normlab.diagnostics.capture import make_batch
    from normlab.inspect import measured_ids
    from normlab.inspect.subject import load_subject

    run, out = tmp_path / "run", tmp_path / "out"
    assert main(["train", "--preset", "smoke", "--placement", "post", "--out", str(run), "--quiet",
                 "--set", "train.steps=2", "--set", "train.device=cpu", "--set", "train.eval_every=2"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(run), "--out", str(out), "--max-tokens", "64", "--seed", "3", "--quiet",
                 "--measure"]) == 0
    printed = capsys.readouterr().out.splitlines()
    header = next(line for line in printed if line.lstrip().startswith("block"))
    assert header.split() == ["block", "identity", "ratio.attn", "gain.attn", "ratio.ffn", "gain.ffn",
                              "path.attn", "path.ffn"]
    assert printed[-1].startswith("not measured: branch_share (needs DeepNorm")
    got = json.loads((out / "analysis" / "analysis.json").read_text())
    assert got["not_measured"].keys() == {"branch_share"}

    # the same functions on the same batch (the run's validation tokens, the inspection's windows)
    subject = load_subject(str(run))
    ids, _ = measured_ids(subject, None, None, limit=64 + subject.context)
    x, y = make_batch(subject, ids, 64, 3)
    model = subject.model
    L = len(model.blocks)
    coef = sublayers.identity_coefficients(model, x, y, torch.Generator().manual_seed(3))
    gain = sublayers.norm_gain(model, x)
    path = sublayers.identity_path(model, x, y, torch.Generator().manual_seed(3))
    m = got["measurements"]
    assert m["identity_coefficients"] == coef and len(coef) == L
    assert [[b["attn"], b["ffn"]] for b in m["norm_gain"]] == [gain[2 * i:2 * i + 2] for i in range(L)]
    assert [[b["attn"], b["ffn"]] for b in m["identity_path"]] == [path[2 * i:2 * i + 2] for i in range(L)]
    # the printed table is the file's numbers
    first = printed[printed.index(header) + 1].split()
    assert float(first[1]) == pytest.approx(coef[0], rel=1e-3) and float(first[3]) == pytest.approx(gain[0]["gain"], rel=1e-3)
    assert json.loads((out / "probe_config.json").read_text())["measure"] is True


@pytest.mark.parametrize("placement, measured", [("post", {"identity_coefficients", "norm_gain", "identity_path"}),
                                                 ("deepnorm", {"identity_coefficients", "branch_share"}),
                                                 ("pre", {"identity_coefficients"})])
def test_which_measurements_fit_which_placement(placement: str, measured: set[str]) -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(n_layer=2, d_model=16, n_head=2, d_ff=16, vocab_size=11, context=8,
                                      placement=placement))
    idx = torch.randint(0, 11, (2, 8), generator=torch.Generator().manual_seed(1))
    got = sublayers.per_block(model, idx, idx, seed=0)
    assert set(got) == measured and set(sublayers.not_applicable(model)) == set(sublayers.PER_BLOCK) - measured
    assert all(len(v) == 2 for v in got.values())  # one entry per block
    if placement == "deepnorm":
        share = sublayers.branch_share(model, idx)
        assert [[b["attn"], b["ffn"]] for b in got["branch_share"]] == [share[:2], share[2:]]


def test_measure_refuses_a_hugging_face_model_and_a_series(data_dir: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    corpus = (data_dir / "tinyshakespeare.txt").read_text(encoding="utf-8")
    model = tiny.save("gpt2", corpus, tmp_path / "gpt2")
    capsys.readouterr()  # (save_pretrained's progress)
    out = tmp_path / "out"
    assert main(["inspect", str(model), "--out", str(out), "--context", "32", "--max-tokens", "64", "--quiet",
                 "--measure"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--measure: gpt2 is not a lab TransformerLM" in err, err
    assert not out.exists()
    assert main(["inspect", "--series", str(model), "--out", str(out), "--measure"]) == 2
    assert "--measure applies to one MODEL, not to a --series" in capsys.readouterr().err
    assert not out.exists()
