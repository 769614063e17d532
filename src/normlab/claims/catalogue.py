"""The catalogue of claims: every claims module's ``CLAIMS`` list, in one registry.

Claims are defined (``claims/claim.py``'s ``@claim``) in the module of their kind and listed
in its ``CLAIMS``; nothing registers on import. This module is the only one that imports
every claims module.
"""

from __future__ import annotations

from normlab.claims import quick, quick_beyond_grid, training, training_depth, training_statistics, training_warmup
from normlab.claims.claim import Claim
from normlab.core.registry import Registry


def all_claims() -> Registry[Claim]:
    """Every claim, quick ones first, in the order of the modules' ``CLAIMS`` lists."""
    reg: Registry[Claim] = Registry("claim", "--only")
    for mod in (quick, quick_beyond_grid, training_warmup, training_depth, training, training_statistics):
        for c in mod.CLAIMS:
            reg.add(c.id, c)
    return reg
