"""A third-party package, installed with pip, adds a placement, a statistic and a logger through
the ``normlab.plugins`` entry point: `normlab placements` lists the placement, a smoke run trains
with it and logs to the logger, and the probe writes the statistic's rows."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import normlab

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "normlab-scaled"
version = "0.1.0"

[project.entry-points."normlab.plugins"]
scaled = "normlab_scaled:register"

[tool.setuptools]
py-modules = ["normlab_scaled"]
"""

# The page's example (docs/plugins.md), plus a logger that keeps what it is given.
MODULE = '''\
import json
from dataclasses import dataclass

from normlab.diagnostics.statistic import Statistic
from normlab.model.placement import Placement, PlacementOptions
from normlab.schema import doc
from normlab.train.loggers import Logger


class ScaledPre(Placement):
    """Pre-LN with the branch output scaled by c."""

    @dataclass
    class Options(PlacementOptions):
        scale: float = doc("c, the factor on the branch output", 1.0)

        def __post_init__(self) -> None:
            self.check(self.scale > 0, "scale", "must be > 0, e.g. 0.5")

    formula = "x <- x + c * F(LN(x))"
    source = "the normlab-scaled plugin"

    def __init__(self, branch, site):
        super().__init__(branch, site)
        self.norm = site.norm()

    def forward(self, x):
        return x + self.options.scale * self.branch(self.norm(x))


def mean_abs(c):
    return c.stream.stacked.abs().mean(dim=(1, 2, 3))


class Recorder(Logger):
    """Keeps every logged step in RUN/recorder.jsonl."""

    def log(self, metrics, step):
        with open(self.run_dir / "recorder.jsonl", "a") as f:
            f.write(json.dumps({"step": step, **metrics}) + "\\n")

    def finish(self, summary):
        (self.run_dir / "recorder-summary.json").write_text(json.dumps(summary))


def register(lab):
    lab.placements.add("scaled_pre", ScaledPre)
    lab.statistics.add("mean_abs", Statistic("mean_abs", "states", frozenset({"stream"}),
                                             "E|x| of the stream", mean_abs, "E|x|"))
    lab.loggers.add("recorder", Recorder)
'''

# One interpreter for the three commands (torch is imported once); each is the CLI's main.
SCRIPT = """\
import sys
from normlab.cli import main
sys.exit(max(main(a) for a in [
    ["placements"],
    ["train", "--preset", "smoke", "--set", "train.steps=3", "--set", "data.corpus='{corpus}'",
     "--set", 'model.placement={{name = "scaled_pre", scale = 0.5}}', "--set", 'train.loggers=["recorder"]',
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


def test_an_installed_plugin_adds_a_placement_a_statistic_and_a_logger(tmp_path: Path, corpus: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "normlab_scaled.py").write_text(MODULE)
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
    # The logger got what the run's own metrics.jsonl got, and the summary at the end.
    own = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    kept = [json.loads(line) for line in (run / "recorder.jsonl").read_text().splitlines()]
    assert kept == own and own[-1]["step"] == 3
    assert json.loads((run / "recorder-summary.json").read_text())["status"] == "completed"

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
