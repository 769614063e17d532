"""A study's critical learning rates: per placement x depth x warm-up (and width and
parametrisation, where the study has them as axes), where half the seeds train by horizon H
(``normlab.stats.frontier`` fits them), and the contrasts the claims and the map page read: each
factor's effect as a difference of log10 critical lrs against its control (the shallowest depth,
no warm-up, the narrowest width).

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

WIDTH, PARAM = "model.d_model", "model.param"  # axes a study may add to the map's four


@dataclass(frozen=True)
class Line:
    """One placement x depth x warm-up (x width x parametrisation) over the lr axis, at one horizon;
    width and param are None where the study does not vary them."""

    placement: str
    depth: int | None
    warmup: int | None
    horizon: int
    frontier: Frontier
    width: int | None = None
    param: str | None = None

    def record(self) -> dict[str, Any]:
        extra = {k: v for k, v in (("width", self.width), ("param", self.param)) if v is not None}
        return {"placement": self.placement, "depth": self.depth, "warmup": self.warmup, **extra,
                "horizon": self.horizon, "critical_lr": self.frontier.as_dict(), "text": self.frontier.text()}

    def where(self) -> str:
        """' at d=256, mup' (empty where the study has neither axis): said after a contrast's arm."""
        bits = [f"d={self.width}" if self.width is not None else "", self.param or ""]
        return (" at " + ", ".join(b for b in bits if b)) if any(bits) else ""


@dataclass(frozen=True)
class Contrast:
    """log10(critical lr of ``arm``) - log10(critical lr of ``control``), one factor changed."""

    placement: str
    factor: str        # "warm-up", "depth" or "width"
    arm: str           # e.g. "warm-up 50 at L=6"
    control: str       # e.g. "warm-up 0 at L=6"
    horizon: int
    effect: LogRatio

    def record(self) -> dict[str, Any]:
        return {"placement": self.placement, "factor": self.factor, "arm": self.arm, "control": self.control,
                "horizon": self.horizon, "log10_ratio": self.effect.as_dict(), "text": self.effect.text()}


def frontiers(trials: Iterable[TrialRecord], ce: DataCE, horizon: int, margin: float = STALL_MARGIN) -> list[Line]:
    """The critical lr of every placement x depth x warm-up (x width x parametrisation) of the
    trials, at ``horizon``; a line needs at least two lrs with an outcome."""
    by_shape: dict[tuple[Any, Any], list[TrialRecord]] = {}
    for t in trials:  # the map's cells know four axes; width and parametrisation split the trials first
        by_shape.setdefault((t.params.get(WIDTH), t.params.get(PARAM)), []).append(t)
    out = []
    for (width, param), group in by_shape.items():
        counts = trains_by(group, ce, horizon, margin)
        groups: dict[tuple[str, Any, Any], list[tuple[float, int, int]]] = {}
        for k, (t, n) in counts.items():
            if k.lr is not None and n > 0:
                groups.setdefault((k.placement, k.depth, k.warmup), []).append((k.lr, t, n))
        for (pl, depth, wu), pts in groups.items():
            if len(pts) < 2:
                continue
            pts.sort()
            out.append(Line(pl, depth, wu, horizon, critical_lr([p[0] for p in pts], [p[1] for p in pts],
                                                                [p[2] for p in pts]), width, param))
    return sorted(out, key=lambda x: (x.placement, x.param or "", x.width or 0, x.depth or 0, x.warmup or 0))


def contrasts(lines: list[Line]) -> list[Contrast]:
    """Each warm-up against no warm-up at the same depth, each depth against the shallowest at
    the same warm-up, and each width against the narrowest at the same depth and warm-up, per
    placement and parametrisation (lines of one horizon)."""
    by = {(x.placement, x.param, x.width, x.depth, x.warmup): x for x in lines}
    out: list[Contrast] = []
    for (pl, par, width, depth, wu), line in by.items():
        at = line.where()
        zero = by.get((pl, par, width, depth, 0))
        if wu and zero is not None:
            out.append(Contrast(pl, "warm-up", f"warm-up {wu} at L={depth}{at}", f"warm-up 0 at L={depth}{at}",
                                line.horizon, log_ratio(line.frontier, zero.frontier)))
        depths = sorted(d for (p, q, w, d, u) in by if (p, q, w, u) == (pl, par, width, wu) and d is not None)
        if depths and depth is not None and depth != depths[0]:
            low = by[(pl, par, width, depths[0], wu)]
            out.append(Contrast(pl, "depth", f"L={depth} at warm-up {wu}{at}", f"L={depths[0]} at warm-up {wu}{at}",
                                line.horizon, log_ratio(line.frontier, low.frontier)))
        widths = sorted(w for (p, q, w, d, u) in by if (p, q, d, u) == (pl, par, depth, wu) and w is not None)
        if widths and width is not None and width != widths[0]:
            narrow = by[(pl, par, widths[0], depth, wu)]
            out.append(Contrast(pl, "width", f"d={width} at L={depth}, warm-up {wu}{_param(par)}",
                                f"d={widths[0]} at L={depth}, warm-up {wu}{_param(par)}",
                                line.horizon, log_ratio(line.frontier, narrow.frontier)))
    return sorted(out, key=lambda c: (c.placement, c.factor, c.arm))


def _param(param: str | None) -> str:
    return f", {param}" if param else ""


__all__ = ["Contrast", "Line", "contrasts", "frontiers"]
