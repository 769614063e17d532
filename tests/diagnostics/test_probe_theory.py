"""The at-initialisation theory the lab stands on (REFERENCE §4 claims 1-3, 14), seeded.

Grid: the full one of the issue (xavier init, d=128, d_ff=d, depths 2..32, 5 seeds, one batch
of 8 x 64 Tiny Shakespeare tokens) for post and pre, without the Jacobian projections
(not asserted here): about 7 s on one CPU thread. A regression that breaks these is a bug.
"""

from __future__ import annotations

import math

import pytest

from normlab.diagnostics.fits import summarize
from normlab.diagnostics.probe import ProbeConfig, run_probe

pytestmark = pytest.mark.xdist_group("diagnostics-probe-theory")  # one worker probes the module's grid


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import os
    from pathlib import Path

    d = os.environ.get("NORMLAB_DATA_DIR")
    if not d or not (Path(d) / "tinyshakespeare.txt").exists():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    cfg = ProbeConfig(placements=["post", "pre"], depths=[2, 4, 8, 16, 32], d_model=128, d_ff=128,
                      init="xavier", seeds=5, n_proj=0)
    return summarize(run_probe(cfg, data_dir=d))


def test_xiong_thm1_slopes(summary: dict) -> None:
    post, pre = summary["w2_slope"]["post"], summary["w2_slope"]["pre"]
    assert pre["slope"] < -0.15                      # Pre-LN: W2_L gradient shrinks with depth
    assert post["slope"] - pre["slope"] > 0.3        # Post-LN: roughly depth-independent
    assert abs(post["slope"]) < 3 * post["stderr"] + 0.1


def test_post_over_pre_ratio_grows_with_depth(summary: dict) -> None:
    r = [summary["ratio_to_pre"]["post"][L] for L in (2, 4, 8, 16, 32)]
    assert all(b >= 0.98 * a for a, b in zip(r, r[1:])), r   # non-decreasing (2% slack for seed noise)
    assert r[-1] > 3 * r[0], r


def test_post_gradient_rises_with_layer_index(summary: dict) -> None:
    assert summary["grad_spearman"]["post"][16] > 0.7   # claim 3 (seed 001 says the opposite)
    assert summary["grad_spearman"]["pre"][16] < -0.7   # claim 14: Pre-LN's early layers get more


def test_pre_stream_grows_linearly_post_stays_flat(summary: dict) -> None:
    for L in (8, 16, 32):
        fit = summary["stream_fit"]["pre"][L]
        assert fit["r2"] > 0.98 and 0.5 <= fit["slope"] <= 1.5, fit
        for li, m in enumerate(fit["mean_sq"]):   # (1 + l/2) <= E||x_l||^2/d <= (1 + 3l/2)
            assert 1 + li / 2 - 0.05 <= m <= 1 + 1.5 * li + 0.05, (L, li, m)
        post = summary["stream_fit"]["post"][L]["mean_sq"]
        assert all(math.isclose(m, 1.0, abs_tol=0.05) for m in post[1:])  # LN output: unit RMS
