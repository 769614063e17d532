"""What the claims of ``training_statistics.py`` read off one trial: a number per run from its
RUN/diagnostics.jsonl (mean log Z, the growth of the attention logits, the angle across each block
of either stream, max |x|) or from its logged pre-clip gradient norms (whether they exploded).

A reading of a trial is None where the run has nothing to read (unfinished, or written without
the diagnostic), and the claim leaves that run out. ``deep_minus_shallow`` and ``diag_list`` are
the steps the angle readings share with the claims' own deletion quantity. The claims' ``Part``
quantities say the same in words, and their measuring code (``claims/measuring_code.py``) follows
this module: a change here is a change of what they measure.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from normlab.claims.studies import last_diag, series_mean, spike_ratio


def logz(t: Any, tail: bool = True) -> float | None:
    return series_mean(t.run_dir, "log_z", file="diagnostics", last=tail)


def logit_growth(t: Any) -> float | None:
    d = last_diag(t.run_dir)
    if not d or not d.get("attn_max_logit") or not d["first"].get("attn_max_logit"):
        return None
    last = [v for v in d["attn_max_logit"] if v is not None]
    first = [v for v in d["first"]["attn_max_logit"] if v is not None]
    return math.log(max(last) / max(first)) if last and first and min(max(last), max(first)) > 0 else None


EXPLODED = 1.0  # log10(max / median pre-clip gradient norm): a step 10x the run's typical norm


def exploded(t: Any) -> bool | None:
    """Whether a run's gradients exploded: it diverged, or a logged pre-clip gradient norm reached
    10x the run's median (None: unfinished, or no norms logged)."""
    if t.status == "diverged":
        return True
    r = spike_ratio(t)
    return None if r is None else r >= EXPLODED


def deep_minus_shallow(vals: list[float | None]) -> float | None:
    """Mean over the deep half of blocks minus the shallow half (None entries dropped)."""
    h = len(vals) // 2
    lo = [x for x in vals[:h] if x is not None]
    hi = [x for x in vals[h:] if x is not None]
    return float(np.mean(hi) - np.mean(lo)) if lo and hi else None


# The diagnostics keys of the angle across a block, and their names in runs written before the
# statistics had one key per quantity (read, never written).
_OLD_KEYS = {"angular_distance": "angle", "angular_distance_aux": "angle_aux"}


def diag_list(d: dict[str, Any] | None, key: str) -> list[Any]:
    d = d or {}
    return d.get(key) or d.get(_OLD_KEYS.get(key, key)) or []


def deep_angle(t: Any, key: str = "angular_distance") -> float | None:
    vals = diag_list(last_diag(t.run_dir), key)
    v = [x for x in vals[len(vals) // 2:] if x is not None]
    return float(np.mean(v)) if v else None


def max_abs(t: Any) -> tuple[float, float] | None:
    d = last_diag(t.run_dir)
    if not d or not d.get("max_abs"):
        return None
    last = max(v for v in d["max_abs"] if v is not None)
    first = max(v for v in d["first"]["max_abs"] if v is not None)
    return math.log10(last), math.log10(last / first)
