"""The benchmark scripts import, take --json, and write target rows targets.py can read."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def _load(path: Path):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_script_imports_without_running(path: Path, capsys: pytest.CaptureFixture) -> None:
    mod = _load(path)  # no import-time work: nothing printed, nothing timed
    assert callable(mod.main) and capsys.readouterr().out == ""


@pytest.mark.parametrize("path", [p for p in SCRIPTS if p.stem not in ("compile_cpu", "targets")],
                         ids=lambda p: p.stem)
def test_target_scripts_take_json(path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(sys, "argv", [path.name, "--help"])
    with pytest.raises(SystemExit) as e:
        _load(path).main()
    assert e.value.code == 0 and "--json" in capsys.readouterr().out


def test_target_rows_round_trip(tmp_path: Path) -> None:
    common = _load(BENCH / "_common.py")
    rows = [common.target("a", "1.10x", ">= 1.3x", False), common.target("b", "2%", "< 5%", True),
            common.target("c", "no GPU", "-", None)]
    common.write_targets(tmp_path / "t.json", rows)
    got = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert [r["verdict"] for r in got] == ["MISSED", "met", "n/a"]
    common.write_targets(None, rows)  # no --json: writes nothing, raises nothing


FAKE_NANOGPT = """
from dataclasses import dataclass

import torch.nn.functional as F
from torch import nn

from normlab.bench.handwritten import HandGPT


@dataclass
class GPTConfig:  # the fields vs_nanogpt.py passes, as nanoGPT's model.py names them
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.inner = HandGPT(config.vocab_size, config.block_size, config.n_layer, config.n_embd, config.n_head,
                             "gelu_tanh")
        self.unused = nn.GELU(approximate="tanh")  # what activation_of finds in a module tree

    def forward(self, idx, targets=None):
        logits = self.inner(idx)
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())
"""


@pytest.mark.parametrize("checkout", [False, True], ids=["stand-in", "checkout"])
def test_vs_nanogpt_runs_end_to_end_and_names_each_sides_activation(
        checkout: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Two steps at a test's size: both sides' GELU printed, steps alternated, a target row per
    size (the timing itself is never asserted)."""
    from normlab.bench.peers import SIZES, Size, model_config

    SIZES.names()  # filled first: the patch undoes only its own entry
    monkeypatch.setitem(SIZES._items, "t", Size(1, 16, 2, 8, 2))
    argv = ["vs_nanogpt.py", "--sizes", "t", "--steps", "2", "--warmup", "1", "--json", str(tmp_path / "v.json")]
    if checkout:
        (tmp_path / "nanogpt").mkdir()
        (tmp_path / "nanogpt" / "model.py").write_text(FAKE_NANOGPT)
        argv += ["--nanogpt", str(tmp_path / "nanogpt")]
    mod = _load(BENCH / "vs_nanogpt.py")
    order: list[str] = []
    step = mod.Side.step
    monkeypatch.setattr(mod.Side, "step", lambda self, record=True: (order.append(self.name[:4]), step(self, record)))
    monkeypatch.setattr(sys, "argv", argv)
    mod.main()
    out = capsys.readouterr().out
    ours = model_config(SIZES.get("t")).activation
    theirs = "gelu_tanh" if checkout else "gelu"
    assert f"normlab (TransformerLM, the shipped ModelConfig): activation {ours}" in out
    assert f"): activation {theirs}" in out and ("nanoGPT (" if checkout else "nanoGPT stand-in") in out
    assert order == ["norm", "nano"] + ["norm", "nano", "nano", "norm"], order  # warm-up, then alternated
    rows = json.loads((tmp_path / "v.json").read_text())["rows"]
    assert len(rows) == 1 and rows[0]["goal"] == ">= 0.97x" and rows[0]["verdict"] in ("met", "MISSED")
    assert f"normlab ({ours}) vs" in rows[0]["target"] and f"({theirs}), forward + backward" in rows[0]["target"]
