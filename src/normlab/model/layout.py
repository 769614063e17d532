"""Layout macros: names that stand for a whole per-layer list of placements (Mix-LN).

A macro is not a placement and cannot appear inside a list; it may have options, spelled
like a placement's: ``placement = {name = "mix", fraction = 0.5}``. ``model/build.py``
expands it and resolves every entry (names in ``catalogue.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from normlab.core.schema import doc
from normlab.model.placement import PlacementOptions


class Mix:
    """Mix-LN: Post-LN in the bottom blocks, Pre-LN above them. The paper's split is
    floor(alpha*L); Python's ``round`` would round half to even (L=6 -> 2, L=14 -> 4), so the
    rule is spelled out. The 1e-9 keeps products such as 0.29 * 100 = 28.999... at 29."""

    @dataclass
    class Options(PlacementOptions):
        fraction: float = doc("alpha: fraction of the blocks, from the bottom, that are Post-LN", 0.25)

        def __post_init__(self) -> None:
            self.check(0.0 <= self.fraction <= 1.0, "fraction", "must be in [0, 1], e.g. 0.25")

    formula: ClassVar[str] = "post for the first floor(alpha*L) blocks, pre after (alpha = option fraction)"
    source: ClassVar[str] = "Mix-LN (Li et al. 2024)"

    @staticmethod
    def expand(n_layer: int, options: "Mix.Options") -> list[str]:
        n_post = math.floor(options.fraction * n_layer + 1e-9)
        return ["post"] * n_post + ["pre"] * (n_layer - n_post)
