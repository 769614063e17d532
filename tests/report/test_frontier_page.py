"""The frontier section of a stability-map page: a synthetic ``stability-frontier`` store with
known critical lrs (one censored above, one below, clean gaps, a mixed lr), drawn by
`normlab report STORE`: the critical lrs and their contrasts as the fit gives them, the
outcomes at each horizon, and in headless Chromium no console error and every image decoded."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from html import unescape as html_unescape
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402
from test_pages import _text, browse  # noqa: E402 - the pages' own browser check

LRS = [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2]  # synth.loss_at trains at each of them
# (placement, depth, warm-up) -> the first lr index at which seeds stop training (5: all train,
# 0: none does); MIXED: the cell where one seed of three still trains at that index
CRIT = {("post", 6, 0): 2, ("post", 6, 50): 4, ("post", 18, 0): 0, ("post", 18, 50): 2,
        ("pre", 6, 0): 5, ("pre", 6, 50): 5, ("pre", 18, 0): 3, ("pre", 18, 50): 4}
MIXED = ("post", 18, 50)


def _store(d: Path) -> Path:
    d.mkdir(parents=True)
    (d / "spec.json").write_text(json.dumps({"name": "stability-frontier", "scientific": ["model.placement"]}))
    from normlab.study.store_db import SCHEMA as _SCHEMA
    from normlab.study.store_db import SCHEMA_VERSION

    con = sqlite3.connect(d / "study.sqlite")
    con.executescript(_SCHEMA)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    i = 0
    for (pl, depth, wu), crit in CRIT.items():
        for j, lr in enumerate(LRS):
            for s in (0, 1, 2):
                tid = f"t{i:04d}"
                i += 1
                trains = j < crit or ((pl, depth, wu) == MIXED and j == crit and s == 0)
                div = not trains and j == len(LRS) - 1 and pl == "post"
                # the curve without warm-up's delay, so that every run meant to train does by step 40 (the
                # cell's warm-up is its params', which the map reads first)
                run = synth.write_run(d / "runs" / tid, pl, s, lr, 0, diverged=div, stalled=not trains)
                params = {"model.placement": pl, "optim.lr": lr, "model.n_layer": depth, "optim.warmup_steps": wu,
                          "seed": s}
                con.execute("INSERT INTO trials (id, idx, params, config, status, attempts, worker, started_at,"
                            " finished_at, heartbeat, error, summary, run_dir) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            (tid, i, json.dumps(params), (run / "config.json").read_text(),
                             "diverged" if div else "completed", 1, "w0", 0.0, 1.0, 1.0, None,
                             (run / "summary.json").read_text(), f"runs/{tid}"))
    con.commit()
    con.close()
    return d


def test_frontier_page_draws_critical_lrs_with_intervals_and_censored_arrows(
        tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from normlab.cli import main
    from normlab.stats.frontier import critical_lr

    store = _store(tmp_path / "s")
    assert main(["report", str(store), "--quiet"]) == 0
    page = Path(capsys.readouterr().out.strip())
    html = _text(page.read_text())
    assert re.findall(r'<figure id="fig-([^"]+)"', html) == ["map_post", "map_pre", "frontier_40"]
    assert "Up to which learning rate does each placement train" in html
    rows = {(m[0], int(m[1]), int(m[2])): html_unescape(m[3]) for m in re.findall(
        r"<tr><td class=\"num\">40</td><td>(post|pre)</td><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td>"
        r"<td>([^<]+)</td>", html)}
    assert len(rows) == len(CRIT)
    for key, crit in CRIT.items():
        k = [3 if j < crit else 0 for j in range(len(LRS))]
        if key == MIXED:
            k[crit] = 1
        assert rows[key] == critical_lr(LRS, k, [3] * len(LRS)).text(), key
    # censored: the last lr tried, and the 95% limit (3 seeds an lr: two lrs from the end, 0.5^6 < 0.025)
    assert rows[("pre", 6, 0)] == "> 0.016 (every lr trains; 95%: > 0.008)"
    assert rows[("post", 18, 0)] == "< 0.001 (no lr trains; 95%: < 0.002)"
    assert rows[MIXED].startswith("0.004 [")  # quasi-separated: centred on the mixed lr
    # the contrasts: warm-up against none at 6 blocks for Post-LN is two gaps apart (0.6 decades); Pre-LN's
    # warm-up at 6 blocks compares two censored-above frontiers: nothing is known
    warm = re.search(r"<td>post</td><td>warm-up</td><td>warm-up 50 at L=6</td><td>warm-up 0 at L=6</td><td>([^<]+)</td>",
                     html)
    assert warm and warm[1].startswith("+0.60 [")
    assert "<td>pre</td><td>warm-up</td><td>warm-up 50 at L=6</td><td>warm-up 0 at L=6</td><td>n/a" in html
    deep = re.search(r"<td>post</td><td>depth</td><td>L=18 at warm-up 0</td><td>L=6 at warm-up 0</td><td>([^<]+)</td>",
                     html)
    assert deep and html_unescape(deep[1]).startswith("< ") and "censored" in deep[1]  # none trains at 18: a bound only
    assert "Outcomes at each horizon" in html and "left the plateau at" in html
    layout = browse(page, tmp_path, "frontier")
    assert not layout["errors"], layout["errors"]
    assert layout["n"] == 3 and layout["bad"] == 0
    assert layout["wide"] == 0 and not layout["hscroll"], layout


@pytest.mark.parametrize("study", ["stability-map", "frontier-ends"])
def test_the_published_map_pages_open_with_their_critical_lrs(study: str, tmp_path: Path) -> None:
    """docs/evidence/maps/: the confirmatory run's map pages, with their critical lrs at both
    horizons, open in headless Chromium with no console error and every image decoded."""
    import shutil

    root = Path(__file__).parents[2] / "docs" / "evidence" / "maps" / study
    html = (root / "index.html").read_text()
    assert "Critical learning rates" in html or "critical lr" in html
    assert "frontier_200.png" in html and "frontier_400.png" in html  # the base horizon and the long one
    page = tmp_path / study
    shutil.copytree(root, page)
    lay = browse(page / "index.html", tmp_path, f"published-{study}")
    assert not lay["errors"] and lay["bad"] == 0 and lay["n"] >= 2, lay
