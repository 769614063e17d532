"""A comparison of eight runs, five of them Pre-LN with different norms, one stalled: a short
title, a line of its own for every run, and a legend that speaks of runs, not seeds."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402

from normlab.report import figures as F  # noqa: E402
from normlab.report.style import color, distinct_styles, linestyle, split_label  # noqa: E402

# five norms under Pre-LN, more than the four line styles a series once cycled through
RUNS = [("pre", "layernorm"), ("pre", "derf"), ("pre", "seednorm"), ("post", "layernorm"), ("pre", "rmsnorm"),
        ("sandwich", "layernorm"), ("pre", "dyt"), ("post", "rmsnorm")]


def _runs(tmp: Path) -> list[Path]:
    runs = []
    for placement, norm in RUNS:
        run = synth.write_run(tmp / f"{placement}_{norm}", placement, stalled=norm == "seednorm")
        cfg = json.loads((run / "config.json").read_text())
        cfg["model"]["norm"] = norm
        (run / "config.json").write_text(json.dumps(cfg))
        runs.append(run)
    return runs


def _styles(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[str, str, object, str]]]:
    """{figure name: [(label, colour, dash pattern, legend texts) of every labelled line]}, each
    figure's legend checked to fit its width."""
    from matplotlib.colors import to_hex

    from normlab.report.html import Page

    seen: dict[str, list] = {}
    draw = Page.figure

    def spy(self, fig, name, caption, wide=False):  # noqa: ANN001, ANN202
        legends = [t.get_text() for ax in fig.axes for lg in (ax.get_legend(), *fig.legends) if lg is not None
                   for t in lg.get_texts()]
        fig.canvas.draw()  # a legend below the axes stays within the figure's width (40-character labels)
        assert all(0 <= lg.get_window_extent().x0 and lg.get_window_extent().x1 <= fig.bbox.x1
                   for lg in fig.legends), name
        seen[name] = [(ln.get_label(), to_hex(ln.get_color()), ln._unscaled_dash_pattern, " | ".join(legends))
                      for ax in fig.axes for ln in ax.get_lines()
                      if not ln.get_label().startswith("_") and len(ln.get_xdata()) > 1]
        return draw(self, fig, name, caption, wide)

    monkeypatch.setattr(Page, "figure", spy)
    return seen


def test_eight_runs_of_one_placement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.report import compare_report

    seen = _styles(monkeypatch)
    html = compare_report(_runs(tmp_path), tmp_path / "out").read_text()
    title = re.search(r"<title>(.*?)</title>", html)[1]
    assert len(title.split()) <= 6, title  # was every label joined by "vs": about 60 words
    lead = re.search(r'<section class="lead".*?</section>', html, flags=re.S)[0]
    assert "All: 2 blocks, d=16" in lead and "They differ in model.norm, model.placement." in lead  # what it left out
    lines = seen["val_loss"]
    assert len(lines) == len(RUNS)
    assert len({(c, dash) for _, c, dash, _ in lines}) == len(RUNS), lines  # one line of its own per run
    assert {c for lab, c, *_ in lines if split_label(lab)[0] == "pre"} == {color("pre").lower()}  # colour: placement
    for name, drawn in seen.items():  # one run per line: nothing averaged, no seeds to speak of
        legend = drawn[0][3] if drawn else ""
        assert not re.search(r"\bseeds?\b|\bmean\b", legend), (name, legend)
    assert "○ stalled: not below the unigram loss" in seen["val_loss"][0][3]
    captions = " ".join(re.findall(r"<figcaption>(.*?)</figcaption>", html))
    assert not re.search(r"\bseeds?\b", captions) and "Stalled (○ at the end): placement=pre, model.norm=seednorm," in captions


def test_a_stalled_seed_among_seeds_is_still_dotted_and_named_so() -> None:
    traces = {"post": [F.Trace([0, 10], [4.0, 3.0]), F.Trace([0, 10], [4.0, 3.4], "stalled")],
              "pre": [F.Trace([0, 10], [4.0, 2.5])]}
    ax = F.seed_curves(traces, "step", "loss", "t").axes[0]
    texts = [t.get_text() for lg in (ax.get_legend(), *ax.figure.legends) if lg is not None for t in lg.get_texts()]
    assert "○ stalled seed (dotted; not in the mean)" in texts
    assert [ln.get_ydata()[-1] for ln in ax.get_lines() if ln.get_linestyle() == ":"] == [3.4]


def test_single_stalled_run_keeps_its_line() -> None:
    traces = {"pre a": [F.Trace([0, 10], [4.0, 3.4], "stalled")], "pre b": [F.Trace([0, 10], [4.0, 2.5])]}
    with distinct_styles(traces):
        ax = F.seed_curves(traces, "step", "loss", "t").axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1}
    assert lines["pre a"].get_linestyle() != ":" and lines["pre a"].get_linestyle() != lines["pre b"].get_linestyle()
    texts = [t.get_text() for lg in (ax.get_legend(), *ax.figure.legends) if lg is not None for t in lg.get_texts()]
    assert not any(re.search(r"\bseeds?\b", t) for t in texts) and "○ stalled: not below the unigram loss" in texts


def test_distinct_styles_within_a_series_and_one_per_rest() -> None:
    labels = ["pre", *(f"pre n={i}" for i in range(11)), "post n=0", "post n=1"]
    with distinct_styles(labels):
        styles = {lab: str(linestyle(split_label(lab)[1])) for lab in labels}
    pre = [v for k, v in styles.items() if k.startswith("pre")]
    assert len(set(pre)) == len(pre)  # past the eight named styles too
    assert styles["post n=0"] == styles["pre n=0"] and styles["post n=1"] == styles["pre n=1"]
    assert styles["pre"] == "-" and np.unique(list(styles.values())).size == 12
