"""The study preset ``stability-map-width``: the stability map with width and parametrisation as
axes (issue 43). Post-LN and Pre-LN at 6 blocks with warm-up, over lr x width x parametrisation
(standard, and muP with the narrowest width as its base), on the stability map's base (xavier,
constant lr after warm-up, no clipping). A map cell is (placement, lr, depth, warm-up); the
study page draws one map per placement x width x parametrisation (``study.outcome.map_variants``)
so that no cell pools two models, and the frontier section draws the critical lr against width
(``report.frontier_fig.width_figure``). Exploration: no claim reads it (the registered width
claim is ``mup-width-transfer``'s, ``study/transfer_preset.py``)."""

from __future__ import annotations

import copy
from typing import Any

from normlab.study.map_preset import map_base
from normlab.study.presets import _pick
from normlab.study.spec import StudySpec

NAME = "stability-map-width"
GRID: dict[str, dict[str, Any]] = {
    "smoke": {"widths": [32, 64], "lr": [1e-3, 1e-2], "n_layer": 2, "warmup": 5, "seeds": [0], "steps": 12},
    # cpu: 2 placements x 3 widths x 2 parametrisations x 5 lrs x 2 seeds = 120 runs of 200 steps,
    # about 1.3 core-hours (width 256 is ~0.4 s a step, two thirds of it)
    "cpu": {"widths": [64, 128, 256], "lr": [3e-4, 1e-3, 3e-3, 1e-2, 3e-2], "n_layer": 6, "warmup": 50,
            "seeds": [0, 1], "steps": 200},
    "gpu": {"widths": [384, 768, 1536], "lr": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2], "n_layer": 12, "warmup": 300,
            "seeds": [0, 1, 2], "steps": 3000},
}


def stability_map_width(scale: str = "cpu") -> StudySpec:
    """Post-LN and Pre-LN over lr x width x parametrisation (sp, mup) at one depth and warm-up
    (``GRID``); cpu 120 runs."""
    g = _pick(scale, GRID, NAME)
    base = copy.deepcopy(map_base(scale))
    base["train"]["steps"] = g["steps"]
    base["model"].update(n_layer=g["n_layer"], base_width=min(g["widths"]))
    base["optim"]["warmup_steps"] = g["warmup"]
    return StudySpec(name=NAME, base=base, seeds=list(g["seeds"]),
                     axes={"model.placement": ["post", "pre"], "model.d_model": list(g["widths"]),
                           "model.param": ["sp", "mup"], "optim.lr": list(g["lr"])},
                     description="Where in lr x width does each placement train, under standard parametrisation "
                                 "and under muP?")


__all__ = ["GRID", "NAME", "stability_map_width"]
