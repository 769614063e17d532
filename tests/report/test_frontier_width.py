"""Width and parametrisation as frontier axes: a synthetic store whose critical lr stays put
across widths under muP and falls under SP gives one line per placement x width x
parametrisation, width contrasts against the narrowest width that read ~0 and < 0, and a page
with the critical lr drawn against width. A study without these axes keeps its lines, contrast
texts and figures as before (tests/report/test_frontier_page.py)."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402

LRS = [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]
# (param, width) -> the first lr index at which Pre-LN's seeds stop training: flat under muP,
# one lr (a factor 2) lower per doubling of width under SP
CRIT = {("mup", 64): 3, ("mup", 128): 3, ("mup", 256): 3, ("sp", 64): 4, ("sp", 128): 3, ("sp", 256): 2}


def _store(d: Path) -> Path:
    d.mkdir(parents=True)
    spec = {"name": "width-sweep", "trial": "train", "seeds": [0, 1, 2], "base": {"optim": {"schedule": "constant"}},
            "axes": {"model.param": ["sp", "mup"], "model.d_model": [64, 128, 256], "optim.lr": LRS}}
    (d / "spec.json").write_text(json.dumps(spec))
    from normlab.study.store_db import SCHEMA as _SCHEMA
    from normlab.study.store_db import SCHEMA_VERSION

    con = sqlite3.connect(d / "study.sqlite")
    con.executescript(_SCHEMA)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    i = 0
    for (param, width), crit in CRIT.items():
        for j, lr in enumerate(LRS):
            for s in (0, 1, 2):
                tid = f"t{i:04d}"
                i += 1
                run = synth.write_run(d / "runs" / tid, "pre", s, lr, 0, stalled=j >= crit)
                params = {"model.placement": "pre", "model.param": param, "model.d_model": width, "optim.lr": lr,
                          "seed": s}
                con.execute("INSERT INTO trials (id, idx, params, config, status, attempts, worker, started_at,"
                            " finished_at, heartbeat, error, summary, run_dir) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            (tid, i, json.dumps(params), (run / "config.json").read_text(), "completed", 1, "w0",
                             0.0, 1.0, 1.0, None, (run / "summary.json").read_text(), f"runs/{tid}"))
    con.commit()
    con.close()
    return d


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _store(tmp_path_factory.mktemp("width") / "s")


def test_lines_split_by_width_and_param_and_width_contrasts_read_flat_and_falling(store: Path, data_dir) -> None:
    from normlab.study.frontier import contrasts, frontiers
    from normlab.study.horizons import horizons
    from normlab.study.outcome import study_data_ce
    from normlab.study.store import Store

    trials = Store(store).trials()
    h = horizons(trials)[0]
    lines = frontiers(trials, study_data_ce(trials), h)
    assert sorted((x.param, x.width) for x in lines) == sorted(CRIT)
    assert all(x.record()["width"] == x.width and x.record()["param"] == x.param for x in lines)
    at = f"L={lines[0].depth}, warm-up {lines[0].warmup}"  # the runs' own (not axes here)
    crit = {(x.param, x.width): x.frontier.lr for x in lines}
    assert crit[("sp", 64)] > crit[("sp", 128)] > crit[("sp", 256)]  # the seeds' pattern, fitted
    width = {(c.arm, c.control): c.effect for c in contrasts(lines) if c.factor == "width"}
    assert set(width) == {(f"d={w} at {at}, {p}", f"d=64 at {at}, {p}") for p in ("mup", "sp") for w in (128, 256)}
    mup, sp = (width[(f"d=256 at {at}, {p}", f"d=64 at {at}, {p}")] for p in ("mup", "sp"))
    assert abs(mup.estimate) < 0.05 and sp.estimate == pytest.approx(-0.6, abs=0.1)  # log10(1/4)


def test_the_page_draws_critical_lr_against_width(store: Path, data_dir, capsys) -> None:
    from normlab.cli import main

    assert main(["report", str(store), "--quiet"]) == 0
    html = Path(capsys.readouterr().out.strip()).read_text()
    figures = re.findall(r'<figure id="fig-([^"]+)"', html)
    assert any(f.startswith("frontier_width_") for f in figures), figures
    assert "Warm-up, depth and width, against their controls" in html and "d=256 at L=" in html


def test_the_maps_split_by_width_and_param_and_never_pool_them(store: Path, data_dir, capsys) -> None:
    """A map cell is (placement, lr, depth, warm-up): over widths it would pool six models. The
    page draws one map per placement x width x parametrisation, each with its own counts."""
    from normlab.cli import main
    from normlab.study.outcome import map_cells, map_variants, study_data_ce
    from normlab.study.store import Store

    trials = Store(store).trials()
    groups = map_variants(trials)
    assert set(groups) == {f"d_model={w}, param={p}" for p, w in CRIT}
    assert all(len(ts) == len(LRS) * 3 for ts in groups.values())
    ce = study_data_ce(trials)
    # at the lr where SP at width 256 stalls and at 64 trains, each group's own cell says so
    lr = LRS[2]
    cell = {v: next(c for k, c in map_cells(ts, ce).items() if k.lr == lr) for v, ts in groups.items()}
    assert cell["d_model=256, param=sp"].counts["trains"] == 0 and cell["d_model=64, param=sp"].counts["trains"] == 3
    assert main(["report", str(store), "--quiet"]) == 0
    html = Path(capsys.readouterr().out.strip()).read_text()
    maps = [f for f in re.findall(r'<figure id="fig-([^"]+)"', html) if f.startswith("map_")]
    assert sorted(maps) == sorted(f"map_pre_d_model_{w}_param_{p}" for p, w in CRIT)
    assert "pre (d_model=256, param=sp): every seed trains in 2 of 5 cells" in html


def test_a_study_without_extra_axes_has_one_group() -> None:
    from normlab.study.outcome import map_variants
    from normlab.study.store import TrialRecord

    ts = [TrialRecord(f"t{i}", {"model.placement": p, "optim.lr": 1e-3, "seed": s}, "completed", None, Path("."), None)
          for i, (p, s) in enumerate([("pre", 0), ("post", 0), ("pre", 1)])]
    assert list(map_variants(ts)) == [""]
