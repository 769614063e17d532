"""Studies: grids of runs in a resumable SQLite store, run locally or on Ray (docs/studies.md).

Public names load lazily: ``from normlab.study import Store, StudySpec, run_study``;
``normlab.study.load(STORE).frame()`` gives a store's trials and logged steps as DataFrames.
"""

from __future__ import annotations

from normlab.lazy import lazy_getattr

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
    "classify": "normlab.study.outcome",
    "map_cells": "normlab.study.outcome",
    "study_data_ce": "normlab.study.outcome",
    "load": "normlab.study.frame",
    "Frames": "normlab.study.frame",
}


__getattr__ = lazy_getattr("normlab.study", _LAZY)

__all__ = list(_LAZY)
