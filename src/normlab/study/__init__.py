"""Studies: grids of runs in a resumable SQLite store, run locally or on Ray (docs/studies.md).

Public names load lazily: ``from normlab.study import Store, StudySpec, run_study``;
``normlab.study.load(STORE).frame()`` gives a store's trials and logged steps as DataFrames,
``.layers()`` its per-layer diagnostics, ``.frontiers()`` its critical learning rates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from normlab.core.lazy import lazy_dir, lazy_getattr

if TYPE_CHECKING:  # for type checkers only: the lazy loading below imports them
    from normlab.study.executors import EXECUTORS
    from normlab.study.frame import Frames, load
    from normlab.study.outcome import classify, map_cells, study_data_ce
    from normlab.study.presets import STUDY_PRESETS, study_preset
    from normlab.study.runner import run_study, status_text
    from normlab.study.spec import StudySpec, load_spec, spec_from_dict
    from normlab.study.store import Store, TrialRecord
    from normlab.study.trials import TRIALS

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
__dir__ = lazy_dir(globals(), _LAZY)

__all__ = ["EXECUTORS", "STUDY_PRESETS", "TRIALS", "Frames", "Store", "StudySpec", "TrialRecord", "classify", "load",
           "load_spec", "map_cells", "run_study", "spec_from_dict", "status_text", "study_data_ce", "study_preset"]
