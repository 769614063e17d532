"""The stability map's presets: ``stability-map`` (the outcome of training over lr x depth x
warm-up per placement) and ``recipe-variants`` (map cells under another init or without the
final norm, each with its map cell as control), and ``map_base``, the base config every study
that reads the map's cells shares (the frontier, bracket, long, new-methods, seed, demo,
transfer and width-map presets), so that a map cell is the control of each of theirs."""

from __future__ import annotations

from typing import Any

from normlab.study.presets import _base, _pick, _placements
from normlab.study.spec import StudySpec

# The stability-map grid per scale, in one place so that it is easy to resize. Cost at cpu,
# measured on one thread (OMP_NUM_THREADS=1, load 0.1-1.5 on 2 shared cores): a 200-step
# run takes 11-14 s at depth 6 and 43-46 s at depth 24 (post and pre alike; ~1.8 s per block
# plus ~1.7 s), so at depths 6 and 18 the 360 runs of the cpu grid are ~2.3 core-hours (~70 min
# with 2 workers) and the whole claims run ~2 h: run a slice with a smaller table or a TOML
# study when that is too much.
STABILITY_GRID: dict[str, dict[str, Any]] = {
    # smoke: every placement and lr the claims read (so `claims --scale smoke` exercises every
    # part), in a few steps; the stability page's own test picks cells that train and stall
    "smoke": {"placements": ["post", "pre", "deepnorm", "admin", "sandwich", "pre_post"], "lr": [5e-4, 1e-3, 3e-3],
              "n_layer": [2, 4], "warmup": [0, 5], "seeds": [0, 1], "steps": 12},
    "cpu": {"placements": ["post", "pre", "deepnorm", "admin", "sandwich", "pre_post"], "lr": [5e-4, 1e-3, 3e-3],
            # 18 blocks: Liu et al.'s (Admin's) deep setting, inside seed 002's "12-24 layers";
            # 24 would cost 16 more minutes of the run's 150 (docs/studies.md, sizing).
            # 4 seeds and stalled runs resumed to 400: the confirmatory run's size (docs/studies.md,
            # "Critical learning rates"): a fifth seed costs ~16 minutes, a horizon of 1000 ~80
            "n_layer": [6, 18], "warmup": [0, 50], "seeds": [0, 1, 2, 3], "steps": 200, "extend_to": 400},
    "gpu": {"placements": ["post", "pre", "deepnorm", "admin", "sandwich", "pre_post"],
            "lr": [3e-4, 1e-3, 3e-3, 1e-2], "n_layer": [6, 24, 48], "warmup": [0, 300], "seeds": [0, 1, 2],
            "steps": 3000},
}


def map_base(scale: str) -> dict[str, Any]:
    """The stability map's base config (lr 1e-3); ``recipe-variants`` shares it, so that a map
    cell is the control of each of its variants."""
    g = _pick(scale, STABILITY_GRID, "stability-map")
    base = _base(scale, g["steps"], lr=1e-3, schedule="constant")
    base["model"]["init"] = "xavier"
    base["optim"].update({"grad_clip": 0.0, "min_lr": 0.0})  # min_lr: unused by "constant", <= every lr
    if scale == "cpu":
        base["model"]["d_model"] = 64
    if scale == "smoke":  # checkpoints were most of a 12-step run's time; keep only the last
        base["train"]["checkpoint_every"] = g["steps"]
    return base


def recipe_variants(scale: str = "cpu") -> StudySpec:
    """Variants of stability-map cells at lr 1e-3 that the map does not cross, each with the map
    cell of the same config otherwise as its control (same base, same seeds): GPT-2's init for
    Post-LN (warm-up 0 and W) and Pre-LN (warm-up 0) at the shallow depth (seed 002's init
    claim, and whether Xiong et al.'s warm-up verdict depends on the init), and Pre-LN without
    its final norm at the deep depth, warm-up W (seed 000). cpu: 4 variants x 4 seeds."""
    g = _pick(scale, STABILITY_GRID, "recipe-variants")
    lo, hi, w = min(g["n_layer"]), max(g["n_layer"]), max(g["warmup"])
    rows = [("post", "gpt2", None, lo, 0), ("post", "gpt2", None, lo, w), ("pre", "gpt2", None, lo, 0),
            ("pre", "xavier", False, hi, w)]
    keys = ("model.placement", "model.init", "model.final_norm", "model.n_layer", "optim.warmup_steps")
    return StudySpec(name="recipe-variants", base=map_base(scale), seeds=list(g["seeds"]),
                     zip=[{k: [r[i] for r in rows] for i, k in enumerate(keys)}],
                     description="Stability-map cells under GPT-2's init, and Pre-LN without its final norm")


def stability_map(scale: str = "cpu") -> StudySpec:
    """Stability maps: the outcome of training (trains, stalls at the unigram loss, diverges;
    ``normlab.study.outcome``) over learning rate x depth x warm-up, per placement, over seeds.
    Constant lr after linear warm-up, no gradient clipping (a clip would mask divergence),
    xavier init (the papers' setting). cpu: d=64, context 64, batch 16, 200 steps,
    post/pre/deepnorm/admin/sandwich/pre_post x lr {5e-4, 1e-3, 3e-3} x L {6, 18} x warm-up
    {0, 50} x 4 seeds: 288 runs, stalled ones resumed to step 400. The grid is ``STABILITY_GRID``."""
    g = _pick(scale, STABILITY_GRID, "stability-map")
    return StudySpec(name="stability-map", base=map_base(scale), seeds=list(g["seeds"]),
                     axes={"model.placement": _placements(g["placements"]), "optim.lr": list(g["lr"]),
                           "model.n_layer": list(g["n_layer"]), "optim.warmup_steps": list(g["warmup"])},
                     extend_stalled_to=g.get("extend_to"),
                     description="Where in lr x depth x warm-up does each placement train, stall or diverge?")


__all__ = ["STABILITY_GRID", "map_base", "recipe_variants", "stability_map"]
