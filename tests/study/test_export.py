"""`normlab study export` and `normlab.study.load(STORE).frame()` on a smoke study of real
trainings: the files equal the frames, one row per trial and per logged step, the outcome is
the lab's rule, the per-layer diagnostics are a labelled long table, the CSV needs no pandas
(written in a process where pandas cannot be imported, byte for byte what pandas writes), and
a missing pandas or pyarrow is one line naming the extra (nothing written)."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.core.errors import UserError
from normlab.run.dir import RunDir

from .conftest import SRC, tiny_spec

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished smoke study: placement x warm-up, one seed, 6 steps, validation at 3 and 6."""
    if not (Path(os.environ.get("NORMLAB_DATA_DIR", "")) / "tinyshakespeare.txt").is_file():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    d = tmp_path_factory.mktemp("export")
    spec = tiny_spec(d / "spec.toml", steps=6, every=3, ckpt=6, seeds="[0]",
                     axes='"model.placement" = ["post", "pre"]\n"optim.warmup_steps" = [0, 2]')
    spec.write_text(spec.read_text().replace("[base.train]\n", "[base.train]\ndiag_every = 3\n"))
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
    # CSV carries no dtypes (a str column may come back as object, an empty text column as float
    # unless read as the text it is): the values, exactly
    text = {"outcome": "string", "error": "string"}
    pd.testing.assert_frame_equal(pd.read_csv(store / "export" / "trials.csv", dtype=text), trials,
                                  check_dtype=False, check_exact=True)
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
    # the text columns that may be empty are text even with no value at all (not float64 NaN)
    assert str(trials["error"].dtype) == str(trials["outcome"].dtype) == "string"
    assert trials["error"].isna().all()
    with sqlite3.connect(tmp_path / "S" / "study.sqlite") as con:
        con.execute("UPDATE trials SET status = 'failed', error = 'boom' WHERE idx = (SELECT MIN(idx) FROM trials)")
    con.close()
    trials = load(tmp_path / "S").frame().trials
    assert str(trials["error"].dtype) == "string" and list(trials["error"].fillna("-")) == ["boom", "-", "-", "-"]


