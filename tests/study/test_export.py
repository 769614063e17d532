"""`normlab study export` and `normlab.study.load(STORE).frame()` on a smoke study of real
trainings: the files equal the frames, one row per trial and per logged step, the outcome is
the lab's rule, and a missing pandas or pyarrow is one line naming the extra (nothing written)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.core.errors import UserError
from normlab.run.dir import RunDir

from .conftest import tiny_spec

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished smoke study: placement x warm-up, one seed, 6 steps, validation at 3 and 6."""
    if not (Path(os.environ.get("NORMLAB_DATA_DIR", "")) / "tinyshakespeare.txt").is_file():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    d = tmp_path_factory.mktemp("export")
    spec = tiny_spec(d / "spec.toml", steps=6, every=3, ckpt=6, seeds="[0]",
                     axes='"model.placement" = ["post", "pre"]\n"optim.warmup_steps" = [0, 2]')
    assert main(["study", "run", str(spec), "--store", str(d / "S"), "--workers", "1", "--quiet"]) == 0
    return d / "S"


def test_export_csv_and_parquet_equal_the_frames_row_for_row(store: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyarrow")
    from normlab.study import load
    from normlab.study.outcome import map_cells, study_data_ce
    from normlab.study.store import Store

    assert main(["study", "export", str(store)]) == 0  # csv into STORE/export by default
    assert main(["study", "export", str(store), "--format", "parquet", "--out", str(tmp_path / "pq")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(store / "export" / "trials.csv"), str(store / "export" / "steps.csv"),
                       str(tmp_path / "pq" / "trials.parquet"), str(tmp_path / "pq" / "steps.parquet")]
    trials, steps = load(store).frame()
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "pq" / "trials.parquet"), trials)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "pq" / "steps.parquet"), steps)
    # CSV carries no dtypes (a str column may come back as object): the values, exactly
    pd.testing.assert_frame_equal(pd.read_csv(store / "export" / "trials.csv"), trials, check_dtype=False,
                                  check_exact=True)
    pd.testing.assert_frame_equal(pd.read_csv(store / "export" / "steps.csv"), steps, check_dtype=False,
                                  check_exact=True)

    records = Store(store).trials()
    assert list(trials["trial"]) == [t.id for t in records] and len(records) == 4
    assert list(trials.columns[:4]) == ["trial", "model.placement", "optim.warmup_steps", "seed"]
    assert set(zip(trials["model.placement"], trials["optim.warmup_steps"])) == {
        ("post", 0), ("post", 2), ("pre", 0), ("pre", 2)}
    lines = {t.id: RunDir(t.run_dir).metrics() for t in records}
    assert len(steps) == sum(len(v) for v in lines.values()) > len(records)
    cells = map_cells(records, study_data_ce(records))  # the stability map's outcome of each trial
    outcome = {i: o for c in cells.values() for i, o in zip(c.trial_ids, c.outcomes)}
    for t, row in zip(records, trials.itertuples(index=False)):
        mine = steps[steps["trial"] == t.id]
        assert list(mine["step"]) == [m["step"] for m in lines[t.id]]
        assert list(mine.dropna(subset=["val_loss"])["step"]) == [3, 6]  # evaluated there only
        assert list(mine["train_loss"]) == [m["train/loss"] for m in lines[t.id]]
        assert list(mine["lr"]) == [m["lr"] for m in lines[t.id]]
        assert row.outcome == outcome[t.id] and row.status == "completed"
        assert row.best_val_loss == t.summary["best_val_loss"] == mine["val_loss"].min()
        assert row.final_val_loss == lines[t.id][-1]["val/loss"]
        assert row.final_train_loss == lines[t.id][-1]["train/loss"]
        assert row.steps == 6 and row.wall_time_s == t.summary["wall_time_s"]
        assert math.isnan(row.diverged_at_step) and row.run_dir == f"runs/{t.id}"


def test_unfinished_trials_are_rows_without_results_and_a_table_axis_is_its_json(tmp_path: Path) -> None:
    from normlab.study import load
    from normlab.study.runner import open_store
    from normlab.study.spec import load_spec

    spec = tiny_spec(tmp_path / "spec.toml", seeds="[0, 1]", axes='"model.placement" = ["pre", ["post", "pre"]]')
    open_store(load_spec(spec), tmp_path / "S")  # the store and its trials, nothing run
    trials, steps = load(tmp_path / "S").frame()
    assert len(trials) == 4 and len(steps) == 0 and list(steps.columns) == ["trial", "step", "train_loss",
                                                                            "val_loss", "lr"]
    assert set(trials["status"]) == {"pending"} and trials["outcome"].isna().all()
    assert trials["best_val_loss"].isna().all() and list(trials["seed"]) == [0, 0, 1, 1]
    assert [json.loads(v) if v.startswith("[") else v for v in trials["model.placement"]] == [
        "pre", ["post", "pre"], "pre", ["post", "pre"]]


@pytest.mark.parametrize("missing, fmt, extra", [("pandas", "csv", "normlab[pandas]"),
                                                  ("pyarrow", "parquet", "normlab[parquet]")])
def test_a_missing_library_is_one_line_naming_its_extra_and_nothing_is_written(
        store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        missing: str, fmt: str, extra: str) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # import raises ImportError
    out = tmp_path / "out"
    assert main(["study", "export", str(store), "--format", fmt, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"pip install '{extra}'" in err, err
    assert not out.exists()
    if missing == "pandas":
        from normlab.study import load

        with pytest.raises(UserError, match=r"normlab\[pandas\]"):
            load(store).frame()


def test_not_a_store_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", "export", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no study store here" in err, err
