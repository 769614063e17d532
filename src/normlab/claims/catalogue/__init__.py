"""Every claim, registered once: the claims each module of this package defines, in the order
they are defined, quick ones first.

The only module that fills :data:`normlab.claims.claim.CLAIMS` (the registry imports it at its
first lookup). A claim is declared where it is defined, by ``@claim`` over its ``measure``
(its id, parts, rules, the studies it reads, a quick claim's ``Needs``); nothing registers
itself on import and no hand-kept list repeats the definitions, so adding a claim to one of
these modules is its definition and its test. A new module of claims is one entry in
``MODULES``.

- ``quick.py``, ``quick_beyond_grid.py``: claims decided at initialisation (the probe grid, and
  the extra measurements of ``diagnostics/measurements.py``);
- ``training_warmup.py``, ``training_depth.py``: cells of the stability map (``map_cells.py``);
- ``training_frontier.py``: critical learning rates of the map and ``frontier-ends``;
- ``training_long.py``: where training ends (study ``shallow-long``);
- ``training.py``, ``training_statistics.py``: the other training studies and the in-training
  statistics;
- ``training_new_methods.py``: the placements and norms of 2021-2026, one claim each, on the
  study ``new-methods``;
- ``training_transfer.py``, ``training_monitors.py``: whether a critical lr transfers across
  width (muP, SP), depth (CompleteP) and optimiser (Muon), and warm-up's sharpness and attention
  entropy before Post-LN's stall, read off in-training monitors (``study/transfer_preset.py``);
- ``quick_seeds.py``, ``training_seeds.py``: seed statements that were not yet claims (Pre-LN near
  the identity at init; dropout, depth beyond 48 blocks, LayerNorm against no norm, attention,
  Pre-LN without warm-up), on the studies of ``study/seed_presets.py`` and the map. Two modules
  because quick claims come first in the registry.
"""

from __future__ import annotations

from types import ModuleType

from normlab.claims.catalogue import (
    quick,
    quick_beyond_grid,
    quick_seeds,
    training,
    training_depth,
    training_frontier,
    training_long,
    training_monitors,
    training_new_methods,
    training_seeds,
    training_statistics,
    training_transfer,
    training_warmup,
)
from normlab.claims.claim import CLAIMS, Claim

# In this order on the page and in claims.json.
MODULES = (quick, quick_beyond_grid, quick_seeds, training_warmup, training_depth, training_frontier, training_long,
           training, training_statistics, training_new_methods, training_seeds, training_transfer, training_monitors)


def defined(module: ModuleType) -> list[Claim]:
    """The claims ``module`` defines (not those it imports from another), in definition order."""
    return [c for c in vars(module).values() if isinstance(c, Claim) and c.measure.__module__ == module.__name__]


for _module in MODULES:
    for _claim in defined(_module):
        CLAIMS.add(_claim.id, _claim)