@pytest.mark.parametrize("missing, fmt, extra", [("pandas", "parquet", "normlab[parquet]"),
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


def test_layers_are_a_labelled_long_table_of_every_trials_diagnostics(store: Path) -> None:
    from normlab.diagnostics.catalogue import by_key
    from normlab.study import load
    from normlab.study.store import Store

    layers = load(store).layers()
    assert list(layers.columns) == ["trial", "model.placement", "optim.warmup_steps", "seed", "step", "statistic",
                                    "layer", "value"]
    known = by_key("training")
    for t in Store(store).trials():
        lines = RunDir(t.run_dir).diagnostics()
        mine = layers[layers["trial"] == t.id]
        assert sorted(set(mine["step"])) == [m["step"] for m in lines] == [3, 6]
        assert set(mine["model.placement"]) == {t.params["model.placement"]}
        for line in lines:
            at = mine[mine["step"] == line["step"]]
            for key, v in line.items():
                got = at[at["statistic"] == key]
                if isinstance(v, list):  # one row per layer, labelled by the registry for L = 2
                    # (a list of another length, as per-head entropies, L x heads, is numbered from 1)
                    fits = known[key].size(2) == len(v)
                    want = [str(x) for x in known[key].labels(2)] if fits else [str(i) for i in range(1, len(v) + 1)]
                    assert list(got["layer"]) == want, key
                    assert list(got["value"]) == pytest.approx([float("nan") if e is None else e for e in v],
                                                               nan_ok=True), key
                elif key in known and isinstance(v, float):  # a one-number statistic: no layer
                    assert len(got) == 1 and got["layer"].isna().all() and got["value"].iloc[0] == v, key
                else:  # step, train/loss (the steps table's), nulls of a statistic not yet defined
                    assert key == "step" or len(got) in (0, 1), key
    stream = layers[(layers["statistic"] == "rms") & (layers["step"] == 3)]
    assert list(stream["layer"])[:3] == ["x0", "x1", "x2"]  # the stream x_0..x_L of a 2-block model
    groups = layers[(layers["statistic"] == "grad_norm") & (layers["step"] == 3)]
    assert list(groups["layer"])[:4] == ["emb", "1", "2", "head"]  # parameter groups


NO_PANDAS = "raise ImportError('No module named pandas (this test hides it)')\n"


def test_csv_export_needs_no_pandas_and_writes_what_pandas_writes(store: Path, tmp_path: Path) -> None:
    """In a process where pandas cannot be imported, `study export --format csv` writes the three
    tables, each byte for byte the CSV pandas writes from `frame()` / `layers()`."""
    from normlab.study import load

    (tmp_path / "shim" / "pandas").mkdir(parents=True)
    (tmp_path / "shim" / "pandas" / "__init__.py").write_text(NO_PANDAS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shim"), str(SRC)])}
    out = tmp_path / "csv"
    run = subprocess.run([sys.executable, "-m", "normlab", "study", "export", str(store), "--what",
                          "trials,steps,layers", "--out", str(out)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(out / f"{n}.csv") for n in ("trials", "steps", "layers")]
    # the same environment cannot make DataFrames: Parquet is one line naming its extra
    pq = subprocess.run([sys.executable, "-m", "normlab", "study", "export", str(store), "--format", "parquet",
                         "--out", str(tmp_path / "pq")], env=env, capture_output=True, text=True)
    assert pq.returncode == 2 and len(pq.stderr.strip().splitlines()) == 1, pq.stderr
    assert "pip install 'normlab[parquet]'" in pq.stderr and not (tmp_path / "pq").exists()

    tables = load(store)
    trials, steps = tables.frame()
    layers = tables.layers()
    assert len(layers) > len(steps) > len(trials)
    for name, df in (("trials", trials), ("steps", steps), ("layers", layers)):
        assert (out / f"{name}.csv").read_bytes() == df.to_csv(index=False).encode("utf-8"), name


def test_the_csv_writer_formats_each_column_as_pandas_does() -> None:
    """Every kind of column the tables can hold: ints, ints with a gap (float64 in pandas),
    floats at the edges of the shortest repr, bools with and without a gap, text needing quotes,
    mixed types, and a column with no value."""
    from normlab.study.csv_rows import csv_bytes

    rows = [{"i": 1, "ig": 1, "f": 1e-5, "b": True, "bg": True, "t": 'say "hi", then', "m": 3, "n": None},
            {"i": 2, "ig": None, "f": 0.1 + 0.2, "b": False, "bg": None, "t": "line\nbreak", "m": "x"},
            {"i": 3, "ig": 7, "f": 1e16, "b": True, "bg": False, "t": "", "m": 2.5},
            {"i": 4, "ig": 8, "f": -0.0, "b": False, "bg": True, "t": "[1, 2]", "m": None}]
    cols = ["i", "ig", "f", "b", "bg", "t", "m", "n", "absent"]
    df = pd.DataFrame(rows, columns=cols)
    df = df.astype({c: "float64" for c in df.columns if df[c].isna().all()})  # as the tables do
    assert csv_bytes(rows, cols) == df.to_csv(index=False).encode("utf-8")
    assert csv_bytes([], ["a", "b"]) == pd.DataFrame([], columns=["a", "b"]).to_csv(index=False).encode("utf-8")


def test_export_what_names_the_tables_and_refuses_an_unknown_one(store: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", "export", str(store), "--what", "layers", "--out", str(tmp_path / "l")]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "l" / "layers.csv")]
    assert main(["study", "export", str(store), "--what", "trials,layer", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'layer'" in err and "trials, steps, layers" in err, err
    assert not (tmp_path / "x").exists()
