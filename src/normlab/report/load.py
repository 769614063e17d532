"""Readers for the files the lab writes (the contracts; never logs).

| kind  | marker files                      | reader        |
|-------|-----------------------------------|---------------|
| run   | config.json + metrics.jsonl       | ``load_run``   |
| probe | probe.csv (+ summary.json, probe_config.json) | ``load_probe`` |
| study | study.sqlite (+ spec.json, runs/) | ``load_study`` |
| series | series.csv + series.json (+ steps/, ``normlab inspect --series``) | ``load_series`` |
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.fsutil import read_json
from normlab.run.dir import RunDir, folder_kind, writer
from normlab.run.outdir import PROBE_CONFIG, PROBE_CSV, SERIES_CSV, SERIES_JSON, SUMMARY, OutDir
from normlab.study.store import Store

# the file format a folder's marker (``normlab.run.dir.MARKER``) implies
_FORMAT = {"run": "run", "probe": "probe", "inspect": "probe", "series": "series"}


def _written(p: Path, fmt: str) -> bool:
    """Whether the file a reader of ``fmt`` needs first is there yet."""

    if fmt == "run":
        return RunDir(p).is_report_run()
    return (OutDir(p, "series").file(SERIES_CSV) if fmt == "series" else OutDir(p, "probe").file(PROBE_CSV)).is_file()


def detect(path: str | Path) -> str:
    """'run', 'probe', 'study' or 'series' for a directory the lab wrote; a UserError otherwise.

    The folder's marker says its kind; a folder from before markers is known by its files."""

    p = Path(path)
    if not p.is_dir():
        raise UserError(f"{p}: no such directory (give a run dir, a probe output dir or a study store)")
    kind = folder_kind(p)
    if kind == "analysis":
        raise UserError(f"{p}: an analysis folder (normlab analyze); report the run it belongs to")
    if kind in _FORMAT:
        if _written(p, _FORMAT[kind]):
            return _FORMAT[kind]
        h = writer(p)
        if h is not None:
            raise UserError(f"{p}: a {kind} still being written by {h.describe()}, with nothing to draw yet; "
                            "rerun normlab report once it has written its first results")
    if Store.has_db(p):
        return "study"
    if OutDir(p, "probe").file(PROBE_CSV).is_file():
        return "probe"
    series = OutDir(p, "series")
    if series.file(SERIES_CSV).is_file() and series.file(SERIES_JSON).is_file():
        return "series"

    if RunDir(p).is_report_run():
        return "run"
    raise UserError(f"{p}: not a run dir (config.json + metrics.jsonl), a probe output (probe.csv) "
                    f"a study store (study.sqlite) or a checkpoint series (series.csv)")




@dataclass
class RunData:
    path: Path
    config: dict[str, Any]
    metrics: list[dict[str, Any]]
    summary: dict[str, Any] | None = None
    env: dict[str, Any] | None = None
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    writer: str | None = None  # who still writes the run ("pid 42 (normlab train, ...)"), None when nobody

    def series(self, key: str, x: str = "step") -> tuple[list[float], list[float]]:
        """(x, y) over metric lines that carry both keys and a finite numeric y."""
        xs, ys = [], []
        for m in self.metrics:
            v = m.get(key)
            if isinstance(v, (int, float)) and m.get(x) is not None and v == v:
                xs.append(float(m[x]))
                ys.append(float(v))
        return xs, ys

    @property
    def label(self) -> str:
        return run_label(self.config)


def run_label(config: dict[str, Any]) -> str:
    """Placement (+ qk_norm) of a RunConfig dict: the legend label of its curves."""
    model = config.get("model", {})
    pl = model.get("placement", "?")
    pl = pl if isinstance(pl, str) else "mixed"
    qk = model.get("qk_norm")
    return f"{pl}+qk_{qk}" if qk else pl


def load_run(path: str | Path) -> RunData:
    run = RunDir(path)
    h = run.writer()  # asked first: a run that finishes while it is read is still drawn as it was read
    return RunData(run.path, run.config_dict(), run.metrics(), run.summary(), run.env(), run.diagnostics(),
                   h.describe() if h is not None else None)


@dataclass
class ProbeData:
    path: Path
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    config: dict[str, Any]
    writer: str | None = None  # who still writes the folder (a --force rerun), None when nobody


_INT_COLS = ("n_layer", "d_model", "seed", "layer")


def _long_rows(csv_path: Path, ints: tuple[str, ...] = _INT_COLS) -> list[dict[str, Any]]:
    """probe.csv's long format (and series.csv's, with its ``step``), typed."""
    rows = []
    with csv_path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = {"placement", "n_layer", "seed", "layer", "metric", "value", *ints} - {"d_model"} - set(
            reader.fieldnames or [])
        if missing:
            raise UserError(f"{csv_path}: missing columns {', '.join(sorted(missing))}")
        for r in reader:
            for c in ints:
                if r.get(c) not in (None, ""):
                    r[c] = int(float(r[c]))
            r["value"] = float(r["value"]) if r["value"] not in ("", None) else float("nan")
            rows.append(r)
    return rows


def load_probe(path: str | Path) -> ProbeData:
    """probe.csv in long format: placement, init, n_layer, d_model, seed, layer, sublayer, param, metric, value."""

    p = Path(path)
    h = writer(p)
    folder = OutDir(p, "probe")  # an inspect folder holds the same three files
    rows = _long_rows(folder.file(PROBE_CSV))
    return ProbeData(p, rows, read_json(folder.file(SUMMARY), {}) or {}, read_json(folder.file(PROBE_CONFIG), {}) or {},
                     h.describe() if h is not None else None)


@dataclass
class StudyData:
    path: Path
    spec: dict[str, Any]
    trials: list[Any]  # normlab.study.store.TrialRecord


def load_study(path: str | Path) -> StudyData:
    """A study store, read through the store's own reader (safe while workers still run:
    SQLite in WAL mode lets readers see the last committed state)."""

    store = Store(path)
    try:
        return StudyData(store.root, store.spec, store.trials())
    finally:
        store.close()


@dataclass
class SeriesData:
    """A checkpoint series (``normlab inspect --series``): every step's rows, with ``step``."""

    path: Path
    rows: list[dict[str, Any]]
    meta: dict[str, Any]                # series.json: name, settings, sources {step: checkpoint path}
    summaries: dict[int, dict[str, Any]]  # step -> that step's summary.json

    @property
    def steps(self) -> list[int]:
        return sorted({r["step"] for r in self.rows} | set(self.summaries))


def load_series(path: str | Path) -> SeriesData:
    p = Path(path)
    folder = OutDir(p, "series")
    meta = read_json(folder.file(SERIES_JSON), {})
    if not isinstance(meta, dict) or not isinstance(meta.get("sources"), dict):
        raise UserError(f"{folder.file(SERIES_JSON)}: damaged; rerun `normlab inspect --series ... --out {p}`")
    rows = _long_rows(folder.file(SERIES_CSV), ("step", *_INT_COLS))
    summaries = {}
    for s in sorted({r["step"] for r in rows}):
        got = read_json(OutDir(folder.step_dir(s), "inspect").file(SUMMARY), {})
        summaries[s] = got if isinstance(got, dict) else {}
    return SeriesData(p, rows, meta, summaries)
