"""A study as two tidy tables, for notebooks and other tools (``normlab study export``):

* ``trials``: one row per trial: its id, its axis values (one column per axis, named by its
  dotted key, e.g. ``model.placement``), ``seed``, its status and outcome (``trains``,
  ``stalls`` or ``diverged``: the lab's rule in ``normlab.study.outcome``, against the
  unigram loss of the data it trained on), best and final validation loss, final training
  loss, steps, tokens and wall time;
* ``steps``: one row per logged step of every trial (each line of its ``metrics.jsonl``):
  ``trial``, ``step``, ``train_loss``, ``val_loss`` (empty where the step did not evaluate),
  ``lr``, then the line's other fields, ``/`` spelled ``_`` (``time/step_s`` -> ``time_step_s``).

The two join on ``trial``. The rows are built from the store and the run directories without
pandas; ``frame()`` and the files need it (the ``pandas`` extra; Parquet also needs pyarrow,
the ``parquet`` extra). ``Frames`` and both files hold the same values: the files are written
from the frames.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from normlab.core.errors import UserError
from normlab.core.fscheck import writable_dir
from normlab.core.fsutil import atomic_write_bytes
from normlab.data.unigram import data_ce
from normlab.run.dir import RunDir
from normlab.study.outcome import FINAL, classify
from normlab.study.store import Store, TrialRecord

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "parquet")
# The fixed columns of each table; the trials table puts the axes between "trial" and "seed".
TRIAL_FIELDS = ("status", "outcome", "best_val_loss", "final_val_loss", "final_train_loss", "steps", "tokens",
                "wall_time_s", "diverged_at_step", "attempts", "error", "run_dir")
STEP_FIELDS = ("trial", "step", "train_loss", "val_loss", "lr")


class Frames(NamedTuple):
    """The study's two tables (``trials, steps = load(STORE).frame()``)."""

    trials: pd.DataFrame
    steps: pd.DataFrame


def _cell(v: Any) -> Any:
    """A value a CSV or Parquet column can hold: a list or table (a per-layer placement, say)
    as its JSON text, a non-finite float as missing."""
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True)
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class StudyTables:
    """A study store read as tables (``normlab.study.load(STORE)``)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.records: list[TrialRecord] = store.trials()
        self._ce: dict[str, Any] = {}

    # ------------------------------------------------------------------ rows (no pandas)
    def axes(self) -> list[str]:
        """The axis keys of the trials (``seed`` last), in the order they first appear."""
        keys: dict[str, None] = {}
        for t in self.records:
            keys.update(dict.fromkeys(k for k in t.params if k != "seed"))
        return [*keys, "seed"]

    def outcome(self, t: TrialRecord) -> str | None:
        """The trial's outcome by the lab's rule; None when it has none (unfinished, failed, never
        validated). The reference losses come from the data of the trial's own config."""

        run = RunDir(t.run_dir)
        if t.status not in FINAL or not run.is_run():
            return None
        data = run.config().data
        if repr(data) not in self._ce:
            self._ce[repr(data)] = data_ce(data)
        return classify(t, self._ce[repr(data)])

    def trial_rows(self) -> list[dict[str, Any]]:
        """One dict per trial, in the store's order, every key of every row present."""

        rows = []
        for t in self.records:
            s = t.summary or {}
            lines = RunDir(t.run_dir).metrics()
            train = [m["train/loss"] for m in lines if "train/loss" in m]
            row: dict[str, Any] = {"trial": t.id, **{a: _cell(t.params.get(a)) for a in self.axes()}}
            row.update(status=t.status, outcome=self.outcome(t), best_val_loss=_cell(s.get("best_val_loss")),
                       final_val_loss=_cell(s.get("final_val_loss")),
                       final_train_loss=_cell(train[-1]) if train else None, steps=s.get("steps"),
                       tokens=s.get("tokens"), wall_time_s=s.get("wall_time_s"),
                       diverged_at_step=s.get("diverged_at_step"), attempts=t.attempts, error=t.error,
                       run_dir=t.run_dir.relative_to(self.store.root).as_posix())
            rows.append(row)
        return rows

    def step_rows(self) -> list[dict[str, Any]]:
        """One dict per logged step (each metrics.jsonl line), trials in the store's order."""

        rows = []
        for t in self.records:
            for m in RunDir(t.run_dir).metrics():
                row: dict[str, Any] = dict.fromkeys(STEP_FIELDS)
                row["trial"] = t.id
                row.update({k.replace("/", "_"): _cell(v) for k, v in m.items()})
                rows.append(row)
        return rows

    # ------------------------------------------------------------------ pandas
    def frame(self) -> Frames:
        """``Frames(trials, steps)``: the two tables as pandas DataFrames."""
        pd = _pandas()
        trial_cols = ["trial", *self.axes(), *TRIAL_FIELDS]
        steps = self.step_rows()
        step_cols = list(dict.fromkeys(k for r in [dict.fromkeys(STEP_FIELDS), *steps] for k in r))
        return Frames(_frame(pd, self.trial_rows(), trial_cols), _frame(pd, steps, step_cols))

    def export(self, out: str | Path, fmt: str = "csv") -> list[Path]:
        """Write ``OUT/trials.FMT`` and ``OUT/steps.FMT``; returns their paths. Every check comes
        before the first write, and each file is replaced whole (never left half-written)."""

        if fmt not in FORMATS:
            raise UserError(f"--format {fmt!r}: unknown format; valid: {', '.join(FORMATS)}")
        if fmt == "parquet":
            _pyarrow()
        root = writable_dir(out, "--out")
        frames = self.frame()
        paths = []
        for name, df in frames._asdict().items():
            buf = io.BytesIO()
            if fmt == "csv":
                buf.write(df.to_csv(index=False).encode("utf-8"))
            else:
                df.to_parquet(buf, index=False, engine="pyarrow")
            paths.append(root / f"{name}.{fmt}")
            atomic_write_bytes(paths[-1], buf.getvalue())
        return paths


def _frame(pd: Any, rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    """A DataFrame whose columns read back from CSV as they are: a column with no value (no
    trial diverged, say) is float NaN, as a CSV reader makes it, not an object column of None."""
    df = pd.DataFrame(rows, columns=columns)
    return df.astype({c: "float64" for c in df.columns if df[c].isna().all()})


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise UserError("study tables need pandas, which is not installed: pip install 'normlab[pandas]'") from None
    return pandas


def _pyarrow() -> Any:
    """pyarrow, through which pandas writes Parquet (checked before anything is written)."""
    _pandas()
    try:
        import pyarrow
    except ImportError:
        raise UserError("--format parquet needs pyarrow, which is not installed: "
                        "pip install 'normlab[parquet]' (or use --format csv)") from None
    return pyarrow


def load(store: str | Path) -> StudyTables:
    """The study in ``store`` as tables: ``load(STORE).frame()`` -> ``Frames(trials, steps)``."""
    return StudyTables(Store(store))


__all__ = ["FORMATS", "Frames", "StudyTables", "load"]
