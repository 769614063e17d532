"""Study presets of the seed statements that were not yet claims (``claims/catalogue/training_seeds.py``).

Each is a slice of the stability map's base (``_map_base``: d=64, context 64, batch 16, xavier
init, no gradient clipping) with a **constant lr after warm-up**, so that the settling engine can
stage any of them (docs/studies.md, "Stages"; stages are not switched on here). Sizes per scale
are the tables below; the cpu costs are from the map's measured per-run cost (one thread: ~1.8 s
per block plus ~1.7 s for 200 steps at d=64, map_preset.STABILITY_GRID), estimated, not measured:

- ``pre-dropout``: Pre-LN at 6 blocks without warm-up at lr 6e-3, ``model.dropout`` {0, 0.1}
  (attention weights, residual branches and embeddings), 12 seeds: 24 runs x ~12.5 s = ~5
  core-minutes (12 seeds: the non-inferiority of the spike ratio has 80% power at no effect only
  from 12 a side, claims/design_seeds.py). Seed 002: "pre-norm can be combined with dropout inside the sub-layers without
  loss of stability". 6e-3 is six times the lab's default lr, where an unstable recipe would show,
  and below Pre-LN's critical lr (frontier-ends: 8 of 8 runs trained at 6e-3 and at 1.2e-2).
- ``deep-pre``: 48 and 96 blocks, 400 steps, lr 1e-3 after 50 warm-up steps, three arms: Pre-LN
  with its final norm, Pre-LN without it, and seed 002's Sandwich-Norm formula LN(x + F(LN(x)))
  (``pre_post``), 4 seeds: 24 runs; a 400-step run is ~176 s at 48 blocks and ~349 s at 96, so
  ~35 core-minutes at 48 blocks and ~70 at 96 (~105 in all, ~53 minutes on 2 workers).
- ``norm-vs-none``: Pre-LN (LayerNorm) against the same blocks with no norm at all (``none``: no
  final norm either), 6 blocks, no warm-up, 200 steps, six cells (a zip group): both at lr 1e-3
  under xavier and under GPT-2's init, and both at lr 6e-3 under GPT-2's init (a pilot on seed
  900: no norm diverged under xavier at every lr from 1e-3, and under GPT-2's init trained at 1e-3
  and 3e-3 but diverged at 6e-3 and 1e-2, where Pre-LN trained); 10 seeds: 60 runs, ~50 that
  train x ~12.5 s (a diverging run stops within a few steps) = ~11 core-minutes.
- ``attention-focus``: Post-LN against Pre-LN at the map's shallow cell (6 blocks, lr 1e-3,
  warm-up 50, where both train in every seed), 200 steps, diagnostics every 20 steps (the attention
  entropy per block); 6 seeds: 12 runs x ~13 s = ~3 core-minutes.
"""

from __future__ import annotations

from typing import Any

from normlab.study.map_preset import map_base
from normlab.study.presets import _pick
from normlab.study.spec import StudySpec

P, LR, INIT, FINAL = "model.placement", "optim.lr", "model.init", "model.final_norm"


