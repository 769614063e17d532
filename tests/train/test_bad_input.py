"""Bad input around runs (issue 16): one line naming the field and the fix, exit 2, nothing
created or changed. Each test failed before its fix (see the CHANGELOG entry)."""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
from pathlib import Path

import pytest

from normlab.cli import main


def _snapshot(d: Path) -> dict:
    return {p: p.read_bytes() for p in d.rglob("*") if p.is_file()}


def _one_line(capsys, cmd: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"normlab {cmd}: error: "), err
    return err


def test_missing_logger_package_creates_nothing(tmp_path, tiny, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError, as when not installed
    out = tmp_path / "run"
    assert main(["train", "--quiet", "--out", str(out), *tiny.args('train.loggers=["wandb"]')]) == 2
    err = _one_line(capsys, "train")
    assert "train.loggers" in err and "pip install 'normlab[wandb]'" in err
    assert not out.exists()  # no config.json/env.json left to block --out and --resume


def test_list_option_without_brackets_shows_the_list_syntax(tmp_path, tiny, capsys):
    out = tmp_path / "run"
    assert main(["train", "--quiet", "--out", str(out), *tiny.args("train.loggers=tensorboard")]) == 2
    err = _one_line(capsys, "train")
    assert "train.loggers" in err and """'train.loggers=["tensorboard"]'""" in err
    assert not out.exists()


def test_a_step_that_cannot_fit_this_machine_is_refused_with_the_numbers(tmp_path, capsys):
    # no corpus needed: the budget is checked before the corpus is read (or downloaded)
    out = tmp_path / "run"
    rc = main(["train", "--quiet", "--out", str(out), "--set", "model.context=100000", "--set", "train.device=cpu",
               "--set", "train.threads=1"])
    assert rc == 2
    err = _one_line(capsys, "train")
    assert "model.context=100000: one step" in err and "GiB" in err and "train.batch_size" in err, err
    assert not out.exists()


def test_slow_steps_are_refused_or_warned_from_the_measured_rate(monkeypatch, caplog):
    import torch

    from normlab.core.errors import UserError
    from normlab.run.resolve import resolve
    from normlab.train import budget

    cfg = resolve(None, None, None, ["model.context=4096", "train.batch_size=8"])
    est = budget.estimate(cfg.model, cfg.train)
    monkeypatch.setattr(budget, "free_memory", lambda device: est.bytes * 2)
    monkeypatch.setattr(budget, "matmul_rate", lambda device: est.flops / 1000 / budget.EFFICIENCY)  # 1000 s a step
    with pytest.raises(UserError, match=r"model.context=4096: one step is about .* FLOP, 17 min"):
        budget.check_step_fits(cfg.model, cfg.train, torch.device("cpu"))
    monkeypatch.setattr(budget, "matmul_rate", lambda device: est.flops / 60 / budget.EFFICIENCY)  # 60 s a step: go, but say so
    with caplog.at_level(logging.WARNING, logger="normlab"):
        budget.check_step_fits(cfg.model, cfg.train, torch.device("cpu"))
    assert [r.levelname for r in caplog.records if r.getMessage().startswith("one step is about")] == ["WARNING"]
    monkeypatch.setattr(budget, "free_memory", lambda device: est.bytes / 2)
    with pytest.raises(UserError, match="GiB on cpu"):
        budget.check_step_fits(cfg.model, cfg.train, torch.device("cpu"))


def test_model_config_of_the_wrong_type_from_python_names_the_field():
    from normlab import ConfigError, ModelConfig

    with pytest.raises(ConfigError) as e:
        ModelConfig(n_layer="4")
    assert str(e.value) == "model.n_layer='4': expected an integer"
    with pytest.raises(ConfigError, match="model.dropout='0.1': expected a number"):
        ModelConfig(dropout="0.1")
    assert ModelConfig(dropout=0).dropout == 0.0 and isinstance(ModelConfig(dropout=0).dropout, float)


def test_sample_of_a_non_run_names_its_own_argument(tmp_path, capsys):
    assert main(["sample", str(tmp_path / "notarun")]) == 2
    err = _one_line(capsys, "sample")
    assert "--resume" not in err and "notarun: no config.json there" in err


def test_resume_of_a_finished_run_says_so_and_steps_extends_it(tmp_path, tiny, capsys):
    run = tmp_path / "run"
    assert main(["train", "--quiet", "--out", str(run), *tiny.args("train.steps=10")]) == 0
    capsys.readouterr()
    before = _snapshot(run)
    assert main(["train", "--quiet", "--resume", str(run)]) == 0
    err = capsys.readouterr().err
    assert "already completed at step 10; nothing to do" in err and f"--resume {run} --steps N" in err
    assert _snapshot(run) == before
    assert main(["train", "--quiet", "--resume", str(run), "--steps", "5"]) == 2  # fewer than done
    assert "give a larger total" in _one_line(capsys, "train")
    assert _snapshot(run) == before
    assert main(["train", "--quiet", "--resume", str(run), "--steps", "20"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 20
    assert json.loads((run / "config.json").read_text())["train"]["steps"] == 20
    steps = [r["step"] for r in tiny.comparable(run)]
    assert steps == list(range(5, 21, 5))


def test_probe_refuses_to_overwrite_unless_forced(tmp_path, capsys, data_dir):
    out = tmp_path / "probe"
    args = ["probe", "--placements", "pre", "--depths", "1", "--d-model", "16", "--n-head", "2", "--seeds", "1",
            "--batch-size", "2", "--context", "8", "--n-proj", "0", "--quiet", "--out", str(out)]
    assert main(args) == 0
    (out / "report").mkdir()
    (out / "report" / "index.html").write_text("stale")
    before = _snapshot(out)
    assert main([*args[:-3], "--seeds", "2", "--quiet", "--out", str(out)]) == 2
    err = _one_line(capsys, "probe")
    assert f"--out {out}: already holds a probe" in err and "--force" in err
    assert _snapshot(out) == before
    assert main([*args, "--force"]) == 0
    assert not (out / "report").exists()  # the report of the replaced probe is gone, not stale


def test_result_files_respect_the_umask(tmp_path, tiny, data_dir):
    mask = os.umask(0o022)
    os.umask(mask)
    want = 0o666 & ~mask
    run = tmp_path / "run"
    assert main(["train", "--quiet", "--out", str(run), *tiny.args("train.steps=2", "train.eval_every=0")]) == 0
    probe = tmp_path / "probe"
    assert main(["probe", "--placements", "pre", "--depths", "1", "--d-model", "16", "--n-head", "2", "--seeds",
                 "1", "--batch-size", "2", "--context", "8", "--n-proj", "0", "--quiet", "--out", str(probe)]) == 0
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [*run.iterdir(), *probe.iterdir()] if p.is_file()}
    assert modes["metrics.jsonl"] == want
    assert {n: m for n, m in modes.items() if m != want} == {}, modes


@pytest.mark.parametrize("memory", [True, False])
def test_a_step_too_big_names_its_field_in_the_fix_too(monkeypatch, memory):
    """d_model=65536 is blamed, and the fix says to lower d_model, not only the other fields."""
    import torch

    from normlab.core.errors import UserError
    from normlab.run.resolve import resolve
    from normlab.train import budget

    cfg = resolve(None, None, None, ["model.d_model=65536"])
    est = budget.estimate(cfg.model, cfg.train)
    monkeypatch.setattr(budget, "free_memory", lambda device: est.bytes / 2 if memory else est.bytes * 2)
    monkeypatch.setattr(budget, "matmul_rate", lambda device: est.flops / 1000 / budget.EFFICIENCY)  # 1000 s a step
    with pytest.raises(UserError) as e:
        budget.check_step_fits(cfg.model, cfg.train, torch.device("cpu"))
    msg = str(e.value)
    assert msg.startswith("model.d_model=65536: ") and "; lower model.d_model, or else " in msg, msg
    assert all(k in msg for k in budget.GROWERS), msg
    assert ("grad_accum" in msg) == memory, msg  # more pieces of a batch save memory, not FLOPs
