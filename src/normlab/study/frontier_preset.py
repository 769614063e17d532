"""The study preset ``stability-frontier``: the stability map with a learning-rate axis long
enough to find each placement's critical lr (``normlab.study.frontier``), and its stalled runs
resumed to a longer horizon.

The published ``stability-map`` has three lrs per cell (5e-4, 1e-3, 3e-3): a count of stalls
in one cell sits on a knife edge (which Post-LN seeds stall at 1e-3 changes with the CPU's
float kernels), and a single 200-step horizon reads a slow start as a failure. This preset
keeps the map's base (d=64, xavier, constant lr after linear warm-up, no clipping: its trials
at 5e-4 and 1e-3 are the map's, same config, same id) and crosses placement x depth x warm-up
with seven lrs a factor 2 apart, 2.5e-4 to 1.6e-2, so that the transition from training to
stalling or diverging lies inside the range for every placement; a trial still on the unigram
plateau at step 200 is resumed, stage by stage (400, 800, 1000), until it leaves it or
reaches step 1000 (``extend_stalled_to``, ``normlab.study.extend``).

The sizes are the table ``FRONTIER_GRID``; its cost at cpu (840 runs: more than one
150-minute session of 2 cores) and the slices that fit are in docs/studies.md, "Critical
learning rates". ``quick`` is the critical lr of one's own placement in minutes: the cpu base
at its shallow depth without warm-up, where the published map's Post-LN leaves training
between 2e-3 and 6e-3 and Pre-LN still trains at 1.2e-2, over seven lrs a factor 2 apart
around them (1e-3 .. 6.4e-2) and 6 seeds each, so that a transition anywhere inside gives a
bounded interval (with 6 seeds a clean gap is its own 95% interval: 0.5^6 < 0.025).

``placements`` (``normlab study run stability-frontier --placements keel,pre``) replaces the
scale's placements; a placement's trials are the same (same config, same id) whichever others
run beside it.
"""

from __future__ import annotations

from typing import Any

from normlab.core.errors import NO_VALUE, ConfigError
from normlab.model.catalogue import PLACEMENTS
from normlab.study.map_preset import STABILITY_GRID, map_base
from normlab.study.presets import _pick, _placements
from normlab.study.spec import StudySpec

NAME = "stability-frontier"
_SIX = ["post", "pre", "deepnorm", "admin", "sandwich", "pre_post"]

FRONTIER_GRID: dict[str, dict[str, Any]] = {
    # smoke: the pipeline in seconds (a lr range wide enough that some cells train and some fail)
    "smoke": {"placements": ["post", "pre"], "lr": [1e-3, 1e-2, 1e-1, 3e-1], "n_layer": [2], "warmup": [0, 5],
              "seeds": [0, 1], "extend_to": 24},
    # cpu: the map's placements, depths and warm-ups, 7 lrs a factor 2 apart; 200 steps, extended to 1000
    "cpu": {"placements": _SIX, "lr": [2.5e-4, 5e-4, 1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2], "n_layer": [6, 18],
            "warmup": [0, 50], "seeds": [0, 1, 2, 3, 4], "extend_to": 1000},
    "gpu": {"placements": _SIX, "lr": [1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2], "n_layer": [6, 24, 48],
            "warmup": [0, 300], "seeds": [0, 1, 2], "extend_to": 10000},
    # quick: one depth, no warm-up, lrs around where typical placements stop training, 6 seeds an lr:
    # 42 runs a placement at 6 blocks x 200 steps on the cpu base (module docstring, docs/studies.md)
    "quick": {"placements": ["post", "pre"], "lr": [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2, 3.2e-2, 6.4e-2], "n_layer": [6],
              "warmup": [0], "seeds": [0, 1, 2, 3, 4, 5], "extend_to": 400, "base": "cpu"},
}


def chosen_placements(names: list[str]) -> list[str]:
    """``names`` checked against the registry (an unknown one fails listing the valid ones),
    each once, in the order given."""
    if not names:
        raise ConfigError("--placements", NO_VALUE, "name one or more, comma-separated, e.g. keel,pre "
                                                    "(`normlab placements` lists them)")
    for n in names:
        PLACEMENTS.get(n, "--placements")
    return list(dict.fromkeys(names))


def stability_frontier(scale: str = "cpu", placements: list[str] | None = None) -> StudySpec:
    """Placement x log-spaced lrs x depth x warm-up on the stability map's base, stalled runs
    resumed to a longer horizon (``FRONTIER_GRID``): the critical lr of each placement, depth and
    warm-up, at each horizon. cpu: 6 placements x 7 lrs x 2 depths x 2 warm-ups x 5 seeds (840
    runs); quick: 7 lrs x 6 seeds at 6 blocks without warm-up, 42 runs a placement (~5 minutes
    each on 2 workers); --placements chooses the placements."""
    g = _pick(scale, FRONTIER_GRID, NAME)
    names = _placements(g["placements"]) if placements is None else chosen_placements(placements)
    return StudySpec(name=NAME, base=map_base(g.get("base", scale)), seeds=list(g["seeds"]),
                     axes={"model.placement": names, "optim.lr": list(g["lr"]),
                           "model.n_layer": list(g["n_layer"]), "optim.warmup_steps": list(g["warmup"])},
                     extend_stalled_to=g["extend_to"],
                     description="The critical learning rate of each placement, depth and warm-up, where half the "
                                 "seeds train, at each horizon")


# ``frontier-ends``: the map's Post-LN and Pre-LN cells at 6 blocks carried to higher lrs, so that
# with the map's own lrs (5e-4, 1e-3, 3e-3) each line has six, and its transition lies inside:
# Post-LN without warm-up stalled at 3e-3 and trained at 1e-3 (2e-3 splits that gap), Post-LN
# with warm-up and Pre-LN trained at 3e-3 (6e-3, 1.2e-2 find where they stop). The seeds and the
# horizon are the map's, so the claims read both studies as one sweep.
ENDS_GRID: dict[str, dict[str, Any]] = {
    "smoke": {"placements": ["post", "pre"], "lr": [2e-3, 1e-2], "n_layer": [2]},
    "cpu": {"placements": ["post", "pre"], "lr": [2e-3, 6e-3, 1.2e-2], "n_layer": [6]},
    "gpu": {"placements": ["post", "pre"], "lr": [2e-2, 5e-2], "n_layer": [6]},
}


def frontier_ends(scale: str = "cpu") -> StudySpec:
    """Post-LN and Pre-LN at the stability map's shallow depth and warm-ups, at lrs beyond the
    map's (``ENDS_GRID``), with the map's base, seeds and long horizon: cpu 2 x 3 lrs x 2 warm-ups
    x 4 seeds = 48 runs."""
    g, m = _pick(scale, ENDS_GRID, "frontier-ends"), _pick(scale, STABILITY_GRID, "frontier-ends")
    return StudySpec(name="frontier-ends", base=map_base(scale), seeds=list(m["seeds"]),
                     axes={"model.placement": _placements(g["placements"]), "optim.lr": list(g["lr"]),
                           "model.n_layer": list(g["n_layer"]), "optim.warmup_steps": list(m["warmup"])},
                     extend_stalled_to=m.get("extend_to"),
                     description="Where Post-LN and Pre-LN stop training above the stability map's lrs")


__all__ = ["ENDS_GRID", "FRONTIER_GRID", "NAME", "chosen_placements", "frontier_ends", "stability_frontier"]
