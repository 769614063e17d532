"""A study's critical learning rates: per placement x depth x warm-up, where half the seeds train
by horizon H (``normlab.stats.frontier`` fits them), and the contrasts the claims and the map
page read: each factor's effect as a difference of log10 critical lrs against its control (the
shallowest depth, no warm-up).

This is where a study's frontier is summarised, before any page draws it: the stability page
reads :func:`frontiers` and :func:`contrasts` as it reads ``outcome.map_cells``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from normlab.data.unigram import DataCE
from normlab.stats.frontier import Frontier, LogRatio, critical_lr, log_ratio
from normlab.study.horizons import trains_by
from normlab.study.outcome import STALL_MARGIN
from normlab.study.store import TrialRecord


@dataclass(frozen=True)
class Line:
    """One placement x depth x warm-up over the lr axis, at one horizon."""

    placement: str
    depth: int | None
    warmup: int | None
    horizon: int
    frontier: Frontier

    def record(self) -> dict[str, Any]:
        return {"placement": self.placement, "depth": self.depth, "warmup": self.warmup, "horizon": self.horizon,
                "critical_lr": self.frontier.as_dict(), "text": self.frontier.text()}


@dataclass(frozen=True)
class Contrast:
    """log10(critical lr of ``arm``) - log10(critical lr of ``control``), one factor changed."""

    placement: str
    factor: str        # "warm-up" or "depth"
    arm: str           # e.g. "warm-up 50 at L=6"
    control: str       # e.g. "warm-up 0 at L=6"
    horizon: int
    effect: LogRatio

    def record(self) -> dict[str, Any]:
        return {"placement": self.placement, "factor": self.factor, "arm": self.arm, "control": self.control,
                "horizon": self.horizon, "log10_ratio": self.effect.as_dict(), "text": self.effect.text()}


def frontiers(trials: Iterable[TrialRecord], ce: DataCE, horizon: int, margin: float = STALL_MARGIN) -> list[Line]:
    """The critical lr of every placement x depth x warm-up of the trials, at ``horizon``; a
    line needs at least two lrs with an outcome."""
    counts = trains_by(trials, ce, horizon, margin)
    groups: dict[tuple[str, Any, Any], list[tuple[float, int, int]]] = {}
    for k, (t, n) in counts.items():
        if k.lr is not None and n > 0:
            groups.setdefault((k.placement, k.depth, k.warmup), []).append((k.lr, t, n))
    out = []
    for (pl, depth, wu), pts in groups.items():
        if len(pts) < 2:
            continue
        pts.sort()
        out.append(Line(pl, depth, wu, horizon, critical_lr([p[0] for p in pts], [p[1] for p in pts],
                                                            [p[2] for p in pts])))
    return sorted(out, key=lambda x: (x.placement, x.depth or 0, x.warmup or 0))


def contrasts(lines: list[Line]) -> list[Contrast]:
    """Each warm-up against no warm-up at the same depth, and each depth against the shallowest
    at the same warm-up, per placement (lines of one horizon)."""
    by = {(x.placement, x.depth, x.warmup): x for x in lines}
    out: list[Contrast] = []
    for (pl, depth, wu), line in by.items():
        zero = by.get((pl, depth, 0))
        if wu and zero is not None:
            out.append(Contrast(pl, "warm-up", f"warm-up {wu} at L={depth}", f"warm-up 0 at L={depth}",
                                line.horizon, log_ratio(line.frontier, zero.frontier)))
        depths = sorted(d for (p, d, w) in by if p == pl and w == wu and d is not None)
        if depths and depth is not None and depth != depths[0]:
            low = by[(pl, depths[0], wu)]
            out.append(Contrast(pl, "depth", f"L={depth} at warm-up {wu}", f"L={depths[0]} at warm-up {wu}",
                                line.horizon, log_ratio(line.frontier, low.frontier)))
    return sorted(out, key=lambda c: (c.placement, c.factor, c.arm))


__all__ = ["Contrast", "Line", "contrasts", "frontiers"]
