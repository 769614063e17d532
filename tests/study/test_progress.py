"""The study progress bar counts finished trials from the store, for any executor."""

from __future__ import annotations

import contextlib
import io

from normlab.study.presets import study_preset
from normlab.study.runner import run_study


def test_progress_bar_reaches_all_trials(tmp_path, data_dir):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        store = run_study(study_preset("pre-vs-post", "smoke"), tmp_path / "s", workers=1, progress=True)
    n = len(store.trials())
    last = err.getvalue().strip().split("\r")[-1]
    assert f"{n}/{n}" in last and f"completed={n}" in last


def test_progress_bar_off_when_asked(tmp_path, data_dir):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        run_study(study_preset("pre-vs-post", "smoke"), tmp_path / "s", workers=1, progress=False)
    assert "trial" not in err.getvalue()
