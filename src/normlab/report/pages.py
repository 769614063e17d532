"""The dispatch from a path to its report page, and the names the pages share.

Pages: ``run_page`` (one training run), ``probe_page`` (one probe output or inspected
checkpoint; ``kinds`` decides which, and every page's title and question), ``study_page``
(one study store), ``stability_page`` (a stability-map study, ``kinds.STABILITY_STUDIES``),
``demo_page`` (the study of ``normlab demo``, ``kinds.DEMO_STUDIES``),
``series_page`` (a checkpoint series, ``normlab inspect --series``) and ``compare_page``
(several of one kind on shared axes). Each opens with its question and answer, then the
figures, then tables and the exact configuration. What they share lives in leaves they
import (``curves``: training curves and fates; ``diag``: the per-layer matrices of
diagnostics.jsonl), so no page imports another.
"""

from __future__ import annotations

from pathlib import Path

from normlab.report import probe_page as probe_page_mod
from normlab.report import run_page as run_page_mod
from normlab.report import series_page as series_page_mod
from normlab.report import stability_page as stability_page_mod
from normlab.report import study_page as study_page_mod
from normlab.report.curves import CURVES, curve_figures, fates, loss_series, mean_std, tokens_per_step
from normlab.report.demo_page import build
from normlab.report.diag import diag_matrices
from normlab.report.html import esc
from normlab.report.kinds import page_kind
from normlab.report.load import load_probe, load_run, load_series, load_study, run_label
from normlab.run.dir import note_if_written


def run_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    return run_page_mod.build(load_run(path), progress=progress, out=out)


def probe_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    return probe_page_mod.build(load_probe(path), progress=progress, out=out)


def study_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    return study_page_mod.build(load_study(path), progress=progress, out=out)


def stability_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    return stability_page_mod.build(load_study(path), progress=progress, out=out)


def demo_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    return build(load_study(path), progress=progress, out=out)


def series_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    return series_page_mod.build(load_series(path), progress=progress, out=out)


def build_report(path: str | Path, progress: bool = False, out: str | Path | None = None) -> Path:
    """Write PATH/report/index.html (or OUT/index.html) for a run dir, probe output or study
    store; return its path. ``progress`` prints each figure on stderr as it is drawn."""

    note_if_written(path, "report")  # a reader: it never locks; the page says so too
    # an inspected checkpoint is in the probe's format: the probe page words it by its kind
    page = {"run": run_page, "probe": probe_page, "inspect": probe_page, "study": study_page,
            "stability": stability_page, "demo": demo_page, "series": series_page}[page_kind(path)]
    return page(path, progress=progress, out=Path(out) if out is not None else None)


__all__ = ["build_report", "run_page", "probe_page", "study_page", "stability_page", "demo_page", "series_page", "run_label",
           "esc", "curve_figures", "diag_matrices", "fates", "mean_std", "loss_series", "tokens_per_step", "CURVES"]
