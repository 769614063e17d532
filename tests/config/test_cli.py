"""The CLI skeleton: help, version, presets, and the error contract (one line, exit 2)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from normlab import __version__
from normlab.cli import COMMANDS, build_parser, main


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "normlab", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_every_registered_command(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert len(sub.choices) >= len(COMMANDS)
    for name in sub.choices:
        assert name in out


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_presets_lists_names(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    for name in ("nanogpt-cpu", "baby-gpt", "seed-pet-project"):
        assert name in out


@pytest.mark.parametrize("command", ["config", "train"])
def test_bad_value_is_one_line_exit_2(command, tmp_path):
    r = run(command, "--set", "model.n_layer=abc", *(["--out", str(tmp_path / "run")] if command == "train" else []))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "model.n_layer" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()  # nothing created for a refused config


def test_unknown_key_suggests_and_exits_2():
    r = run("config", "--set", "optim.l=1e-3")
    assert r.returncode == 2
    assert "did you mean 'optim.lr'" in r.stderr


def test_unknown_preset_lists_valid(capsys):
    assert main(["config", "--preset", "nanogpt"]) == 2
    err = capsys.readouterr().err
    assert "--preset" in err and "nanogpt-cpu" in err


def test_config_refuses_an_unknown_logger_listing_the_valid_ones(capsys):
    """The config layer leaves logger names to training; `normlab config` still checks them."""
    assert main(["config", "--set", 'train.loggers=["tensorbored"]']) == 2
    err = capsys.readouterr().err
    assert "train.loggers" in err and "did you mean 'tensorboard'" in err and "valid: jsonl, tensorboard, wandb" in err
    assert main(["config", "--set", 'train.loggers=["tensorboard"]']) == 0  # its package need not be installed


def test_unknown_command_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2


def test_internal_errors_keep_their_traceback(monkeypatch):
    """A bug is not a user error: it must propagate (Python prints the traceback, exit 1)."""
    import normlab.cli.config_cmd as cc

    def boom(args):
        raise RuntimeError("bug")

    monkeypatch.setattr(cc, "_presets", boom)
    with pytest.raises(RuntimeError):
        main(["presets"])


def test_config_explain_documents_every_field(capsys):
    assert main(["config", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "model.placement" in out and "optim.warmup_steps" in out


def test_closed_pipe_is_not_an_error():
    """`normlab placements | head -1` must not print a BrokenPipe traceback: here the
    reader is closed before the command writes anything, so every write fails (EPIPE)."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "normlab", "placements"], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr


def test_import_and_help_do_not_load_torch():
    """Public names load lazily: `import normlab` and `normlab --help` stay free of torch."""
    code = ("import sys, normlab, normlab.study; from normlab.cli import build_parser; build_parser(); "
            "assert 'torch' not in sys.modules, 'torch imported'; "
            "assert normlab.ModelConfig.__name__ == 'ModelConfig'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
