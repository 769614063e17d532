"""The version of the decision code: a hash of the functions that turn effects into verdicts.

A rule hash covers what each claim declares; the code that applies the declarations is shared
by every claim, and a change there (the Holm derivation fix of the 2026-12-02 run, say) changes
verdicts just as a changed rule does. :func:`decision_code_hash` hashes the source of exactly
that code (:data:`DECISION_CODE`): the rules, the exact rate tests they invert, the scoping rule,
a claim's verdict from its parts, and the Holm adjustment with the verdicts derived from it. A
registration records it (``claims/registration.py``), claims.json and history.jsonl carry it, and
a run whose decision code differs from the registered one marks its parts post-hoc
(``claims/registered.py``). Measuring code is not here: ``claims/measuring_code.py`` hashes it.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
from typing import Any

from normlab.claims import claim, holm, regime, rules
from normlab.stats import effects, exact


def _decision_code() -> list[Any]:
    return [rules, exact, regime.Factor.departs, regime.Factor.departs_by_rule, regime.Regime.departures,
            regime.scoped, regime.SCOPING_RULE, regime.REQUIRED, regime.SCOPED, claim.Claim.decide,
            claim.claim_verdict, claim.resting_parts, claim.describe, holm.adjust, holm.holm_verdicts, effects.holm,
            effects.rate_p, effects.rate_tails]


# What DECISION_CODE names, for the docs: the modules and functions hashed, in order.
DECISION_CODE = ("claims/rules.py", "stats/exact.py", "regime: Factor.departs, Factor.departs_by_rule, "
                 "Regime.departures, scoped, SCOPING_RULE, REQUIRED, SCOPED", "claim: Claim.decide, claim_verdict, "
                 "resting_parts, describe", "output: adjust, holm_verdicts", "stats/effects: holm, rate_p, rate_tails")


@functools.lru_cache(maxsize=1)
def decision_code_hash() -> str:
    """sha256 (16 hex digits) over the source (or value) of every item of the decision code."""
    h = hashlib.sha256()
    for obj in _decision_code():
        text = inspect.getsource(obj) if inspect.ismodule(obj) or callable(obj) else repr(obj)
        h.update(text.encode() + b"\0")
    return h.hexdigest()[:16]
