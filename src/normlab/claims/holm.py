"""The Holm step of a claims run: adjusted p-values over the run's parts and each claim's
Holm-adjusted verdict. Apart from the outputs (which draw pages) so that the decision code's
hash (``claims/decision.py``) can name these functions without importing the page code."""

from __future__ import annotations

from typing import Any

from normlab.claims.claim import claim_verdict, resting_parts
from normlab.claims.regime import scoped
from normlab.stats.effects import holm


def adjust(records: list[dict[str, Any]]) -> int:
    """Add Holm-adjusted p-values to every part (family: all parts with a p-value); returns the
    family size. A decisive verdict whose adjusted p is >= 0.05 is flagged ``holm_ok = False``."""

    parts = [p for r in records for p in r["parts"]]
    adj = holm([p["p"] for p in parts])
    for p, a in zip(parts, adj):
        p["p_holm"] = a
        p["holm_ok"] = None if a is None or p["verdict"] == "inconclusive" else a < 0.05
    return sum(p["p"] is not None for p in parts)


def holm_verdicts(records: list[dict[str, Any]]) -> None:
    """Per claim, after :func:`adjust`: ``verdict_holm``, the claim's verdict with every decisive
    part that does not survive Holm counted as inconclusive, and ``holm_note``, "" or (when
    ``verdict_holm`` differs from ``verdict``) the sentence naming those parts. The raw verdict
    stays; the tables and the page show both (:func:`verdict_text`)."""

    for r in records:
        # the same derivation as the claim's own verdict (parts inside the regime, scoped when
        # none is), with the parts that do not survive Holm counted as inconclusive
        raw, away = claim_verdict(r["parts"], holm=True)
        r["verdict_holm"] = scoped(raw, away)
        fails = [p for p in resting_parts(r["parts"]) if p.get("holm_ok") is False]
        r["holm_note"] = "" if r["verdict_holm"] == r["verdict"] else _holm_sentence(fails)


def _holm_sentence(fails: list[dict[str, Any]]) -> str:
    named = [f"{p['id']} (p {p['p']:.2g}, adjusted {p['p_holm']:.2g})" for p in fails]
    if len(named) == 1:
        return f"rests on part {named[0]}, which does not survive the Holm adjustment"
    return f"rests on parts {', '.join(named[:-1])} and {named[-1]}, which do not survive the Holm adjustment"


__all__ = ["adjust", "holm_verdicts"]
