"""A third-party package, installed with pip, adds a placement, a statistic and a logger through
the ``normlab.plugins`` entry point: `normlab placements` lists the placement, a smoke run trains
with it and logs to the logger, and the probe writes the statistic's rows."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import normlab

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def _example(lang: str) -> str:
    """The page's first ``lang`` block: the test installs the example readers copy."""
    found = re.search(rf"^```{lang}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.M | re.S)
    assert found is not None, f"docs/plugins.md has no {lang} block"
    return found.group(1)


# One interpreter for the three commands (torch is imported once); each is the CLI's main.
SCRIPT = """\
import sys
from normlab.cli import main
sys.exit(max(main(a) for a in [
    ["placements"],
    ["train", "--preset", "smoke", "--set", "train.steps=3", "--set", "data.corpus='{corpus}'",
     "--set", 'model.placement={{name = "scaled_pre", scale = 0.5}}', "--set", 'train.loggers=["tsv"]',
     "--out", "{run}", "--quiet"],
    ["probe", "--placements", "scaled_pre,pre", "--depths", "2", "--d-model", "16", "--n-head", "2",
     "--seeds", "1", "--context", "16", "--data", "random", "--out", "{probe}", "--quiet"],
]))
"""


def _env(tmp_path: Path, *paths: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NORMLAB_")}
    src = Path(normlab.__file__).resolve().parents[1]  # this checkout's package, not an installed one
    env.update(PYTHONPATH=os.pathsep.join(str(p) for p in [src, *paths]), OMP_NUM_THREADS="1",
               NORMLAB_CACHE_DIR=str(tmp_path / "cache"))
    return env


@pytest.mark.slow
def test_an_installed_plugin_adds_a_placement_a_statistic_and_a_logger(tmp_path: Path, corpus: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(_example("toml"))
    (pkg / "normlab_scaled.py").write_text(_example("python"))
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(site), str(pkg)], check=True, cwd=tmp_path, capture_output=True)
    assert list(site.glob("normlab_scaled-*.dist-info/entry_points.txt"))

    run, probe = tmp_path / "run", tmp_path / "probe"
    script = SCRIPT.format(corpus=corpus, run=run, probe=probe)
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_env(tmp_path, site),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]

    listed = [line.split()[0] for line in out.stdout.splitlines() if line.strip()]
    assert "scaled_pre" in listed and "post" in listed
    assert "scaled_pre.scale (a number, default 1.0): c, the factor on the branch output" in out.stdout

    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 3
    assert json.loads((run / "config.json").read_text())["model"]["placement"] == {"name": "scaled_pre", "scale": 0.5}
    # The logger got every logged step, with the numbers metrics.jsonl has.
    own = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    kept = [line.split("\t") for line in (run / "tsv" / "losses.tsv").read_text().splitlines()]  # its declared folder
    assert not (run / "losses.tsv").exists()
    assert [int(k[0]) for k in kept] == [m["step"] for m in own] and own[-1]["step"] == 3
    assert [float(k[1]) for k in kept] == [m["train/loss"] for m in own]
    assert kept[-1][2] == repr(own[-1]["val/loss"])  # the last step evaluates

    # The statistic has its L + 1 stream rows per model, and E|x| <= sqrt(E x^2) row by row.
    rows = [r for r in csv.DictReader((probe / "probe.csv").open()) if r["sublayer"] == "stream"]
    for placement in ("scaled_pre", "pre"):
        def values(metric: str, placement: str = placement) -> dict[str, float]:
            return {r["layer"]: float(r["value"]) for r in rows if r["metric"] == metric and r["placement"] == placement}

        mine, sq = values("mean_abs"), values("mean_sq")
        assert sorted(mine) == ["0", "1", "2"] and mine.keys() == sq.keys()
        assert all(0 < mine[k] <= sq[k] ** 0.5 * (1 + 1e-6) for k in mine), (mine, sq)


def test_a_broken_installed_plugin_stops_the_command_with_one_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "broken_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "broken_plugin-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\n"
                                                                   "Version: 1.0\n")
    (site / "broken_plugin-1.0.dist-info" / "entry_points.txt").write_text("[normlab.plugins]\nbroken = broken:register\n")
    (site / "broken.py").write_text("import not_installed_anywhere\n")
    out = subprocess.run([sys.executable, "-m", "normlab", "placements"], cwd=tmp_path, env=_env(tmp_path, site),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == ("normlab placements: error: plugin 'broken' (broken:register): ModuleNotFoundError: "
                          "No module named 'not_installed_anywhere' (fix or uninstall the plugin, or set "
                          "NORMLAB_NO_PLUGINS=1 to run without plugins)\n")
