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
