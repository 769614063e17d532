"""The study presets of the transfer claims (``claims/catalogue/training_transfer.py``,
``training_monitors.py``): does a critical lr move with width under muP and SP, with depth under
CompleteP, with the optimiser; and do warm-up's sharpness and Post-LN's attention entropy behave
as their papers say.

Every study is the stability map's base (``_map_base``: d=64, 4 heads, context 64, batch 16,
xavier init, constant lr after linear warm-up, no clipping, 200 steps at cpu) with one change
each; the claims read them in stages (200, 400, 1000 steps, resumed). Each line of a critical-lr
study has its own lrs around the boundary a pilot on seen seeds found
(``claims/catalogue/transfer_design.py`` states the boundaries, docs/evidence/exploratory/pilots
the runs):

* ``transfer-width-sp``: Pre-LN, 6 blocks, no warm-up, SP at d=64 and d=256: a fall (the pilot:
  0.43 decades), five lrs 1.5x apart a line, 6 seeds (4 cannot bound the difference).
* ``transfer-width-mup``: the same under muP (base width 64): an equivalence within 0.15 decades,
  which 1.5x steps cannot show (a separated sweep's interval is a whole 0.18-decade step), so both
  lines share one grid of seven lrs 1.2x apart around the middle of their pilot boundaries, 8
  seeds (one lr of 8 seeds bounds a separated sweep; ``claims/design_transfer.py``).
* ``transfer-depth``: Post-LN under CompleteP (base width 64, base depth 6), warm-up 50, at 6 and
  18 blocks: an equivalence too, the same kind of grid, 8 seeds.
* ``transfer-muon``: Post-LN and Pre-LN at 6 blocks, no warm-up, under AdamW and under Muon
  (``optim.name = "muon"`` with Moonshot's ``match_rms_adamw`` scale and ``muon_lr = lr``, so one
  lr drives every group and AdamW's decay 0.1 carries over); five lrs 1.5x apart, 6 seeds.
* ``transfer-sharpness``: Post-LN and Pre-LN at 6 blocks, lr 1e-3 (both train there), warm-up 0
  and 50; diagnostics and the sharpness (20 power iterations) every 10 steps, the only study that
  pays for them (a call costs about 5 s, some 100 training steps), so its runs are 100 steps
  long (stages 100, 200), not 200.
* ``transfer-entropy``: Post-LN at 6 blocks, no warm-up, at lr 2.25e-3, on its boundary (one of
  two pilot seeds stalls there); diagnostics (per-head attention entropy) every 10 steps,
  validation every 20 so that the step a run leaves the plateau is known to 20 steps; 16 seeds.

smoke: tiny models, the pipeline only. gpu: the cpu lines on the gpu map's base (no pilot has
located them there: run one before registering).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

from normlab.study.map_preset import STABILITY_GRID, map_base
from normlab.study.presets import _pick
from normlab.study.spec import StudySpec

WIDTH_SP, WIDTH_MUP, DEPTH, MUON = "transfer-width-sp", "transfer-width-mup", "transfer-depth", "transfer-muon"
SHARPNESS, ENTROPY = "transfer-sharpness", "transfer-entropy"
P, LR, L, W = "model.placement", "optim.lr", "model.n_layer", "optim.warmup_steps"
D, PARAM, OPT = "model.d_model", "model.param", "optim.name"


def around(boundary: float, factor: float, n: int) -> list[float]:
    """n lrs a factor apart around ``boundary``, to 4 significant digits: n // 2 of them below it,
    the rest above, the nearest half a step away on either side."""
    return [float(f"{boundary * factor ** (i - n // 2 + 0.5):.4g}") for i in range(n)]


SMOKE = [1e-5, 1e-4]  # smoke lines: two lrs (a frontier to fit; 12 steps train neither: censored, the pipeline only)
# The pilot's boundaries each line is placed around (claims/catalogue/transfer_design.py: PILOT).
WIDTHS = {"smoke": (32, 64), "cpu": (64, 256), "gpu": (384, 1536)}  # (base width, 4x)
WIDTH_SP_GRID: dict[str, dict[str, Any]] = {
    "smoke": {"lines": {("sp", w): SMOKE for w in WIDTHS["smoke"]}, "seeds": [0, 1]},
    "cpu": {"lines": {("sp", 64): around(0.19, 1.5, 5), ("sp", 256): around(0.0707, 1.5, 5)},
            "seeds": [0, 1, 2, 3, 4, 5]},
}
WIDTH_MUP_GRID: dict[str, dict[str, Any]] = {
    "smoke": {"lines": {("mup", w): SMOKE for w in WIDTHS["smoke"]}, "seeds": [0, 1]},
    # both lines on one grid around the middle of their pilot boundaries (0.215 and 0.176): 7 lrs 1.2x, 8 seeds
    "cpu": {"lines": {("mup", 64): around(0.1945, 1.2, 7), ("mup", 256): around(0.1945, 1.2, 7)},
            "seeds": list(range(8))},
}
DEPTH_GRID: dict[str, dict[str, Any]] = {
    "smoke": {"lines": {2: SMOKE, 4: SMOKE}, "seeds": [0, 1]},
    # both lines on one grid around the middle of their pilot boundaries (4.1e-3 and 3.1e-3), so that
    # either truth of an equivalence lies inside both: 7 lrs 1.2x apart, 8 seeds
    "cpu": {"lines": {6: around(3.6e-3, 1.2, 7), 18: around(3.6e-3, 1.2, 7)}, "seeds": list(range(8))},
}
MUON_GRID: dict[str, dict[str, Any]] = {
    "smoke": {"lines": {(o, p): SMOKE for o in ("adamw", "muon") for p in ("post", "pre")}, "seeds": [0, 1]},
    "cpu": {"lines": {("adamw", "post"): around(2.2e-3, 1.5, 5), ("adamw", "pre"): around(0.19, 1.5, 5),
                      ("muon", "post"): around(2.09e-2, 1.5, 5), ("muon", "pre"): around(0.238, 1.5, 5)},
            "seeds": [0, 1, 2, 3, 4, 5]},
}
# one cell each: (lr, seeds, diagnostics every, sharpness every (0: off), validation every, steps) per
# scale. A sharpness call costs about 6 s at cpu (20 power iterations, ~120 training steps), so the
# sharpness study's first horizon is 100 steps (stages 100, 200), not the map's 200.
SHARPNESS_CELL = {"smoke": (1e-2, [0, 1], 3, 3, 6, 12), "cpu": (1e-3, [0, 1, 2, 3, 4, 5], 10, 10, 20, 100),
                  "gpu": (1e-3, [0, 1, 2], 50, 50, 250, 3000)}
ENTROPY_CELL = {"smoke": (1e-2, [0, 1, 2], 3, 0, 6, 12), "cpu": (2.25e-3, list(range(16)), 10, 0, 20, 200),
                "gpu": (2.25e-3, [0, 1, 2], 50, 0, 250, 3000)}
WIDTH_SP_GRID["gpu"] = {"lines": {("sp", g): WIDTH_SP_GRID["cpu"]["lines"][("sp", c)]
                                  for c, g in zip(WIDTHS["cpu"], WIDTHS["gpu"])}, "seeds": [0, 1, 2]}
WIDTH_MUP_GRID["gpu"] = {"lines": {("mup", g): WIDTH_MUP_GRID["cpu"]["lines"][("mup", c)]
                                   for c, g in zip(WIDTHS["cpu"], WIDTHS["gpu"])}, "seeds": [0, 1, 2]}
for _grid in (DEPTH_GRID, MUON_GRID):
    _grid["gpu"] = {"lines": dict(_grid["cpu"]["lines"]), "seeds": [0, 1, 2]}


def _base(scale: str, name: str, n_layer: int = 6, warmup: int = 0) -> dict[str, Any]:
    base = copy.deepcopy(map_base(scale))
    base["train"]["steps"] = _pick(scale, STABILITY_GRID, name)["steps"]
    base["model"]["n_layer"] = n_layer if scale != "smoke" else min(n_layer, 2)
    base["optim"]["warmup_steps"] = warmup if scale != "smoke" else min(warmup, 5)
    return base


def _lines(name: str, scale: str, grid: dict[str, dict[str, Any]], keys: tuple[str, ...],
           point: Callable[[Any, float], tuple[Any, ...]], base: dict[str, Any], description: str) -> StudySpec:
    """A study of lines (one zip group: every line's lrs, each with every seed)."""
    g = _pick(scale, grid, name)
    points = [point(key, lr) for key, lrs in g["lines"].items() for lr in lrs]
    return StudySpec(name=name, base=base, seeds=list(g["seeds"]),
                     zip=[{k: [pt[i] for pt in points] for i, k in enumerate(keys)}], description=description)


def _width(name: str, scale: str, grid: dict[str, dict[str, Any]], label: str) -> StudySpec:
    narrow, wide = _pick(scale, WIDTHS, name)
    base = _base(scale, name)
    base["model"].update(placement="pre", base_width=narrow)
    return _lines(name, scale, grid, (PARAM, D, LR), lambda k, lr: (*k, lr), base,
                  f"Pre-LN's critical lr at widths {narrow} and {wide} under {label}")


def transfer_width_sp(scale: str = "cpu") -> StudySpec:
    """Pre-LN, 6 blocks, no warm-up, SP at widths 64 and 256: cpu 2 lines x 5 lrs x 6 seeds = 60 runs."""
    return _width(WIDTH_SP, scale, WIDTH_SP_GRID, "SP")


def transfer_width_mup(scale: str = "cpu") -> StudySpec:
    """Pre-LN, 6 blocks, no warm-up, muP (base width 64) at widths 64 and 256: cpu 2 x 7 x 8 = 112 runs."""
    return _width(WIDTH_MUP, scale, WIDTH_MUP_GRID, "muP")


def transfer_depth(scale: str = "cpu") -> StudySpec:
    """Post-LN under CompleteP (base width 64, base depth 6), warm-up 50, at 6 and 18 blocks:
    cpu 2 x 7 x 8 = 112 runs."""
    base = _base(scale, DEPTH, warmup=50)
    narrow = WIDTHS.get(scale, WIDTHS["cpu"])[0]
    base["model"].update(placement="post", param="completep", base_width=narrow,
                         base_depth=6 if scale != "smoke" else 2)
    return _lines(DEPTH, scale, DEPTH_GRID, (L, LR), lambda k, lr: (k, lr), base,
                  "Post-LN's critical lr at 6 and 18 blocks under CompleteP")


def transfer_muon(scale: str = "cpu") -> StudySpec:
    """Post-LN and Pre-LN at 6 blocks, no warm-up, AdamW and Muon (match_rms_adamw, muon_lr = lr):
    cpu 4 lines x 5 lrs x 6 seeds = 120 runs."""
    base = _base(scale, MUON)

    def point(key: tuple[str, str], lr: float) -> tuple[Any, ...]:
        muon = key[0] == "muon"  # AdamW's points leave Muon's options at their defaults (not written)
        extra = (lr, "match_rms_adamw", 0.1) if muon else (0.02, "original", 0.01)
        return (key[0], key[1], lr, *extra)

    keys = (OPT, P, LR, "optim.muon_lr", "optim.muon_adjust_lr", "optim.muon_weight_decay")
    return _lines(MUON, scale, MUON_GRID, keys, point, base,
                  "Post-LN's and Pre-LN's critical lrs at 6 blocks under AdamW and Muon")


def _cell(name: str, scale: str, table: dict[str, tuple[Any, ...]], placement: str | None) -> StudySpec:
    lr, seeds, diag, sharp, every, steps = _pick(scale, table, name)
    base = _base(scale, name)
    base["optim"]["lr"] = lr
    base["train"].update(diag_every=diag, eval_every=every, steps=steps)
    if sharp:
        base["train"]["sharpness_every"] = sharp
    axes: dict[str, list[Any]] = {}
    if placement is None:  # the sharpness: both placements, warm-up 0 against the map's 50
        axes = {P: ["post", "pre"], W: [0, 50 if scale != "smoke" else 5]}
    else:
        base["model"]["placement"] = placement
    return StudySpec(name=name, base=base, seeds=list(seeds), axes=axes,
                     description="Early sharpness with and without warm-up" if sharp else
                                 "Per-head attention entropy where Post-LN trains or stalls")


def transfer_sharpness(scale: str = "cpu") -> StudySpec:
    """Post-LN and Pre-LN at 6 blocks, lr 1e-3, warm-up 0 and 50, sharpness every 10 steps, 100 steps: cpu 4 cells x
    6 seeds."""
    return _cell(SHARPNESS, scale, SHARPNESS_CELL, None)


def transfer_entropy(scale: str = "cpu") -> StudySpec:
    """Post-LN at 6 blocks, no warm-up, one lr on its boundary, diagnostics every 10 steps: cpu 16 seeds."""
    return _cell(ENTROPY, scale, ENTROPY_CELL, "post")


__all__ = ["DEPTH", "DEPTH_GRID", "ENTROPY", "ENTROPY_CELL", "MUON", "MUON_GRID", "SHARPNESS", "SHARPNESS_CELL",
           "WIDTHS", "WIDTH_MUP", "WIDTH_MUP_GRID", "WIDTH_SP", "WIDTH_SP_GRID", "around", "transfer_depth",
           "transfer_entropy", "transfer_muon", "transfer_sharpness", "transfer_width_mup", "transfer_width_sp"]
