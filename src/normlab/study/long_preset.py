"""The study preset ``shallow-long``: Post-LN against Pre-LN at the stability map's shallow
depth, trained to the end of a cosine schedule five times the map's length.

Two seed statements are about where training ends, not how it starts: seed 002's "below 12
layers post-norm may give slightly better perplexity, but the difference is usually negligible"
and seed 004's "Pre Norm's ceiling may be lower than Post Norm's". A 200-step map cell cannot
see a difference of a few hundredths of a nat; an exploratory 1000-step run (6 blocks, lr 1e-3,
cosine, 2 seeds) had Post-LN 0.05-0.07 below Pre-LN, a hint this study is sized to decide.
The base is the map's (d=64, xavier init, no clipping) with a cosine decay to lr/10 after a
50-step warm-up, so that both placements train (the map's cell at lr 1e-3, 6 blocks and
warm-up 50 trained in every seed for both); diagnostics every 100 steps give OLMo-core's
spike score ("trains more stably").
"""

from __future__ import annotations

from typing import Any

from normlab.study.map_preset import map_base
from normlab.study.presets import _pick
from normlab.study.spec import StudySpec

LONG_GRID: dict[str, dict[str, Any]] = {
    "smoke": {"steps": 24, "n_layer": 2, "seeds": [0, 1, 2], "warmup": 4},
    # cpu: 2 placements x 6 seeds = 12 runs of 1000 steps at 6 blocks (~62 s each on one core: ~7 min on 2)
    "cpu": {"steps": 1000, "n_layer": 6, "seeds": [0, 1, 2, 3, 4, 5], "warmup": 50},
    "gpu": {"steps": 15000, "n_layer": 6, "seeds": [0, 1, 2], "warmup": 300},
}


def shallow_long(scale: str = "cpu") -> StudySpec:
    """Post-LN and Pre-LN at 6 blocks, lr 1e-3 cosine to the end (``LONG_GRID``), 6 seeds at cpu."""
    g = _pick(scale, LONG_GRID, "shallow-long")
    base = map_base(scale)
    steps = g["steps"]
    base["model"]["n_layer"] = g["n_layer"]
    base["optim"].update({"lr": 1e-3, "min_lr": 1e-4, "schedule": "cosine", "warmup_steps": g["warmup"]})
    base["train"].update({"steps": steps, "eval_every": max(1, steps // 10), "checkpoint_every": steps,
                          "log_every": max(1, min(10, steps // 20)), "diag_every": max(1, steps // 10)})
    return StudySpec(name="shallow-long", base=base, seeds=list(g["seeds"]),
                     axes={"model.placement": ["post", "pre"]},
                     description="Where do Post-LN and Pre-LN end at a shallow depth, trained to the end of their "
                                 "schedule?")


__all__ = ["LONG_GRID", "shallow_long"]
