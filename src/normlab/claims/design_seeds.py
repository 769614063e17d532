"""The design analysis of the seed claims added in ``claims/catalogue/training_seeds.py`` and
``claims/catalogue/quick_seeds.py``: each part's rule at its planned seeds (or runs), from a stated
prior, with the smallest effect it detects with 80% power (``claims/design.py``). A stage that
registers its own seed count (``design.at_seeds``: a group-sequential campaign stage) plans a
training claim from its seen runs instead (``claims/design_seen.py``). Each part's
``why`` quotes the number this gives (``tests/claims/test_seed_claims.py`` recomputes them), and
:func:`claim_design` is these claims' ``Claim.design``, run when they are registered.

The priors, part by part (seen data are the published runs' seeds, or a pilot on seeds 900+ that
no study registers; a stated prior says where it comes from):

- ``seed002-dropout``: Pre-LN trained in 8 of 8 runs at lr 6e-3 (frontier-ends, warm-up 0 and 50);
  the spike ratio log10(max / median gradient norm) of unclipped 6-block Pre-LN runs spread by
  0.09 to 0.24 decades per seed (pre-vs-post, exploratory and confirmatory): SD 0.25.
- ``seed002-any-depth``, ``seed002-deep-output-norm``: at 18 blocks Pre-LN sat 0.8 nats below the
  plateau with a spread of 0.01; without its final norm it ended 0.10-0.12 nats higher (SD 0.02);
  ``pre_post`` stalled on the plateau (+0.7 nats). Stated priors at depth: per-seed SD 0.05 (48)
  and 0.1 (96) for the gap, 0.02 and 0.04 for the differences.
- ``seed002-layernorm``: a pilot (seed 900, 6 blocks, no warm-up): no norm diverged under xavier
  at lr 1e-3, 3e-3 and 1e-2, and trained under GPT-2's init at 1e-3 and 3e-3 but diverged at
  1e-2; Pre-LN trained in every cell. Pre-LN's init effect in the map's base was -0.035 nats
  (SD 0.012, 4 seeds).
- ``seed002-attention-focus``: no seen attention entropies at this cell: a stated prior SD of
  0.05 nats per seed.
- ``seed001-pre-no-warmup``: Pre-LN without warm-up trained in 48 of 48 map and frontier-ends runs.
- ``seed001-pre-identity``: the probe's seen seeds 0-4 at L = 16: Pre-LN's mean block cosine
  0.916 (SD 0.003), its smallest 0.786 (SD 0.01), Post-LN's mean 0.64.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from normlab.claims.design import Design, level, mean_design, planned_seeds, rate_design
from normlab.claims.rules import Direction, Outside, Within

NEAR = 0.894  # cos(x, x + F) for F orthogonal to x with |F| = |x| / 2: 1 / sqrt(1 + 1/4)

DESIGNS: dict[str, Callable[[], Design]] = {
    "seed002-dropout/trains": lambda: rate_design("seed002-dropout/trains", Direction(+1, 0.5), 12, effect=1.0),
    "seed002-dropout/not-spikier": lambda: mean_design("seed002-dropout/not-spikier", Direction(-1, 0.301), 12, 0.25,
                                                       12, 0.25, effect=0.0, unit="decades"),
    "seed002-any-depth/trains-48": lambda: mean_design("seed002-any-depth/trains-48", Direction(-1, -0.15), 4, 0.05,
                                                       effect=-0.8, unit="nats"),
    "seed002-any-depth/trains-96": lambda: mean_design("seed002-any-depth/trains-96", Direction(-1, -0.15), 4, 0.1,
                                                       effect=-0.6, unit="nats"),
    "seed002-deep-output-norm/final-norm-48": lambda: mean_design("final-norm-48", Direction(-1), 4, 0.02, 4, 0.02,
                                                                  effect=-0.1, unit="nats"),
    "seed002-deep-output-norm/final-norm-96": lambda: mean_design("final-norm-96", Direction(-1), 4, 0.04, 4, 0.04,
                                                                  effect=-0.1, unit="nats"),
    "seed002-deep-output-norm/sandwich-48": lambda: mean_design("sandwich-48", Direction(-1), 4, 0.02, 4, 0.02,
                                                                effect=0.7, unit="nats"),
    "seed002-deep-output-norm/sandwich-96": lambda: mean_design("sandwich-96", Direction(-1), 4, 0.04, 4, 0.04,
                                                                effect=0.7, unit="nats"),
    "seed002-layernorm/stabler": lambda: rate_design("seed002-layernorm/stabler", Direction(+1), 20, 20, p_b=0.5,
                                                     effect=0.5),
    "seed002-layernorm/init-none": lambda: mean_design("init-none", Outside(-0.05, 0.05), 10, 0.05, 10, 0.05,
                                                       effect=1.0, unit="nats"),
    "seed002-layernorm/init-pre": lambda: mean_design("init-pre", Within(-0.05, 0.05), 10, 0.012, 10, 0.012,
                                                      effect=-0.035, unit="nats"),
    "seed002-layernorm/higher-lr": lambda: rate_design("seed002-layernorm/higher-lr", Direction(+1), 10, 10, p_b=0.2,
                                                       effect=0.8),
    "seed002-attention-focus/sharper": lambda: mean_design("sharper", Direction(-1), 6, 0.05, 6, 0.05, unit="nats"),
    "seed002-attention-focus/sharper-early": lambda: mean_design("sharper-early", Direction(-1), 6, 0.05, 6, 0.05,
                                                                 unit="nats"),
    "seed001-pre-no-warmup/converges": lambda: rate_design("seed001-pre-no-warmup/converges", Direction(+1, 0.5), 24,
                                                           effect=1.0),
    "seed001-pre-identity/near": lambda: mean_design("near", Direction(+1, NEAR), _probe(), 0.003, effect=0.916),
    "seed001-pre-identity/every-block": lambda: mean_design("every-block", Direction(+1, NEAR), _probe(), 0.01,
                                                            effect=0.786),
    "seed001-pre-identity/vs-post": lambda: mean_design("vs-post", Direction(+1), _probe(), 0.01, effect=0.27),
}


def _probe() -> int:
    """The probe seeds a quick design plans: a stage's ``quick_seeds`` (design_seen.at_quick_seeds), else
    the default of a registration (registration_doc.QUICK_SEEDS)."""
    from normlab.claims.design_seen import planned_quick_seeds
    from normlab.claims.registration_doc import QUICK_SEEDS

    return planned_quick_seeds() or QUICK_SEEDS


PLANNED = "cpu"  # the scale whose seeds the training designs above plan (the studies' cpu presets)
_DONE: dict[tuple[str, float, int], Design] = {}  # each design once a process and level (rates take seconds)


def claim_design(claim: Any, scale: str) -> dict[str, Design]:
    """``Claim.design`` of a seed claim: its parts' designs above, named "claim/part". A training
    claim's at the scale they plan (at another, none: its seeds differ); a quick claim's at any."""
    if not claim.quick and scale != PLANNED:
        return {}
    if not claim.quick and planned_seeds() is not None:
        # A group-sequential stage registers its own seed count, which the stated counts above
        # cannot re-plan; by then the lab's confirmatory runs of these claims are the better prior.
        from normlab.claims.design_seen import seen_design

        return seen_design(claim, scale)
    out = {}
    for p in claim.parts:
        key = f"{claim.id}/{p.id}"
        if key in DESIGNS:
            done = (key, level(), _probe())
            if done not in _DONE:
                _DONE[done] = dataclasses.replace(DESIGNS[key](), part=key)
            out[p.id] = _DONE[done]
    return out


def designs() -> dict[str, Design]:
    """Every design above, computed (a few seconds: the mean designs simulate 2000 draws each)."""
    return {k: f() for k, f in DESIGNS.items()}


if __name__ == "__main__":
    for d in designs().values():
        print(d.text())
