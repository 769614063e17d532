"""Studies: grids of runs in a resumable SQLite store, run locally or on Ray (docs/studies.md).

Public names load lazily: ``from normlab.study import Store, StudySpec, run_study``.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "StudySpec": "normlab.study.spec",
    "load_spec": "normlab.study.spec",
    "spec_from_dict": "normlab.study.spec",
    "Store": "normlab.study.store",
    "TrialRecord": "normlab.study.store",
    "run_study": "normlab.study.runner",
    "status_text": "normlab.study.runner",
    "study_preset": "normlab.study.presets",
    "STUDY_PRESETS": "normlab.study.presets",
    "EXECUTORS": "normlab.study.executors",
    "TRIALS": "normlab.study.trials",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'normlab.study' has no attribute {name!r}")


__all__ = list(_LAZY)
