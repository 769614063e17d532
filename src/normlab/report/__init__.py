"""Reports: every measurement of the lab as a figure, on one self-contained HTML page.

``build_report(path)`` detects what ``path`` holds (a training run, a probe output or a
study store; see ``normlab.report.load``) and writes ``path/report/index.html`` plus each
figure as PNG and SVG under ``path/report/figures/``. ``compare_report(paths, out)`` puts
several of one kind on one page. Numbers on every page go through ``report.numbers``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from normlab.report.compare import compare_page
from normlab.report.pages import build_report as build
from normlab.report.prepare import prepare as prepare_inputs  # (the name `prepare` is the submodule)


def build_report(path: str | Path, progress: bool = False, out: str | Path | None = None,
                 data_dir: str | None = None) -> Path:
    """Write the report page for a run dir, probe output or study store; returns index.html.
    What the page reads and nobody computed yet (a run's layer analysis) is computed first
    (``data_dir``: where a run's moved corpus is)."""

    prepare_inputs(path, out, data_dir)
    return build(path, progress=progress, out=out)


def compare_report(paths: Sequence[str | Path], out: str | Path, progress: bool = False) -> Path:
    """Write OUT/index.html comparing several runs, probes or studies (one kind) on shared axes."""

    return compare_page(paths, out, progress=progress)


__all__ = ["build_report", "compare_report"]
