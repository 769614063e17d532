"""Measurements of the quick claims: one probe grid at initialisation (the lab's own
``normlab.diagnostics.probe``), per-seed values taken from it, and the extra measurements of
:mod:`normlab.diagnostics.measurements` (identity coefficients, one-step output change, exact
checks). Every quick quantity is a value per seed, so that each effect has an interval. The
measuring is diagnostics' (the one capture path); claims/ says what to measure and decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from normlab.diagnostics.probe import ProbeConfig, load_tokens, run_probe

PLACEMENTS = ["post", "pre", "deepnorm"]
DEPTHS = [2, 4, 8, 16, 32]
REF_DEPTH = 16  # the depth of Xiong et al.'s Fig. 3-style per-layer profiles in the claims


@dataclass(frozen=True)
class Needs:
    """What a quick claim's ``measure`` reads: probe cells and extra measurements.

    ``probe`` maps a placement to the depths it is read at: ``"all"`` (every probed depth),
    ``"ref"`` (:meth:`QuickData.ref_depth`) or ``"max"`` (the largest); ``extra`` names keys of
    :data:`normlab.diagnostics.measurements.EXTRAS` (``"one_step:admin"``, ``"rms"``, ...).
    """

    probe: dict[str, str] = field(default_factory=dict)
    extra: tuple[str, ...] = ()

    def fixed_seeds(self) -> int | None:
        """The seeds an extra measurement reads whatever the probe's count (the exact checks), if any."""
        from normlab.diagnostics.measurements import FIXED_SEEDS

        return min((FIXED_SEEDS[e] for e in self.extra if e in FIXED_SEEDS), default=None)

    def cells(self, depths: list[int], ref: int) -> list[tuple[str, int]]:
        pick = {"all": list(depths), "ref": [ref], "max": [max(depths)]}
        return [(p, L) for p, sel in self.probe.items() for L in pick[sel]]


# The context figures of the page (figures.py) read every placement at every depth.
FIGURE_NEEDS = Needs({p: "all" for p in PLACEMENTS})


@dataclass
class QuickData:
    """Everything the quick claims decide on."""

    rows: list[dict[str, Any]]
    seeds: int
    probe: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)

    def values(self, placement: str, L: int, metric: str, sublayer: str | None = None,
               param: str | None = None) -> np.ndarray:
        """(seeds, layers) matrix of one metric for one model size; columns ordered by layer."""
        sel = [r for r in self.rows if r["placement"] == placement and int(r["n_layer"]) == L
               and r["metric"] == metric and (sublayer is None or r["sublayer"] == sublayer)
               and (param is None or r["param"] == param)]
        layers = sorted({int(r["layer"]) for r in sel})
        m = np.full((self.seeds, len(layers)), np.nan)
        for r in sel:
            m[int(r["seed"]) - self.first_seed, layers.index(int(r["layer"]))] = float(r["value"])
        return m

    def layers(self, placement: str, L: int, metric: str, sublayer: str | None = None,
               param: str | None = None) -> list[int]:
        return sorted({int(r["layer"]) for r in self.rows if r["placement"] == placement
                       and int(r["n_layer"]) == L and r["metric"] == metric
                       and (sublayer is None or r["sublayer"] == sublayer) and (param is None or r["param"] == param)})

    @property
    def first_seed(self) -> int:
        return int(self.probe.get("first_seed", 0))

    @property
    def seed_list(self) -> list[int]:
        """The seeds measured: first_seed, first_seed + 1, ... (a registration names them)."""
        return list(range(self.first_seed, self.first_seed + self.seeds))

    @property
    def depths(self) -> list[int]:
        return list(self.probe["depths"])

    def ref_depth(self) -> int:
        """REF_DEPTH if probed, else the largest depth below it (else the largest)."""
        ds = [L for L in self.depths if L <= REF_DEPTH]
        return max(ds) if ds else max(self.depths)

    def cells(self, placement: str, Ls: list[int] | None = None) -> list[str]:
        """Probe cells an effect used, as 'placement/L<depth>/seed<s>' (claims.json 'trials')."""
        return [f"{placement}/L{L}/seed{s}" for L in (Ls or self.depths) for s in self.seed_list]


def empty(seeds: int = 5, depths: list[int] | None = None, d_model: int = 128, first_seed: int = 0) -> QuickData:
    """QuickData with the probe's settings and no cell measured yet (see :func:`probe_cell`)."""
    depths = depths or DEPTHS
    data = "tinyshakespeare"
    try:
        load_tokens(data)
    except Exception:  # no corpus here: the statistics at init hardly depend on the text
        data = "random"
    probe = {"placements": PLACEMENTS, "depths": depths, "d_model": d_model, "d_ff": d_model, "n_head": 4,
             "init": "xavier", "seeds": seeds, "batch": "8 x 64 tokens", "data": data, "n_proj": 1}
    if first_seed:  # only when set: the probe settings (and so the cache keys) of seeds from 0 stay as they were
        probe["first_seed"] = first_seed
    return QuickData([], seeds, probe)


def probe_cell(q: QuickData, placement: str, L: int, progress: Any = None) -> list[dict[str, Any]]:
    """The probe rows of one cell (placement, depth L) over q's seeds (xavier, Xiong's
    setting; d_ff = d as the reference measurement); ``progress()`` after each model."""
    import torch

    p = q.probe
    cfg = ProbeConfig(placements=[placement], depths=[L], d_model=p["d_model"], n_head=p["n_head"], d_ff=p["d_ff"],
                      init=p["init"], seeds=q.seeds, first_seed=q.first_seed, batch_size=8, context=64, data=p["data"], n_proj=p["n_proj"])
    with torch.random.fork_rng():
        return run_probe(cfg, progress=(lambda *_: progress()) if progress else None)


def measure(seeds: int = 5, depths: list[int] | None = None, d_model: int = 128) -> QuickData:
    """The whole probe grid: post, pre and deepnorm at init over depths x seeds."""
    q = empty(seeds, depths, d_model)
    for p, L in FIGURE_NEEDS.cells(q.depths, q.ref_depth()):
        q.rows += probe_cell(q, p, L)
    return q


def last_w2(q: QuickData, p: str) -> np.ndarray:
    """(seeds, depths) ||dLoss/dW2|| of the last block."""
    return np.stack([q.values(p, L, "grad_norm", "ffn", "W_2")[:, -1] for L in q.depths], 1)


def per_seed(fn: Any, m: np.ndarray) -> list[float]:
    """fn applied to each seed's row of m (rows with NaN dropped)."""
    return [float(fn(r)) for r in m if np.all(np.isfinite(r))]


def log_spread(r: np.ndarray) -> float:
    """log(max / min) of a positive profile: how far from flat it is."""
    return float(np.log(np.max(r) / np.min(r)))


def factor_per_layer(gain: np.ndarray) -> float:
    """Geometric factor per layer of a gain profile indexed by l = 0..L-1 (x_l -> x_L):
    exp(slope of log gain against the number of layers between x_l and x_L)."""
    v = np.asarray(gain, float)[::-1]
    return float(np.exp(np.polyfit(np.arange(v.size), np.log(v), 1)[0]))
