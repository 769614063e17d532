"""The one number formatter of every report page, table, caption and axis.

People read 11,054 tok/s, 2.134 nats and lr 3e-4, not 1.105e+04, 2.1343287 or
0.00030000000000000003. Every number that reaches a page goes through ``num`` (or ``pm``
for a mean and its spread, ``duration`` for seconds), so a page never mixes styles.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

DASH = "–"  # a missing value (None, or no seeds to average)


def num(v: Any, sig: int = 4, compact: bool = False) -> str:
    """A number for people: thousands separators, ``sig`` significant digits, short exponents.

    ``compact`` (axis ticks) writes 1.2M and 15k instead of 1,200,000 and 15,000 (from 1,000
    on, so one axis does not mix 8,000 and 10k). Anything
    that is not a number goes through ``str``; None is a dash.
    """
    if v is None:
        return DASH
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not isinstance(v, (int, float)):
        if not isinstance(v, numbers.Real):  # text stays text, even "+1"
            return str(v)
        v = int(v) if isinstance(v, numbers.Integral) else float(v)  # numpy scalars
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if math.isinf(v):
            return "∞" if v > 0 else "-∞"
        if v.is_integer() and abs(v) < 1e15:
            v = int(v)
    a = abs(v)
    if compact and a >= 1000:
        for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if a >= scale:
                return f"{v / scale:.{max(sig - 1, 1)}g}{suffix}"
    if isinstance(v, int):
        return f"{v:,}"
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 1e-3:
        text = f"{v:.{sig}g}"
        return text if "e" not in text else _short_exp(v, sig)
    return _short_exp(v, sig)


def _short_exp(v: float, sig: int) -> str:
    """3e-4 rather than 3.000e-04 (trailing zeros and the exponent's padding dropped)."""
    mant, exp = f"{v:.{sig - 1}e}".split("e")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"


def signed(v: float | None, sig: int = 3) -> str:
    """A slope or difference with its sign always shown: +0.178, -0.446."""
    if v is None or not math.isfinite(v):
        return num(v)
    text = num(v, sig)
    return text if text.startswith("-") or text == "0" else "+" + text


def pm(mean: float | None, sd: float | None, sig: int = 4) -> str:
    """'2.134 ± 0.0123': the mean to ``sig`` digits, the spread to the mean's last decimal
    (at least 2 significant digits); just the mean when there is no spread."""
    if mean is None or not math.isfinite(mean):
        return DASH
    m = num(mean, sig)
    if sd is None or not math.isfinite(sd):
        return m
    decimals = len(m.split(".")[1]) if "." in m and "e" not in m else 0
    need = 1 - math.floor(math.log10(sd)) if sd > 0 else 0  # two significant digits of sd
    return f"{m} ± {sd:.{max(decimals, need, 0)}f}"


def duration(seconds: float | None) -> str:
    """0.35 s, 12.4 s, 3 min 05 s, 1 h 02 min."""
    if seconds is None or not math.isfinite(seconds):
        return DASH
    s = float(seconds)
    if s < 60:
        return f"{num(round(s, 2), 3)} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


def apply_ticks(ax: Any) -> None:
    """Tick labels of ``ax`` through ``num`` (compact): linear axes when that keeps the labels
    distinct, log axes always; fixed labels (heatmaps, bars) are left as they are."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogFormatter, ScalarFormatter

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log" and isinstance(axis.get_major_formatter(), LogFormatter):
            # 20 and 0.5 rather than 2×10¹ and 5×10⁻¹; minor ticks labelled at 2 and 5 when
            # the axis spans less than two decades (otherwise they would crowd)
            lo, hi = sorted(axis.get_view_interval())
            few = lo > 0 and hi / lo < 100
            axis.set_major_formatter(FuncFormatter(tick))
            axis.set_minor_formatter(FuncFormatter(minor_tick if few else lambda v, _p: ""))
            continue
        if axis.get_scale() != "linear" or not isinstance(axis.get_major_formatter(), ScalarFormatter):
            continue
        if isinstance(axis.get_major_locator(), FixedLocator):
            continue
        lo, hi = sorted(axis.get_view_interval())
        locs = [v for v in axis.get_majorticklocs() if lo - 1e-12 * abs(lo) <= v <= hi + 1e-12 * abs(hi)]
        labels = [num(_clean(v), compact=True) for v in locs]
        if len(set(labels)) == len(labels):
            axis.set_major_formatter(FuncFormatter(tick))


def _clean(v: float) -> float:
    """Tick positions carry float noise (0.30000000000000004); round to 12 digits."""
    return float(f"{v:.12g}")


def _mantissa(v: float) -> int:
    """The leading digit of ``v`` when it is a whole digit times a power of ten, else 0."""
    if v <= 0:
        return 0
    m = v / 10 ** math.floor(math.log10(v))
    return round(m) if abs(m - round(m)) < 1e-6 else 0


def tick(v: float, _pos: Any = None) -> str:
    """An axis tick label (a matplotlib FuncFormatter): compact, float noise removed."""
    return num(_clean(v), compact=True)


def minor_tick(v: float, _pos: Any = None) -> str:
    """A minor tick label of a log axis: only at 2 and 5 times a power of ten."""
    return tick(v) if _mantissa(v) in (2, 5) else ""


def rounded(v: Any, sig: int = 4) -> Any:
    """``v`` (a JSON-like tree) with every finite float cut to ``sig`` significant digits, for
    dumps people read (-0.9999999999999999 becomes -1.0)."""
    if isinstance(v, float):
        return float(f"{v:.{sig}g}") if math.isfinite(v) else v
    if isinstance(v, dict):
        return {k: rounded(x, sig) for k, x in v.items()}
    if isinstance(v, list):
        return [rounded(x, sig) for x in v]
    return v


__all__ = ["num", "signed", "pm", "duration", "tick", "rounded", "apply_ticks", "DASH"]
