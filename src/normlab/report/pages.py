"""The dispatch from a path to its report page, and the names the pages share.

Pages: ``run_page`` (one training run), ``probe_page`` (one probe output or inspected
checkpoint; ``kinds`` decides which, and every page's title and question), ``study_page``
(one study store), ``stability_page`` (a stability-map study, ``kinds.STABILITY_STUDIES``),
``series_page`` (a checkpoint series, ``normlab inspect --series``) and ``compare_page``
(several of one kind on shared axes). Each opens with its question and answer, then the
figures, then tables and the exact configuration. What they share lives in leaves they
import (``curves``: training curves and fates; ``diag``: the per-layer matrices of
diagnostics.jsonl), so no page imports another.
"""

from __future__ import annotations

from pathlib import Path

from normlab.report.curves import CURVES, curve_figures, fates, loss_series, mean_std, tokens_per_step
from normlab.report.diag import diag_matrices
from normlab.report.html import esc
from normlab.report.load import load_run, load_study, run_label


def run_page(path: str | Path, progress: bool = False, out: Path | None = None, data_dir: str | None = None) -> Path:
    from normlab.report.run_page import build

    return build(load_run(path), progress=progress, out=out, data_dir=data_dir)


def probe_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    from normlab.report.load import load_probe
    from normlab.report.probe_page import build

    return build(load_probe(path), progress=progress, out=out)


def study_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    from normlab.report.study_page import build

    return build(load_study(path), progress=progress, out=out)


def stability_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    from normlab.report.stability_page import build

    return build(load_study(path), progress=progress, out=out)


def series_page(path: str | Path, progress: bool = False, out: Path | None = None) -> Path:
    from normlab.report.load import load_series
    from normlab.report.series_page import build

    return build(load_series(path), progress=progress, out=out)


def build_report(path: str | Path, progress: bool = False, out: str | Path | None = None,
                 data_dir: str | None = None) -> Path:
    """Write PATH/report/index.html (or OUT/index.html) for a run dir, probe output or study
    store; return its path. ``progress`` prints each figure on stderr as it is drawn.
    ``data_dir``: where a run's moved corpus is (its layer analysis reads it)."""
    from normlab.report.kinds import page_kind

    kind = page_kind(path)
    out_dir = Path(out) if out is not None else None
    if kind == "run":
        return run_page(path, progress=progress, out=out_dir, data_dir=data_dir)
    # an inspected checkpoint is in the probe's format: the probe page words it by its kind
    page = {"probe": probe_page, "inspect": probe_page, "study": study_page,
            "stability": stability_page, "series": series_page}[kind]
    return page(path, progress=progress, out=out_dir)


__all__ = ["build_report", "run_page", "probe_page", "study_page", "stability_page", "series_page", "run_label",
           "esc", "curve_figures", "diag_matrices", "fates", "mean_std", "loss_series", "tokens_per_step", "CURVES"]
