"""`normlab probe --measure KEYS`: the named measurements of diagnostics/measurements.py written
to DIR/measurements.json exactly as ``measure_extra`` gives them (per seed), beside the probe's
own files; an unknown key is refused in one line listing the valid ones, exit 2, nothing written."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from normlab.cli import main
from normlab.cli.probe_cmd import _measure_keys, _ref_depth
from normlab.core.errors import UserError
from normlab.diagnostics.measurements import EXTRAS, measure_extra

PROBE = ["probe", "--placements", "pre", "--depths", "2,3", "--d-model", "16", "--n-head", "2", "--seeds", "2",
         "--data", "random", "--n-proj", "0"]


def _as_written(obj: Any) -> Any:
    """What JSON gives back of ``obj`` with NaN as null (depths as keys become strings)."""
    if isinstance(obj, dict):
        return {str(k): _as_written(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_as_written(v) for v in obj]
    return None if isinstance(obj, float) and not math.isfinite(obj) else obj


def test_measure_writes_what_measure_extra_gives(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p"
    keys = ["identity:pre", "one_step:post"]  # one_step:post's branch share is NaN: written as null
    assert main([*PROBE, "--measure", ",".join(keys), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "measured identity:pre, one_step:post over 2 seeds (reference depth 3)" in printed
    assert "measurements.json" in printed
    assert {"probe.csv", "summary.json", "probe_config.json", "measurements.json"} <= {p.name for p in out.iterdir()}
    got = json.loads((out / "measurements.json").read_text())
    assert got["settings"]["keys"] == keys and got["settings"]["ref_depth"] == 3
    assert got["settings"]["depths"] == [2, 3] and got["settings"]["seeds"] == 2
    direct: dict[str, Any] = {}
    for key in keys:
        measure_extra(key, direct, 2, [2, 3], 3)
    assert got["measurements"] == _as_written(direct)
    assert len(got["measurements"]["identity"]["pre"]) == 2  # a value (here a profile) per seed
    assert len(got["measurements"]["identity"]["pre"][0]) == 3  # at the reference depth: 3 blocks
    assert got["measurements"]["one_step"]["post"]["3"][0]["branch_share"] is None


def test_unknown_key_is_refused_and_nothing_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p"
    assert main([*PROBE, "--measure", "identity:pre,identity:sideways", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--measure='identity:sideways'" in err
    assert all(k in err for k in ("all", *EXTRAS)), err
    assert not out.exists()


def test_keys_and_reference_depth() -> None:
    assert _measure_keys(["rms", "identity:pre", "rms"]) == ["rms", "identity:pre"]
    assert _measure_keys(["all"]) == list(EXTRAS)
    with pytest.raises(UserError, match="did you mean 'identity:post'"):
        _measure_keys(["identity:posts"])
    # the claims' reference depth: 16 when probed, else the largest below it, else the largest
    assert (_ref_depth([2, 4, 8, 16, 32]), _ref_depth([2, 3]), _ref_depth([20, 32])) == (16, 3, 32)


def test_force_without_measure_drops_the_stale_measurements(tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert main([*PROBE, "--measure", "rms", "--out", str(out), "--quiet"]) == 0
    assert (out / "measurements.json").is_file()
    assert main([*PROBE, "--out", str(out), "--quiet"]) == 2  # a probe is there: refused as before
    assert main([*PROBE, "--out", str(out), "--quiet", "--force"]) == 0
    assert not (out / "measurements.json").exists() and (out / "probe.csv").is_file()
