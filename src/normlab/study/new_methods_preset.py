"""The study preset ``new-methods``: the placements and norms added in 2021-2026 (docs/placements.md,
"The placements and norms of 2021-2026") side by side with Post-LN and Pre-LN, in the one cell
of the stability map where the two classic placements part.

The cell: the map's base (``_map_base``: d=64, context 64, batch 16, xavier init, constant lr
after linear warm-up, no gradient clipping) at its deep depth, lr 1e-3 and its non-zero warm-up.
In the published map (docs/evidence/maps/stability-map/) Post-LN stalls on the unigram plateau
there at 200 steps while Pre-LN trains, so a method that claims Pre-LN's stability shows it by
training, and one that claims a better loss than Pre-LN has a Pre-LN that trained to compare with.

Arms (a zip group: the placements with the default norm, and Pre-LN with each new norm):

- post, pre: the map's two controls (their trials differ from the map's only by the diagnostics);
- hybridnorm, hybridnorm_star (Zhuo et al. 2025), normformer (Shleifer et al. 2021), subln
  (Wang et al. 2022, Magneto);
- sandwich with ``embed_norm`` on: Peri-LN (Kim et al. 2025), the embedding normalised too;
- pre with ``model.norm = derf`` (Chen et al. 2025, arXiv 2512.10938) and with ``seednorm``
  (Cai et al. 2025, arXiv 2510.22777);
- keel (Chen & Wei 2026, arXiv 2601.19895) with RMSNorm, the norm its sources use.

In-training diagnostics every ``diag_every`` steps: the per-block gradient norms NormFormer's
claim reads early in training and the per-layer hidden-state variance (``act_var``) Peri-LN's
claim reads at the end (``claims/catalogue/training_new_methods.py``).

Cost at cpu: 10 arms x 5 seeds = 50 runs of 18 blocks x 200 steps. An 18-block 200-step run
takes ~34-37 s on one core (map_preset.STABILITY_GRID: ~1.8 s per block plus ~1.7 s; the extra norms and the
10 diagnostic lines add a few per cent), so ~31 core-minutes: ~16 minutes on 2 workers.
"""

from __future__ import annotations

from typing import Any

from normlab.study.map_preset import map_base
from normlab.study.presets import _pick
from normlab.study.spec import StudySpec

NAME = "new-methods"
P, NORM = "model.placement", "model.norm"
PERI_LN: dict[str, Any] = {"name": "sandwich", "embed_norm": True}  # Peri-LN: sandwich + the embedding's norm

# (placement, norm) of each arm, in the order the claims and the tables show them.
ARMS: list[tuple[str | dict[str, Any], str]] = [
    ("post", "layernorm"), ("pre", "layernorm"),
    ("hybridnorm", "layernorm"), ("hybridnorm_star", "layernorm"), ("normformer", "layernorm"),
    ("subln", "layernorm"), (PERI_LN, "layernorm"),
    ("pre", "derf"), ("pre", "seednorm"),
    # Keel with RMSNorm, its sources' norm (docs/placements.md, "Keel"); alpha = 2L, its default
    ("keel", "rmsnorm"),
]

# Per scale: the map's deep depth and non-zero warm-up (map_preset.STABILITY_GRID), seeds, and how
# often the diagnostics run. cpu: every 20 of 200 steps, so that "early in training" (the first
# half) has 5 lines to average and the last line is the run's end. smoke: the pipeline only.
NEW_METHODS: dict[str, dict[str, Any]] = {
    "smoke": {"n_layer": 2, "warmup": 5, "seeds": [0, 1], "diag_every": 3},
    "cpu": {"n_layer": 18, "warmup": 50, "seeds": [0, 1, 2, 3, 4], "diag_every": 20},
    # gpu: the gpu map's shallower deep depth and its warm-up; not run yet
    "gpu": {"n_layer": 24, "warmup": 300, "seeds": [0, 1, 2], "diag_every": 300},
}


def new_methods(scale: str = "cpu") -> StudySpec:
    """Post-LN, Pre-LN and the 2021-2026 methods at the stability map's deep cell (lr 1e-3, warm-up
    W, d=64, xavier, unclipped), with in-training diagnostics: cpu 10 arms x 5 seeds = 50 runs of
    18 blocks x 200 steps, ~16 minutes on 2 workers. smoke: 2 blocks, 12 steps, seeds 0 and 1."""
    g = _pick(scale, NEW_METHODS, NAME)
    base = map_base(scale)
    base["model"]["n_layer"] = g["n_layer"]
    base["optim"].update({"lr": 1e-3, "warmup_steps": g["warmup"]})
    base["train"]["diag_every"] = g["diag_every"]
    return StudySpec(name=NAME, base=base, seeds=list(g["seeds"]),
                     zip=[{P: [a[0] for a in ARMS], NORM: [a[1] for a in ARMS]}],
                     description="The 2021-2026 placements and norms beside Post-LN and Pre-LN at the stability "
                                 "map's deep cell, where Post-LN stalls and Pre-LN trains")


__all__ = ["ARMS", "NAME", "NEW_METHODS", "PERI_LN", "new_methods"]
