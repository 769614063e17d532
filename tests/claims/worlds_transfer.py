"""Synthetic worlds of the transfer claims (``claims/catalogue/training_transfer.py``,
``training_monitors.py``): S, every part's rule supported; C, contradicted; I, inconclusive.

Critical-lr lines are separated sweeps (every seed trains up to an lr, none above) on a shared
grid: a 1.2x grid for the equivalences (8 seeds an lr: one lr bounds a separated sweep, so a
line's 95% interval is the gap it separates at, 0.079 decades) and a 1.5x grid for the Muon
lines. The monitors' worlds write diagnostics lines (sharpness; per-head attention entropy) and
validation curves (where a run leaves the plateau), 6 seeds."""

from __future__ import annotations

from typing import Any, Callable

import synthetic as S

from normlab.study.transfer_preset import (
    DEPTH,
    ENTROPY,
    LR,
    MUON,
    OPT,
    PARAM,
    SHARPNESS,
    WIDTH_MUP,
    WIDTH_SP,
    D,
    L,
    P,
    W,
)

FINE = tuple(float(f"{1e-3 * 1.2 ** k:.4g}") for k in range(12))     # 1e-3 .. 7.4e-3
COARSE = tuple(float(f"{1e-3 * 1.5 ** k:.4g}") for k in range(12))   # 1e-3 .. 8.6e-2
N = 8
STALL = S.CE.unigram + 0.01


def _run(trains: bool) -> Callable[[int], dict[str, Any]]:
    x = S.TRAINS if trains else STALL
    return lambda s: {"best": x, "curve": [(200, x), (400, x)]}


def line(study: str, params: dict[str, Any], grid: tuple[float, ...], up_to: int | None) -> list:
    """A separated line: every seed trains at grid[0..up_to], none above (None: none trains)."""
    return [(study, {**params, LR: lr}, _run(up_to is not None and k <= up_to)) for k, lr in enumerate(grid)]


def mup_width_transfer(o: str) -> list:
    """S: muP's lines at one lr, SP's falls 6 steps; C: muP's 7 steps apart, SP's rises; I: muP's
    2 steps apart (0.16 decades: the interval straddles 0.15), SP's the same."""
    mup256, mup64, sp256, sp64 = {"S": (5, 5, 2, 8), "C": (9, 2, 8, 2), "I": (7, 5, 5, 5)}[o]
    return (line(WIDTH_MUP, {PARAM: "mup", D: 256}, FINE, mup256) + line(WIDTH_MUP, {PARAM: "mup", D: 64}, FINE, mup64)
            + line(WIDTH_SP, {PARAM: "sp", D: 256}, FINE, sp256) + line(WIDTH_SP, {PARAM: "sp", D: 64}, FINE, sp64))


def completep_depth_transfer(o: str) -> list:
    """S: 18 and 6 blocks at one lr; C: 18 blocks 7 steps lower; I: 2 steps apart."""
    deep, shallow = {"S": (5, 5), "C": (1, 8), "I": (3, 5)}[o]
    return line(DEPTH, {L: 18}, FINE, deep) + line(DEPTH, {L: 6}, FINE, shallow)


def muon_placement_gap(o: str) -> list:
    """S: under Muon Pre-LN 3 steps above Post-LN, under AdamW 7 (the gap narrows by 0.7 decades);
    C: under Muon Pre-LN 5 steps below Post-LN, under AdamW 7 below (the difference of gaps is +0.35
    decades); I: every line at one lr."""
    mpre, mpost, apre, apost = {"S": (9, 6, 9, 2), "C": (3, 8, 1, 8), "I": (5, 5, 5, 5)}[o]
    return (line(MUON, {OPT: "muon", P: "pre"}, COARSE, mpre) + line(MUON, {OPT: "muon", P: "post"}, COARSE, mpost)
            + line(MUON, {OPT: "adamw", P: "pre"}, COARSE, apre) + line(MUON, {OPT: "adamw", P: "post"}, COARSE, apost))


def sharp_run(level: float, sigma: float) -> Callable[[int], dict[str, Any]]:
    """Diagnostics whose sharpness (and preconditioned one) is 10^(level + jitter) over steps 10-50
    and 10^6 after (outside the window: a part that read it would say so)."""
    def run(s: int) -> dict[str, Any]:
        v = 10 ** (level + S.jit(s, sigma))
        diag = [{"step": st, "sharpness": v if st <= 50 else 1e6, "precond_sharpness": 3 * v if st <= 50 else 1e6}
                for st in range(10, 201, 10)]
        return {"best": S.TRAINS, "diag": diag}
    return run


def warmup_sharpness(o: str) -> list:
    """S: warm-up 0.5 decade lower in both placements; C: 0.5 higher; I: equal, +- 0.5 per seed."""
    warm, cold, sig = {"S": (1.0, 1.5, 0.02), "C": (1.5, 1.0, 0.02), "I": (1.0, 1.0, 0.5)}[o]
    return [(SHARPNESS, {P: p, W: w}, sharp_run(warm if w else cold, sig)) for p in ("post", "pre") for w in (0, 50)]


def entropy_run(stalled_at: float, trained_at: float, sigma: float, left: int = 100) -> Callable[[int], dict[str, Any]]:
    """Seeds 0-2 stall, 3-5 train (leaving the plateau at ``left``); the smallest head entropy over
    steps 10-50 at ``stalled_at`` or ``trained_at`` plus the seed's jitter, 3 nats elsewhere."""
    def run(s: int) -> dict[str, Any]:
        stalls = s < 3
        e = (stalled_at if stalls else trained_at) + S.jit(s, sigma)
        diag = [{"step": st, "attn_head_entropy": [e if st <= 50 else 0.1, 3.0, 3.0, 3.0]} for st in range(10, 201, 10)]
        curve = [(100, STALL), (200, STALL)] if stalls else [(left - 20, STALL), (left, S.TRAINS), (200, S.TRAINS)]
        return {"best": STALL if stalls else S.TRAINS, "curve": curve, "diag": diag}
    return run


def entropy_collapse_stall(o: str) -> list:
    """S: the stalled seeds' entropy 1 nat lower; C: 1 nat higher; I: equal, +- 1 nat per seed."""
    stalled, trained, sig = {"S": (1.5, 2.5, 0.02), "C": (2.5, 1.5, 0.02), "I": (2.0, 2.0, 1.0)}[o]
    return [(ENTROPY, {}, entropy_run(stalled, trained, sig))]


WORLDS = {"mup-width-transfer": mup_width_transfer, "completep-depth-transfer": completep_depth_transfer,
          "muon-placement-gap": muon_placement_gap, "warmup-sharpness": warmup_sharpness,
          "entropy-collapse-stall": entropy_collapse_stall}
WORLD_SEEDS = {"mup-width-transfer": {WIDTH_SP: N, WIDTH_MUP: N}, "completep-depth-transfer": {DEPTH: N},
               "muon-placement-gap": {MUON: N}, "warmup-sharpness": {SHARPNESS: 6},
               "entropy-collapse-stall": {ENTROPY: 6}}
