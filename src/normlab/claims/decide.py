"""Step 3 of a claims run: each chosen claim's record, by its own rules (``Claim.decide``),
through ``OUT/cache`` so that an interrupted run keeps every claim it finished.

A quick claim is measured at initialisation on what it declares it reads (its ``Needs``: probe
cells and extra measurements, ``claims/quickrun.py``) as it is decided; a training claim is
decided from the studies of step 2 (``StudyContext.record``: from the cache while its studies'
trials are what it was decided on), or, where its studies are staged, where its parts have
settled (``claims/settling.py``, which resumes their runs stage by stage)."""

from __future__ import annotations

from typing import Any

from normlab.claims.claim import Claim
from normlab.claims.plan import ClaimsPlan
from normlab.claims.settling import settle_claims


def decide(p: ClaimsPlan, claims: list[Claim]) -> dict[str, dict[str, Any]]:
    """The records of ``claims`` (claim id -> its claims.json entry, before the Holm adjustment).
    After the quick claims, the rest of the probe grid the page's context figures read."""
    got: dict[str, dict[str, Any]] = {}
    tolerances = p.registration.tolerances() if p.registration is not None else {}  # the registered settling tolerances
    settled = settle_claims(p.ctx, [c for c in claims if not c.quick], p.store,
                            tolerances=tolerances)  # {} when no study is staged
    for c in claims:
        if c.quick:
            assert p.quick is not None  # planned whenever a quick claim is chosen
            got[c.id] = p.quick.record(c)
        else:
            got[c.id] = settled[c.id] if c.id in settled else p.ctx.record(c, p.store)
    if p.quick is not None and any(c.quick for c in claims):
        for needs in p.figures:
            p.quick.ensure(needs)
    return got
