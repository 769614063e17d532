"""Validate, then run (issue 23): every name, option, budget and path is checked before the
corpus is read or downloaded, before DDP and before RUN exists; the flags of `normlab train`
reach the config through the same path as --set, so `normlab config` shows what it runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normlab.cli import main


@pytest.fixture
def no_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty data dir and cache, no network, and a corpus reader that fails the test if called."""
    from normlab.data import corpus, source
    from normlab.train import env

    empty = tmp_path / "data"
    empty.mkdir()
    monkeypatch.setenv("NORMLAB_DATA_DIR", str(empty))
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(empty))

    def touched(*args: object, **kwargs: object) -> None:
        raise AssertionError("the corpus was read (or a download tried) before the input was checked")

    monkeypatch.setattr(source, "download", touched)
    monkeypatch.setattr(corpus, "read_corpus_bytes", touched)
    monkeypatch.setattr(env, "init_dist", touched)
    return empty


def _model_dir(tmp_path: Path) -> Path:
    """A tiny saved model (model.safetensors + model_config.json), as `normlab import` leaves one."""
    from normlab.model.config import ModelConfig
    from normlab.model.transformer import TransformerLM

    return TransformerLM(ModelConfig(n_layer=1, d_model=16, n_head=2, context=8)).save(tmp_path / "model")


BAD = {  # name: (arguments, what the one line must say)
    "placement": (["--placement", "prenorm"], "model.placement='prenorm': unknown name (did you mean 'pre'?)"),
    "option key": (["--set", "optim.l=1e-3"], "did you mean 'optim.lr'"),
    "placement option": (["--set", 'model.placement={name="admin", omgea="profile"}'], "model.placement.omgea"),
    "norm": (["--set", "model.norm=layernrom"], "model.norm='layernrom'"),
    "logger": (["--set", 'train.loggers=["tensorbord"]'], "train.loggers"),
    "init-from": (["--init-from", "{tmp}/nothing"], "--init-from"),
    "budget": (["--set", "model.context=100000", "--set", "train.device=cpu"], "model.context=100000: one step"),
    "batch split": (["--set", "train.batch_size=6", "--set", "train.grad_accum=4"], "train.grad_accum"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_fails_before_the_corpus_is_touched(case, no_corpus, tmp_path, capsys):
    args, said = BAD[case]
    out = tmp_path / "run"
    argv = ["train", "--quiet", "--out", str(out), *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("normlab train: error: ") and said in err, err
    assert list(no_corpus.iterdir()) == [] and not out.exists()


def test_python_api_checks_names_before_the_corpus(no_corpus, tmp_path):
    from normlab.core.errors import ConfigError
    from normlab.run.resolve import resolve
    from normlab.train import run_training

    with pytest.raises(ConfigError, match="model.placement='prenorm'"):
        run_training(resolve(placement="prenorm"), tmp_path / "run", quiet=True)
    assert not (tmp_path / "run").exists()


def test_an_unwritable_out_fails_before_the_corpus(no_corpus, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["train", "--quiet", "--out", str(tmp_path / "file" / "run")]) == 2
    assert "is a file" in capsys.readouterr().err


def test_flags_are_fields_like_set(tmp_path):
    from normlab.run.resolve import resolve

    # --steps N is train.steps=N: eval_every (none) then follows the new total, as with --set
    flag = resolve(options={"train.steps": 100, "train.diag_every": 5, "data.data_dir": "d"})
    typed = resolve(overrides=["train.steps=100", "train.diag_every=5", "data.data_dir=d"])
    assert flag == typed and flag.train.eval_every == 12
    assert resolve(overrides=["train.steps=5"], options={"train.steps": 7}).train.steps == 7  # flags win
    assert resolve(options={"data.data_dir": "123"}).data.data_dir == "123"  # typed: never re-parsed
    model = _model_dir(tmp_path)
    by_flag = resolve("nanogpt-cpu", None, "post", ["model.context=4"], options={"train.init_from": str(model)})
    by_set = resolve("nanogpt-cpu", None, "post", ["model.context=4", f"train.init_from={model}"])
    assert by_flag == by_set
    # DIR's model under the user's keys; the preset's model section is not used
    assert (by_flag.model.d_model, by_flag.model.placement, by_flag.model.context) == (16, "post", 4)
    assert by_flag.train.init_from == str(model) and by_flag.train == resolve("nanogpt-cpu", None, None, [
        f"train.init_from={model}"]).train


def test_config_prints_the_config_train_runs(tiny, data_dir, tmp_path, capsys, monkeypatch):
    # the data dir through a link, named relative to the working directory: the run writes it
    # absolute and resolved, and so must `normlab config` (it printed the path as typed)
    (tmp_path / "link").symlink_to(data_dir)
    monkeypatch.chdir(tmp_path)
    args = [*tiny.args("train.steps=4", "train.eval_every=2"), "--placement", "post", "--steps", "6",
            "--diag-every", "3", "--data-dir", "link"]
    assert main(["config", *args]) == 0
    shown = json.loads(capsys.readouterr().out)
    run = tmp_path / "run"
    assert main(["train", "--quiet", "--out", str(run), *args]) == 0
    assert json.loads((run / "config.json").read_text()) == shown
    assert (shown["train"]["steps"], shown["train"]["diag_every"]) == (6, 3)
