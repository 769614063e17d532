"""The stability map with width and parametrisation as axes (``stability-map-width``): trained
at smoke scale, its page draws one map per placement x width x parametrisation, the frontier
section its critical lr against width, and the trial table labels each trial with its variant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_width_map_trains_and_its_page_splits_every_variant(tmp_path: Path, data_dir, capsys) -> None:  # noqa: ARG001
    from normlab.cli import main
    from normlab.study.width_map_preset import GRID

    store = tmp_path / "s"
    assert main(["study", "run", "stability-map-width", "--scale", "smoke", "--store", str(store), "--workers", "1",
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["report", str(store), "--quiet"]) == 0
    html = Path(capsys.readouterr().out.strip()).read_text()
    maps = sorted(f for f in re.findall(r'<figure id="fig-([^"]+)"', html) if f.startswith("map_"))
    widths = GRID["smoke"]["widths"]
    assert maps == sorted(f"map_{p}_d_model_{w}_param_{q}" for p in ("post", "pre") for w in widths
                          for q in ("mup", "sp"))
    assert f"pre (d_model={widths[-1]}, param=mup)" in html
