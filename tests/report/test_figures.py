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
    assert "-0.50" in fig.axes[0].get_legend().get_texts()[0].get_text()
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
    assert post[1, 1] == pytest.approx(np.mean([synth.loss_at("post", s, 40) + 0.1 for s in (0, 1)]))
    assert "×" in [t.get_text() for t in fig.axes[0].texts]


def test_lr_sensitivity_number() -> None:
    # Wortsman: mean(min(loss, init)) - best; diverged (nan) counts as the init loss
    assert F.lr_sensitivity([2.0, 1.5, np.nan], 4.0) == pytest.approx((2.0 + 1.5 + 4.0) / 3 - 1.5)
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
    runs = {"post": [load_run(synth.write_run(tmp_path / f"r{s}", "post", s)) for s in (0, 1)]}
    page = Page("t", tmp_path / "out")
    curve_figures(page, runs)
    names = {p.stem for p in page.figures}
    assert {"train_loss_step", "val_loss_step", "lr", "grad_norm", "train_loss_tokens"} <= names
    assert all((p.with_suffix(".svg")).is_file() for p in page.figures)


def test_summary_spread_is_the_sample_std_like_study_status():
    """Pages and `normlab study status` must agree: sample std (ddof=1); [1, 2, 3] -> 1."""
    from normlab.report.pages import mean_std

    assert mean_std([1.0, 2.0, 3.0]) == "2.0000 ± 1.0000"
    assert mean_std([2.5]) == "2.5000" and mean_std([float("nan")]) == "-"
