"""A study as two tidy tables, for notebooks and other tools (``normlab study export``):

* ``trials``: one row per trial: its id, its axis values (one column per axis, named by its
  dotted key, e.g. ``model.placement``), ``seed``, its status and outcome (``trains``,
  ``stalls`` or ``diverged``: the lab's rule in ``normlab.study.outcome``, against the
  unigram loss of the data it trained on), best and final validation loss, final training
  loss, steps, tokens and wall time;
* ``steps``: one row per logged step of every trial (each line of its ``metrics.jsonl``):
  ``trial``, ``step``, ``train_loss``, ``val_loss`` (empty where the step did not evaluate),
  ``lr``, then the line's other fields, ``/`` spelled ``_`` (``time/step_s`` -> ``time_step_s``).

* ``layers``: the in-training diagnostics (RUN/diagnostics.jsonl), one row per step, statistic
  and layer, labelled (``normlab.study.layers``): ``trial``, its axes and ``seed``, ``step``,
  ``statistic``, ``layer``, ``value``; its own call (``layers()``) and file (``--what layers``).

They join on ``trial``. The rows are built from the store and the run directories without
pandas, and a CSV is written from them with the standard library (``csv_rows``: the bytes
pandas would write), so ``--format csv`` works on the base install; DataFrames need pandas
(the ``pandas`` extra), Parquet also pyarrow (the ``parquet`` extra), and a Parquet file is
written from the DataFrames. The text columns that may be empty (``outcome``, ``error``) are
pandas' nullable ``string`` whatever they hold, never float64 for want of a value.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from normlab.core.errors import UserError, unknown_name
from normlab.core.fscheck import writable_dir
from normlab.core.fsutil import atomic_write_bytes
from normlab.data.unigram import data_ce
from normlab.run.dir import RunDir
from normlab.study.csv_rows import csv_bytes
from normlab.study.frontier import Line, frontiers
from normlab.study.horizons import horizons
from normlab.study.layers import LAYER_FIELDS, layer_rows, training_statistics
from normlab.study.outcome import FINAL, classify, study_data_ce
from normlab.study.store import Store, TrialRecord

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("csv", "parquet")
# The fixed columns of each table; the trials table puts the axes between "trial" and "seed".
TRIAL_FIELDS = ("status", "outcome", "best_val_loss", "final_val_loss", "final_train_loss", "steps", "tokens",
                "wall_time_s", "diverged_at_step", "attempts", "error", "run_dir")
STEP_FIELDS = ("trial", "step", "train_loss", "val_loss", "lr")
TABLES = ("trials", "steps", "layers")  # what `study export --what` names; the default is the first two
TEXT = ("outcome", "error")  # text columns that may hold no value at all


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

    def layer_rows(self) -> list[dict[str, Any]]:
        """One dict per step, statistic and layer of every trial's diagnostics.jsonl, labelled with
        the trial and its axes (``normlab.study.layers``)."""

        known, rows = training_statistics(), []
        for t in self.records:
            run = RunDir(t.run_dir)
            lines = run.diagnostics()
            if not lines:
                continue
            depth = run.config_dict().get("model", {}).get("n_layer")
            head = {"trial": t.id, **{a: _cell(t.params.get(a)) for a in self.axes()}}
            rows += [{**head, **r} for r in layer_rows(lines, depth if isinstance(depth, int) else None, known)]
        return rows

    def table(self, name: str) -> tuple[list[str], list[dict[str, Any]]]:
        """(columns, rows) of table ``name`` (one of ``TABLES``), without pandas."""
        if name == "trials":
            return ["trial", *self.axes(), *TRIAL_FIELDS], self.trial_rows()
        if name == "steps":
            steps = self.step_rows()
            return list(dict.fromkeys(k for r in [dict.fromkeys(STEP_FIELDS), *steps] for k in r)), steps
        if name == "layers":
            return ["trial", *self.axes(), *LAYER_FIELDS], self.layer_rows()
        raise UserError(f"table {name!r}: unknown; valid: {', '.join(TABLES)}")

    # ------------------------------------------------------------------ pandas
    def frame(self) -> Frames:
        """``Frames(trials, steps)``: the two tables as pandas DataFrames."""
        pd = _pandas()
        return Frames(_frame(pd, *self.table("trials")), _frame(pd, *self.table("steps")))

    def layers(self) -> pd.DataFrame:
        """The per-layer diagnostics of every trial as one long DataFrame (``trial``, the axes,
        ``seed``, ``step``, ``statistic``, ``layer``, ``value``); empty when no trial ran them."""
        return _frame(_pandas(), *self.table("layers"))

    # ------------------------------------------------------------------ critical lrs
    def frontiers(self, horizon: int | None = None) -> list[Line]:
        """The critical lr of each placement x depth x warm-up (``normlab.study.frontier``) at
        ``horizon`` (default: the study's base horizon, its trials' own length), judged against
        the unigram loss of the data the trials trained on."""
        if horizon is None:
            hs = horizons(self.records)
            if not hs:
                raise UserError(f"{self.store.root}: no completed trial yet, so no horizon to read the "
                                "critical lrs at (run the study, or pass horizon=STEPS)")
            horizon = hs[0]
        return frontiers(self.records, study_data_ce(self.records), horizon)

    # ------------------------------------------------------------------ files
    def export(self, out: str | Path, fmt: str = "csv", what: Sequence[str] = TABLES[:2]) -> list[Path]:
        """Write ``OUT/NAME.FMT`` for each table named in ``what``; returns their paths. Every check
        comes before the first write, and each file is replaced whole (never left half-written)."""

        if fmt not in FORMATS:
            raise UserError(f"--format {fmt!r}: unknown format; valid: {', '.join(FORMATS)}")
        if not what:
            raise UserError(f"--what: no table named; name one or more of {', '.join(TABLES)} (comma-separated)")
        for w in what:
            if w not in TABLES:
                raise unknown_name("--what", w, TABLES)
        pd = None
        if fmt == "parquet":
            _pyarrow()
            pd = _pandas()
        root = writable_dir(out, "--out")
        paths = []
        for name in dict.fromkeys(what):
            columns, rows = self.table(name)
            if pd is None:
                data = csv_bytes(rows, columns)
            else:
                buf = io.BytesIO()
                _frame(pd, columns, rows).to_parquet(buf, index=False, engine="pyarrow")
                data = buf.getvalue()
            paths.append(root / f"{name}.{fmt}")
            atomic_write_bytes(paths[-1], data)
        return paths


def _frame(pd: Any, columns: list[str], rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A DataFrame whose columns read back from CSV as they are: a column with no value (no
    trial diverged, say) is float NaN, as a CSV reader makes it, not an object column of None;
    except the text columns that may be empty, which are nullable strings whatever they hold."""
    df = pd.DataFrame(rows, columns=columns)
    text = [c for c in TEXT if c in df.columns]
    df = df.astype({c: "float64" for c in df.columns if c not in text and df[c].isna().all()})
    return df.astype(dict.fromkeys(text, "string"))


def _pandas(what: str = "study tables as DataFrames", install: str = "pip install 'normlab[pandas]'") -> Any:
    try:
        import pandas
    except ImportError:
        raise UserError(f"{what} need pandas, which is not installed: {install} "
                        "(`normlab study export --format csv` needs none)") from None
    return pandas


def _pyarrow() -> Any:
    """pyarrow, through which pandas writes Parquet (both checked before anything is written)."""
    _pandas("Parquet files", "pip install 'normlab[parquet]'")
    try:
        import pyarrow
    except ImportError:
        raise UserError("--format parquet needs pyarrow, which is not installed: "
                        "pip install 'normlab[parquet]' (or use --format csv)") from None
    return pyarrow


def load(store: str | Path) -> StudyTables:
    """The study in ``store`` as tables: ``load(STORE).frame()`` -> ``Frames(trials, steps)``,
    ``load(STORE).layers()``, ``load(STORE).frontiers()``."""
    return StudyTables(Store(store))


__all__ = ["FORMATS", "TABLES", "Frames", "StudyTables", "load"]
