"""Bad input that used to be answered with the wrong words: each case is one line, exit 2, naming
the right thing and the fix (the cases of test_paths.py check the kind of path; these check the
words). And reading a finished run never looks up names only training needs; plain progress
lines, never a redrawn bar, when stderr is piped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .cli_cases import run_case, trained_run

SRC = Path(__file__).resolve().parents[2] / "src"
TINY = ["--quiet", "--set", "train.steps=2", "--set", "model.n_layer=1", "--set", "model.d_model=16",
        "--set", "model.n_head=1", "--set", "model.context=8", "--set", "train.batch_size=2"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = trained_run(tmp_path_factory, "wordings", "train.steps=10", "train.eval_every=5").parent
    (root / "texts").mkdir()
    for weights in ("model.safetensors", "pytorch_model.bin"):  # what save_pretrained writes
        hf = root / f"hf-{weights.split('.')[0]}"
        hf.mkdir()
        (hf / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
        (hf / weights).write_bytes(b"")
    return {"root": root, "run": root / "run", "texts": root / "texts", "new": root / "nothing" / "here",
            "hf_st": root / "hf-model", "hf_bin": root / "hf-pytorch_model"}


# (id, argv, words the one line must hold, words it must not)
WORDINGS = [
    ("corpus is a directory", ["train", "--out", "{new}", "--set", "data.corpus={texts}", *TINY],
     ["data.corpus=", "a folder without manifest.json", "give a text file"], ["no such file"]),
    # 20000 layers need over a TB of activations (100000, the report's case, build a shape-only
    # model of several GB first: the same rule, at a size a test can afford)
    ("n_layer blamed, not the context", ["train", "--out", "{new}", "--set", "model.n_layer=20000",
                                         "--set", "train.device=cpu", "--quiet"],
     ["model.n_layer=20000: one step"], ["model.context=128:"]),
    ("HF folder as --init-from (safetensors)", ["train", "--out", "{new}", "--init-from", "{hf_st}", *TINY],
     ["Hugging Face checkpoint", "normlab import {hf_st} DIR", "--init-from DIR"], []),
    ("HF folder as --init-from (pytorch_model.bin)", ["train", "--out", "{new}", "--init-from", "{hf_bin}", *TINY],
     ["Hugging Face checkpoint", "normlab import {hf_bin} DIR"], ["no model.safetensors"]),
    ("study status on a run", ["study", "status", "{run}"],
     ["a training run directory, not a study store", "normlab report {run}"], ["--store {run}"]),
]


@pytest.mark.parametrize("argv, want, never", [w[1:] for w in WORDINGS], ids=[w[0] for w in WORDINGS])
def test_the_error_names_the_right_thing(world, argv, want, never, monkeypatch):
    monkeypatch.chdir(world["root"])
    names = {k: str(v) for k, v in world.items()}
    case = run_case([a.format(**names) for a in argv])
    lines = case["err"].strip().splitlines()
    assert case["traceback"] is None and case["rc"] == 2 and len(lines) == 1, case
    for w in want:
        assert w.format(**names) in lines[0], lines[0]
    for w in never:
        assert w.format(**names) not in lines[0], lines[0]
    assert not world["new"].parent.exists()


def test_a_run_whose_logger_plugin_is_gone_is_still_read_but_not_trained(world, tmp_path, monkeypatch):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(world["run"], run)
    cfg = json.loads((run / "config.json").read_text())
    cfg["train"]["loggers"] = ["jsonl", "tsv"]  # 'tsv' came from a plugin uninstalled since
    (run / "config.json").write_text(json.dumps(cfg))
    monkeypatch.chdir(tmp_path)
    for argv in (["sample", str(run), "--tokens", "5"], ["inspect", str(run), "--out", "ins", "--quiet"],
                 ["report", "--quiet", str(run), "--out", "page"], ["analyze", str(run), "--out", "an"]):
        case = run_case(argv)
        assert case["rc"] == 0, case
    case = run_case(["train", "--quiet", "--resume", str(run), "--steps", "12"])
    assert case["rc"] == 2 and "train.loggers" in case["err"] and "'tsv'" in case["err"], case
    assert "valid: jsonl, tensorboard, wandb" in case["err"], case["err"]


def test_inspect_with_stderr_piped_prints_plain_lines(world, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1",
           "NORMLAB_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "normlab", "inspect", str(world["run"]), "--out",
                           str(tmp_path / "ins")], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\x1b" not in proc.stderr, repr(proc.stderr)
    assert "normlab inspect: done 2/2 layers" in proc.stderr, proc.stderr  # progress is still shown
