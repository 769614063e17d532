"""Stability maps: the phase diagram draws each cell's outcome shares as bands, and a
smoke-scale stability-map study, run for real, gets its page from `normlab report STORE`:
question and answer first, one map per placement, the cells' counts, and in headless
Chromium no console error and every image decoded."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_pages import _text, browse  # noqa: E402 - the pages' own browser check

from normlab.report.phase import EMPTY, OUTCOME_COLOURS, phase_diagram  # noqa: E402
from normlab.study.outcome import Cell  # noqa: E402


def _cell(*outcomes: str, best: float = 2.5) -> Cell:
    return Cell([f"t{i}" for i in range(len(outcomes))], list(outcomes), [best] * len(outcomes))


def test_each_cell_is_split_into_bands_by_its_outcome_shares() -> None:
    from matplotlib.colors import to_hex

    cells = {(1e-3, 6, 0): _cell("trains", "trains", "stalls", "diverged", "diverged"),
             (3e-3, 6, 0): _cell("stalls", "stalls", best=3.36), (1e-3, 24, 0): Cell(missing=3)}
    fig = phase_diagram(cells, "post", [1e-3, 3e-3], [6, 24], [0, 50])
    left, right = fig.axes[0], fig.axes[1]
    bands = [(round(p.get_x(), 6), round(p.get_width(), 6), to_hex(p.get_facecolor())) for p in left.patches
             if p.get_facecolor()[3] > 0 and p.get_y() == -0.5]  # the depth-6 row, filled patches
    c = {k: v.lower() for k, v in OUTCOME_COLOURS.items()}  # to_hex writes lower case
    assert bands == [(-0.5, 0.4, c["trains"]), (-0.1, 0.2, c["stalls"]), (0.1, 0.4, c["diverged"]),
                     (0.5, 1.0, c["stalls"])]
    texts = [t.get_text() for t in left.texts]
    mean = (2.5 + 2.5 + 2.5) / 3  # the two diverged seeds are left out of the mean
    assert f"{mean:g}\n2/5 train" in texts and "3.36\n0/2 train" in texts and "3 to run" in texts
    assert "no seed" in texts  # (3e-3, 24) was never in the grid
    assert all(to_hex(p.get_facecolor()) == EMPTY.lower() for p in right.patches if p.get_facecolor()[3] > 0)  # warm-up 50
    assert [t.get_text() for t in left.get_xticklabels()] == ["0.001", "0.003"]
    assert [t.get_text() for t in left.get_yticklabels()] == ["6", "24"]
    assert (left.get_title(), right.get_title()) == ("warm-up 0 steps", "warm-up 50 steps")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["trains", "stalls (≈ unigram loss)", "diverges"]
    import matplotlib.pyplot as plt

    plt.close(fig)


@pytest.mark.slow
def test_smoke_stability_map_study_end_to_end(tmp_path: Path, data_dir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from normlab.cli import main
    from normlab.study.outcome import map_cells, study_data_ce
    from normlab.study.presets import study_preset
    from normlab.study.runner import run_study

    spec = study_preset("stability-map", "smoke")  # narrowed: 2 placements x 2 lr x 2 depths, 2 seeds
    # 30 steps at lr 1e-2 are enough for some cells to train and others to stall; 0.3 blows up
    base = {**spec.base, "train": {**spec.base["train"], "steps": 30}}
    spec = dataclasses.replace(spec, base=base, axes={**spec.axes, "model.placement": ["post", "pre"],
                                                      "optim.lr": [1e-2, 3e-1], "optim.warmup_steps": [0]})
    store = run_study(spec, tmp_path / "s", workers=1, progress=False)
    trials = store.trials()
    assert len(trials) == 16 and {t.status for t in trials} <= {"completed", "diverged"}
    ce = study_data_ce(trials)
    assert ce.unigram == pytest.approx(3.3473, abs=1e-4) and ce.vocab_size == 65
    cells = map_cells(trials, ce)
    assert len(cells) == 8 and all(c.n == 2 for c in cells.values())

    assert main(["report", str(tmp_path / "s"), "--quiet"]) == 0
    page = Path(capsys.readouterr().out.strip())
    assert page == tmp_path / "s" / "report" / "index.html"
    html = _text(page.read_text())
    assert re.search(r"<title>(.*?)</title>", html)[1] == "Stability map: study stability-map"
    assert "Where in learning rate x depth x warm-up does each placement train" in html
    answer = re.search(r'<p class="answer">(.*?)</p>', html)[1]
    for pl in ("post", "pre"):  # the answer's counts are the map's
        mine = [c for k, c in cells.items() if k.placement == pl]
        full = sum(c.counts["trains"] == c.n for c in mine)
        assert (f"{pl}: every seed trains in {full} of 4 cells" in answer if full < 4
                else re.search(rf"every seed trains in all 4 cells for [a-z, ]*{pl}", answer)), answer
    assert "3.347 minus 0.15 = 3.197" in html and "ln V = 4.174" in html
    assert re.findall(r'<figure id="fig-([^"]+)"', html) == ["map_post", "map_pre"]
    order = [html.find(s) for s in ('class="lead"', "<figure", "<table", "<details", "Versions")]
    assert -1 not in order and order == sorted(order), order
    assert "<details open" not in html  # the configuration is folded (docs/report.md, how a page reads)
    rows = re.findall(r"<tr><td>(post|pre)</td><td class=\"num\">([^<]+)</td><td class=\"num\">(\d+)</td>"
                      r"<td class=\"num\">0</td><td class=\"num\">2</td>"
                      r"<td class=\"num\">(\d)</td><td class=\"num\">(\d)</td><td class=\"num\">(\d)</td>", html)
    assert len(rows) == 8  # every cell's counts, as map_cells has them
    for pl, lr, depth, *counts in rows:
        cell = cells[(pl, float(lr), int(depth), 0)]
        assert [int(c) for c in counts] == list(cell.counts.values())
    layout = browse(page, tmp_path, "stability")
    assert not layout["errors"], layout["errors"]
    assert layout["n"] == 2 and layout["bad"] == 0
    assert layout["wide"] == 0 and not layout["hscroll"], layout
    assert layout["minw"] >= 500, layout  # two maps side by side at most: readable at 1366 px
