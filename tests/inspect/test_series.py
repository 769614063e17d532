"""`normlab inspect --series`: a tiny lab run keeping 6 step checkpoints (train.keep_checkpoints: the
model at initialisation, then every 2nd step)
and the same checkpoints exported to Hugging Face format each give a series page that opens in
headless Chromium with no console error and every image decoded; the rows of both forms agree;
a rerun measures nothing again, an interrupted one resumes; bad input is one line, status 2."""

from __future__ import annotations

import csv
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

from normlab.cli import main
from normlab.core.errors import ConfigError, UserError
from normlab.run.dir import RunDir

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from test_pages import browse  # noqa: E402

STEPS = [0, 2, 4, 6, 8, 10]  # step 0: the model at initialisation
TOKENS = ["--max-tokens", "64", "--quiet"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import os

    if not (Path(os.environ.get("NORMLAB_DATA_DIR", "/nonexistent")) / "tinyshakespeare.txt").is_file():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    path = tmp_path_factory.mktemp("series") / "run"
    assert main(["train", "--preset", "smoke", "--out", str(path), "--quiet", "--set", "train.steps=10",
                 "--set", "train.checkpoint_every=2", "--set", "train.keep_checkpoints=true",
                 "--set", "train.eval_every=5", "--set", "train.device=cpu"]) == 0
    return path


def _rows(out: Path) -> list[dict]:
    with (out / "series.csv").open(newline="") as fh:
        return list(csv.DictReader(fh))


def _check_page(page: Path, tmp: Path, shot: str) -> str:
    html = page.read_text()
    text = re.sub(r'src="data:[^"]*"', "", html)
    assert text.find('class="lead"') < text.find("<figure") < text.find("<table")  # question and answer first
    assert "Over 6 checkpoints from step 0 to 10" in text
    # a heat map + lines figure per per-layer statistic inspect writes, and the loss against step
    figs = sorted(p.name for p in (page.parent / "figures").glob("series_*.png"))
    for want in ("series_rms_stream.png", "series_deletion_delta_block.png", "series_max_logit_attn.png",
                 "series_grad_norm_stream.png", "series_grad_norm_block.png", "series_loss.png"):
        assert want in figs
    lay = browse(page, tmp, shot)
    assert lay["errors"] == [] and lay["n"] == len(figs) and lay["bad"] == 0
    assert lay["answer"].startswith("Answer. Over 6 checkpoints")
    return text


def test_keep_checkpoints_keeps_every_checkpoint_step(run: Path) -> None:
    kept = RunDir(run).step_checkpoints()
    assert [s for s, _ in kept] == STEPS  # initialisation, then checkpoint_every=2 over 10 steps
    assert json.loads((kept[0][1] / "state.json").read_text())["loop"]["step"] == 0
    from safetensors.torch import load_file

    init, two = (load_file(kept[i][1] / "model.safetensors") for i in (0, 1))
    assert init.keys() == two.keys() and any(not torch.equal(init[k], two[k]) for k in init)  # trained in between
    from normlab.model.transformer import TransformerLM

    torch.manual_seed(RunDir(run).config().seed)  # the training's own init: same seed, same weights
    fresh = TransformerLM(RunDir(run).config().model).state_dict()
    assert set(init) <= set(fresh) and all(torch.equal(fresh[k], init[k]) for k in init)
    assert all(f.name == RunDir.step_name(s) and not (f / "optimizer.safetensors").exists() for s, f in kept)
    with pytest.raises(ConfigError, match="train.keep_checkpoints.*checkpoint_every > 0"):
        from normlab.run.resolve import RunConfig

        RunConfig.from_dict({"train": {"keep_checkpoints": True, "checkpoint_every": 0}})


@pytest.mark.slow
def test_series_of_a_lab_run_resumes_and_its_page_opens(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.inspect.series import inspect_series, step_dir

    monkeypatch.chdir(tmp_path)  # the default --out: inspect/<run name>-over-training
    out = Path("inspect") / "run-over-training"
    assert main(["inspect", "--series", str(run), *TOKENS]) == 0
    assert capsys.readouterr().out.strip() == str(out / "report" / "index.html")
    out = tmp_path / out
    rows = _rows(out)
    assert sorted({int(r["step"]) for r in rows}) == STEPS
    # each step's rows are exactly that step's own inspect output, with its step in front
    with (step_dir(out, 6) / "probe.csv").open(newline="") as fh:
        own = list(csv.DictReader(fh))
    assert [{k: v for k, v in r.items() if k != "step"} for r in rows if r["step"] == "6"] == own
    loss = {int(r["step"]): float(r["value"]) for r in rows if r["metric"] == "loss"}
    assert len(loss) == 6 and all(3.0 < v < 4.5 for v in loss.values())  # a char model near log(65)
    _check_page(out / "report" / "index.html", tmp_path, "series-lab")

    # a rerun measures nothing: same answer, no step folder rewritten
    stamps = {s: (step_dir(out, s) / "probe.csv").stat().st_mtime_ns for s in STEPS}
    again = inspect_series([str(run)], out, max_tokens=64, quiet=True, page=False)
    assert again["measured"] == [] and again["steps"] == STEPS
    assert {s: (step_dir(out, s) / "probe.csv").stat().st_mtime_ns for s in STEPS} == stamps

    # interrupted: two steps lost (one half-written); the rerun measures exactly those
    import shutil

    shutil.rmtree(step_dir(out, 4))
    step_dir(out, 8).rename(step_dir(out, 8).with_name("step_000008.tmp"))
    resumed = inspect_series([str(run)], out, max_tokens=64, quiet=True, page=False)
    assert resumed["measured"] == [4, 8]
    assert not step_dir(out, 8).with_name("step_000008.tmp").exists()
    assert [(r["step"], r["metric"], r["layer"], r["sublayer"]) for r in _rows(out)] == \
        [(r["step"], r["metric"], r["layer"], r["sublayer"]) for r in rows]
    # a rerun with other settings would mix two measurements: refused
    with pytest.raises(UserError, match="other settings.*max_tokens 64 -> 96"):
        inspect_series([str(run)], out, max_tokens=96, quiet=True, page=False)


@pytest.mark.slow
def test_series_of_the_exported_checkpoints(run: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from normlab.inspect.export import export_model
    from normlab.inspect.series import inspect_series

    hf = tmp_path / "hf"
    hf.mkdir()
    for s, folder in RunDir(run).step_checkpoints():
        export_model(folder, hf / RunDir.step_name(s))
    out = tmp_path / "out"
    got = inspect_series([str(hf)], out, max_tokens=64, quiet=True)
    assert got["measured"] == STEPS
    text = _check_page(got["page"], tmp_path, "series-hf")
    assert "family GPT-2" in text  # a Pre-LN LayerNorm lab model exports as GPT-2

    lab = tmp_path / "lab"
    inspect_series([str(run)], lab, max_tokens=64, quiet=True, page=False)
    # the same weights on the same tokens: the same loss and stream at every step
    for metric in ("loss", "rms"):
        a = {(r["step"], r["layer"]): float(r["value"]) for r in _rows(out) if r["metric"] == metric}
        b = {(r["step"], r["layer"]): float(r["value"]) for r in _rows(lab) if r["metric"] == metric}
        assert a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-4) for k in a), metric


def test_bad_series_input_is_one_line_and_status_2(run: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    short = tmp_path / "short"
    assert main(["train", "--preset", "smoke", "--out", str(short), "--quiet", "--set", "train.steps=2",
                 "--set", "train.device=cpu"]) == 0
    capsys.readouterr()
    one = RunDir(run).step_checkpoints()[0][1]
    cases = [
        (["--series", str(tmp_path / "nope")], "no such directory"),
        (["--series", str(short)], "kept no step checkpoints.*train.keep_checkpoints=true"),
        (["--series", str(one)], "1 checkpoint found; a series needs at least 2"),
        (["--series", str(run), "--series", str(one)], "step 0 is given twice"),
        ([str(run), "--series", str(run)], "give MODEL or --series SRC.*not both"),
        (["--series", str(tmp_path)], "neither a run, a checkpoint, nor a directory of step checkpoints"),
        (["--series", str(run), "--dtype", "int8"], "--dtype int8: use one of"),
    ]
    for i, (argv, match) in enumerate(cases):
        out = tmp_path / f"o{i}"
        assert main(["inspect", *argv, "--out", str(out), *TOKENS]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and re.search(match, err), err
        assert not out.exists()  # nothing written before the input is checked
