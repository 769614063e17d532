"""Reports: every measurement of the lab as a figure, on one self-contained HTML page.

``build_report(path)`` detects what ``path`` holds (a training run, a probe output or a
study store; see ``normlab.report.load``) and writes ``path/report/index.html`` plus each
figure as PNG and SVG under ``path/report/figures/``.
"""

from __future__ import annotations

from pathlib import Path


def build_report(path: str | Path) -> Path:
    """Write the report page for a run dir, probe output or study store; returns index.html."""
    from normlab.report.pages import build_report as build

    return build(path)


__all__ = ["build_report"]