def _slice(scale: str, n_layer: int, lr: float, warmup: int, steps: int | None = None,
           diag_every: int = 0) -> dict[str, Any]:
    """The map's base at ``n_layer`` blocks, constant ``lr`` after ``warmup`` steps; ``steps``
    (None: the map's) with the evaluation and checkpoint cadence scaled to it."""
    base = map_base(scale)
    base["model"]["n_layer"] = n_layer
    base["optim"].update({"lr": lr, "warmup_steps": warmup})
    if steps is not None:
        every = max(1, steps // 5)
        base["train"].update({"steps": steps, "eval_every": every, "checkpoint_every": steps,
                              "log_every": max(1, min(10, steps // 20))})
    if diag_every:
        base["train"]["diag_every"] = diag_every
    return base


DROPOUT: dict[str, dict[str, Any]] = {
    "smoke": {"n_layer": 2, "seeds": [0, 1]},
    "cpu": {"n_layer": 6, "seeds": list(range(12))},
    "gpu": {"n_layer": 6, "seeds": [0, 1, 2]},
}
DROPOUT_LR, DROPOUT_P = 6e-3, 0.1


def pre_dropout(scale: str = "cpu") -> StudySpec:
    """Pre-LN without warm-up at lr 6e-3, dropout {0, 0.1}: cpu 6 blocks x 12 seeds = 24 runs."""
    g = _pick(scale, DROPOUT, "pre-dropout")
    base = _slice(scale, g["n_layer"], DROPOUT_LR, 0)
    base["model"]["placement"] = "pre"
    return StudySpec(name="pre-dropout", base=base, seeds=list(g["seeds"]), axes={"model.dropout": [0.0, DROPOUT_P]},
                     description="Seed 002: does Pre-LN keep its stability with dropout inside the sub-layers?")


DEEP: dict[str, dict[str, Any]] = {
    "smoke": {"n_layer": [2, 4], "steps": 24, "seeds": [0, 1]},
    "cpu": {"n_layer": [48, 96], "steps": 400, "seeds": [0, 1, 2, 3]},
    "gpu": {"n_layer": [48, 96], "steps": 3000, "seeds": [0, 1, 2]},
}
# (placement, final norm): Pre-LN with and without its final norm, and seed 002's Sandwich-Norm formula
DEEP_ARMS: list[tuple[str, bool | None]] = [("pre", True), ("pre", False), ("pre_post", None)]


def deep_pre(scale: str = "cpu") -> StudySpec:
    """Pre-LN with and without its final norm and ``pre_post`` at 48 and 96 blocks, lr 1e-3 after 50
    warm-up steps, 400 steps at cpu: 3 arms x 2 depths x 4 seeds = 24 runs."""
    g = _pick(scale, DEEP, "deep-pre")
    warm = 50 if scale != "smoke" else 4
    base = _slice(scale, g["n_layer"][0], 1e-3, warm, steps=g["steps"])
    return StudySpec(name="deep-pre", base=base, seeds=list(g["seeds"]), axes={"model.n_layer": list(g["n_layer"])},
                     zip=[{P: [a[0] for a in DEEP_ARMS], FINAL: [a[1] for a in DEEP_ARMS]}],
                     description="Seed 002: does pre-norm train beyond 48 layers, and does an extra output norm help?")


NONE: dict[str, dict[str, Any]] = {
    "smoke": {"n_layer": 2, "seeds": [0, 1]},
    "cpu": {"n_layer": 6, "seeds": list(range(10))},
    "gpu": {"n_layer": 6, "seeds": [0, 1, 2]},
}
NONE_HIGH_LR = 6e-3  # the high-lr cell (GPT-2's init): the pilot's Pre-LN trained there, its no-norm run diverged
# (placement, init, lr) of each cell
NONE_CELLS: list[tuple[str, str, float]] = [("pre", "xavier", 1e-3), ("none", "xavier", 1e-3), ("pre", "gpt2", 1e-3),
                                            ("none", "gpt2", 1e-3), ("pre", "gpt2", NONE_HIGH_LR),
                                            ("none", "gpt2", NONE_HIGH_LR)]


def norm_vs_none(scale: str = "cpu") -> StudySpec:
    """Pre-LN against no norm at 6 blocks without warm-up: six cells x 10 seeds = 60 runs at cpu."""
    g = _pick(scale, NONE, "norm-vs-none")
    base = _slice(scale, g["n_layer"], 1e-3, 0)
    keys = (P, INIT, LR)
    return StudySpec(name="norm-vs-none", base=base, seeds=list(g["seeds"]),
                     zip=[{k: [c[i] for c in NONE_CELLS] for i, k in enumerate(keys)}],
                     description="Seed 002: does LayerNorm make training stabler, less init-dependent and allow a "
                                 "higher lr than no norm?")


FOCUS: dict[str, dict[str, Any]] = {
    "smoke": {"n_layer": 2, "seeds": [0, 1], "diag_every": 4, "warmup": 5},
    "cpu": {"n_layer": 6, "seeds": list(range(6)), "diag_every": 20, "warmup": 50},
    "gpu": {"n_layer": 6, "seeds": [0, 1, 2], "diag_every": 300, "warmup": 300},
}


def attention_focus(scale: str = "cpu") -> StudySpec:
    """Post-LN and Pre-LN at the map's shallow cell (lr 1e-3, warm-up 50) with the attention
    statistics of the in-training diagnostics: 2 x 6 seeds = 12 runs at cpu."""
    g = _pick(scale, FOCUS, "attention-focus")
    base = _slice(scale, g["n_layer"], 1e-3, g["warmup"], diag_every=g["diag_every"])
    return StudySpec(name="attention-focus", base=base, seeds=list(g["seeds"]), axes={P: ["post", "pre"]},
                     description="Seed 002: does Pre-LN's normalised q/k/v input sharpen attention against Post-LN?")


__all__ = ["DEEP", "DEEP_ARMS", "DROPOUT", "DROPOUT_LR", "DROPOUT_P", "FOCUS", "NONE", "NONE_CELLS", "NONE_HIGH_LR",
           "attention_focus", "deep_pre", "norm_vs_none", "pre_dropout"]
