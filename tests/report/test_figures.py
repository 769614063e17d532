"""Figures built from synthetic stores: the plotted data, read back from the artists, equals the input."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402

from normlab.report import figures as F  # noqa: E402
from normlab.report.load import detect, load_run, load_study  # noqa: E402
from normlab.report.pages import curve_figures, diag_matrices  # noqa: E402


def test_curves_mean_line_is_seed_mean(tmp_path: Path) -> None:
    runs = [load_run(synth.write_run(tmp_path / f"r{s}", "post", s)) for s in (0, 1, 2)]
    x, ys = F.stack_seeds([r.series("train/loss") for r in runs])
    fig = F.curves({"post": (x, ys)}, "step", "loss", "t")
    line = fig.axes[0].get_lines()[0]
    want = [np.mean([synth.loss_at("post", s, st) for s in (0, 1, 2)]) for st in synth.STEPS]
    np.testing.assert_allclose(line.get_xydata(), np.c_[synth.STEPS, want])
    assert line.get_label() == "post"


def test_torn_last_line_ignored(tmp_path: Path) -> None:
    run = load_run(synth.write_run(tmp_path / "r", "pre", 0))
    assert [m["step"] for m in run.metrics] == synth.STEPS


def test_depth_scaling_slope_and_points() -> None:
    Ls = np.array([2.0, 4, 8, 16])
    ys = np.stack([3.0 * Ls ** -0.5, 3.3 * Ls ** -0.5])  # two seeds, exact power law
    fig, slopes = F.depth_scaling({"pre": (Ls, ys)}, "g", "t")
    assert slopes["pre"][0] == pytest.approx(-0.5, abs=1e-9)
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_xydata(), np.c_[Ls, ys.mean(0)])
    assert fig.axes[0].get_legend() is None  # below the axes, never over the lines
    assert "slope -0.5 ±" in fig.legends[0].get_texts()[0].get_text()
    # every seed is its own thin line under the mean
    assert [ln.get_linewidth() < 1 for ln in fig.axes[0].get_lines()] == [False, True, True]
    assert fig.axes[0].get_yscale() == "log"


def test_heatmap_image_equals_matrix(tmp_path: Path) -> None:
    run = load_run(synth.write_run(tmp_path / "r", "pre", 0))
    mats = diag_matrices(run.diagnostics)
    steps, layers, m = mats["grad_norm"]
    assert layers == [1, 2] and steps == [0.0, 20.0, 40.0]
    np.testing.assert_allclose(m, [[1, 21, 41], [2, 22, 42]])
    np.testing.assert_allclose(mats["stream_rms"][2], [[1, 21, 41], [3, 23, 43]])
    img = F.heatmap(m, steps, layers, "g", "t").axes[0].get_images()[0]
    np.testing.assert_allclose(np.asarray(img.get_array()), m)


def test_stability_map_from_store(tmp_path: Path) -> None:
    from normlab.report.study_page import final_loss

    study = load_study(synth.write_store(tmp_path / "s"))
    assert detect(tmp_path / "s") == "study" and len(study.trials) == 16
    cells: dict = {}
    for t in study.trials:
        key = (t.params["optim.lr"], float(t.params["optim.warmup_steps"]))
        cells.setdefault(t.params["model.placement"], {}).setdefault(key, []).append(final_loss(t))
    agg = {p: {k: (np.nanmean([v for v, _ in vs]) if not all(d for _, d in vs) else np.nan, all(d for _, d in vs))
               for k, vs in c.items()} for p, c in cells.items()}
    fig = F.stability_map(agg)
    post = fig.axes[0].get_images()[0].get_array()
    # rows = warm-up (0, 10), cols = lr (1e-3, 3e-3); post at lr 3e-3 without warm-up diverged
    assert np.ma.is_masked(post[0, 1]) or np.isnan(post[0, 1])
    assert post[1, 1] == pytest.approx(np.mean([synth.loss_at("post", s, 40, 3e-3, 10) + 0.1 for s in (0, 1)]))
    assert "×" in [t.get_text() for t in fig.axes[0].texts]


def test_lr_sensitivity_number() -> None:
    # Wortsman: mean(min(loss, init)) - best; diverged (nan) counts as the init loss
    from normlab.diagnostics.sensitivity import sensitivity

    assert sensitivity([2.0, 1.5, np.nan], 4.0) == pytest.approx((2.0 + 1.5 + 4.0) / 3 - 1.5)
    assert sensitivity([2.0, 1.5, 9.0], 4.0) == pytest.approx((2.0 + 1.5 + 4.0) / 3 - 1.5)  # capped at init
    fig, sens = F.lr_curves({"pre": (np.array([1e-3, 1e-2]), np.array([[1.0, 3.0]]))}, 4.0)
    assert sens["pre"] == pytest.approx(1.0)
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_ydata(), [1.0, 3.0])


def test_bars_and_similarity() -> None:
    fig = F.deletion_bars([1, 2, 3], [0.5, 0.1, 0.2])
    assert [p.get_height() for p in fig.axes[0].patches] == pytest.approx([0.5, 0.1, 0.2])
    d = np.array([[0, 0.2], [0.2, 0]])
    np.testing.assert_allclose(F.similarity_matrix(d).axes[0].get_images()[0].get_array(), d)


def test_study_curves_group_by_non_seed_params(tmp_path: Path) -> None:
    from normlab.report.html import Page
    from normlab.report.study_page import group_label

    assert group_label({"optim.lr": 0.001, "model.placement": "post", "seed": 3}) == "post lr=0.001"
    assert group_label({"optim.lr": 3e-4, "model.placement": "pre"}) == "pre lr=3e-4"
    runs = {"post": [load_run(synth.write_run(tmp_path / f"r{s}", "post", s)) for s in (0, 1)]}
    page = Page("t", tmp_path / "out")
    curve_figures(page, runs)
    assert {p.stem for p in page.figures} == {"train_loss", "val_loss", "lr", "grad_norm"}
    assert all((p.with_suffix(".svg")).is_file() for p in page.figures)


def test_tokens_figure_only_when_the_batch_differs(tmp_path: Path) -> None:
    """Fixed batch: tokens = step x constant, a second x axis, no separate figure."""
    from normlab.report.html import Page
    from normlab.report.pages import tokens_per_step

    a = load_run(synth.write_run(tmp_path / "a", "pre", 0))
    b = load_run(synth.write_run(tmp_path / "b", "post", 0))
    assert tokens_per_step([a, b]) == 256
    for m in b.metrics:
        m["tokens"] = m["step"] * 512  # b trains on twice the batch
    assert tokens_per_step([a, b]) is None
    page = Page("t", tmp_path / "out")
    curve_figures(page, {"pre": [a], "post": [b]})
    assert "loss_tokens" in {p.stem for p in page.figures}


def test_stalled_seed_is_marked_and_left_out_of_the_mean(tmp_path: Path) -> None:
    from normlab.report.pages import fates

    runs = [load_run(synth.write_run(tmp_path / f"r{s}", "post", s, stalled=s == 1)) for s in (0, 1, 2)]
    fate = fates({"post": runs})
    assert [fate[r.path] for r in runs] == ["ok", "stalled", "ok"]
    traces = {"post": [F.Trace(*r.series("val/loss"), fate=fate[r.path]) for r in runs]}
    ax = F.seed_curves(traces, "step", "loss", "t").axes[0]
    mean = ax.get_lines()[0]
    want = [np.mean([synth.loss_at("post", s, st) + 0.1 for s in (0, 2)]) for st in (0, 20, 40)]
    np.testing.assert_allclose(mean.get_ydata(), want)  # the mean of the seeds that trained
    stalled = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]
    assert len(stalled) == 1 and stalled[0].get_ydata()[-1] == pytest.approx(synth.stalled_loss(40) + 0.1)
    legends = [ax.get_legend(), *ax.figure.legends]  # long entries go below the axes
    labels = [t.get_text() for lg in legends if lg is not None for t in lg.get_texts()]
    assert any("stalled" in t for t in labels)


def test_diverged_run_ends_in_a_marker_and_has_no_mean() -> None:
    traces = {"post": [F.Trace([0, 10, 20], [4.0, 3.0, 9.0], "diverged"), F.Trace([0, 10], [4.0, 30.0], "diverged")]}
    ax = F.seed_curves(traces, "step", "loss", "t").axes[0]
    ends = [ln for ln in ax.get_lines() if ln.get_marker() == "X" and len(ln.get_xdata())]
    assert sorted((float(ln.get_xdata()[0]), float(ln.get_ydata()[0])) for ln in ends) == [(10, 30.0), (20, 9.0)]
    assert all(ln.get_linewidth() < 1 for ln in ax.get_lines() if len(ln.get_xdata()) > 1)  # seeds only


def test_one_formatter_for_every_number() -> None:
    from normlab.report.numbers import duration, num, pm

    assert num(-0.9999999999999999) == "-1" and num(11054.3) == "11,054" and num(1.105e4) == "11,050"
    assert num(3e-4) == "3e-4" and num(0.17755333275481167) == "0.1776" and num(12345) == "12,345"
    assert num(2_000_000.0, compact=True) == "2M" and num(None) == "–" and num(float("nan")) == "n/a"
    assert num("+1") == "+1" and num(np.int64(3000)) == "3,000" and num(np.float32(0.5)) == "0.5"
    assert pm(2.13412, 0.01234) == "2.134 ± 0.012" and pm(1234.5, 56.7) == "1,234 ± 57"
    assert duration(125) == "2 min 05 s" and duration(0.184) == "0.18 s"
    # no other module of normlab.report formats floats by itself
    import re

    src = Path(F.__file__).parent
    ad_hoc = re.compile(r"\{[^{}]*:[^{}]*[.][0-9]+[efg%]\}|:g\}|:\.0e\}")
    offenders = [f"{p.name}: {m.group()}" for p in src.glob("*.py") if p.name != "numbers.py"
                 for m in ad_hoc.finditer(p.read_text())]
    assert not offenders, offenders


def test_summary_spread_is_the_sample_std_like_study_status():
    """Pages and `normlab study status` must agree: sample std (ddof=1); [1, 2, 3] -> 1."""
    from normlab.report.pages import mean_std

    assert mean_std([1.0, 2.0, 3.0]) == "2 ± 1.0"
    assert mean_std([2.5]) == "2.5" and mean_std([float("nan")]) == "-"


def test_headline_ranks_a_setting_with_a_stalled_seed_behind_clean_ones() -> None:
    """Two seeds at 2.0 and one stalled at 3.3 do not beat three seeds at 2.3; the stall is
    counted in the ranking's mean (as `study status` does) and named in the notes."""
    from normlab.report.study_answer import headline

    answer, notes = headline({"post": [(2.0, "ok"), (2.02, "ok"), (3.3, "stalled")],
                              "pre": [(2.3, "ok"), (2.31, "ok"), (2.29, "ok")]}, "best_val_loss", 6)
    assert answer.startswith("pre is best: best val loss 2.3 ± 0.010") and "over 3 seeds" in answer
    assert any(n.startswith("post: 1 of 3 seeds stalled (best val loss 3.3); the other 2: 2.01 ± 0.014") for n in notes)


def test_series_figure_keeps_the_colour_bar_label_apart_from_the_line_plot_label() -> None:
    """layer_step: the heat map's colour-bar label and the line plot's y-label (the same words)
    do not stand side by side: the line plot's label and values are on its right edge, so a
    whole plot lies between the two labels, and no two texts of the figure overlap."""
    m = np.arange(36, dtype=float).reshape(6, 6) / 10 + 1
    fig = F.layer_step(m, [0, 2, 4, 6, 8, 10], list(range(6)), [0, 5], "RMS of the residual stream", "t")
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    heat, lines, bar = fig.axes
    bar_label = bar.yaxis.label.get_window_extent(r)
    y_label = lines.yaxis.label.get_window_extent(r)
    plot = lines.get_window_extent(r)
    assert bar.yaxis.label.get_text() == lines.yaxis.label.get_text() == "RMS of the residual stream"
    assert bar_label.x1 < plot.x0 and y_label.x0 > plot.x1  # the line plot between the two labels
    ticks = [t.get_window_extent(r) for t in lines.get_yticklabels() if t.get_text()]
    assert ticks and all(t.x0 > plot.x1 for t in ticks)  # its values on the right too, none beside the bar
