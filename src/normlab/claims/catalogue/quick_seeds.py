"""A seed statement decided at initialisation that the lab had only as a check: Pre-LN near the
identity at init (``jacobian-identity``'s Pre-LN coefficient of 1 holds by construction, so it is
never a verdict). Here the block map itself is measured, against a margin with a reason. Each
part's ``why`` gives the smallest effect its rule detects with 80% power at the probe's 5 seeds,
from the seen seeds (``claims/design_seeds.py``).
"""

from __future__ import annotations

import numpy as np

from normlab.claims.catalogue.quick import PROBE, SETTINGS
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.design_seeds import claim_design
from normlab.claims.measure import Needs, QuickData
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction
from normlab.stats.effects import one_sample, paired

NEAR = 0.894  # = claims.design_seeds.NEAR: cos(x, x + F), F orthogonal to x, |F| = |x| / 2
COS = "cos(x_{l-1}, x_l) of block l's input and output, mean over tokens (the probe's 'cos')"
WHY_NEAR = ("near identity = each block passes its input on with the branch adding less than half its norm: for F "
            "orthogonal to x (random weights) |F| < |x| / 2 gives cos(x, x + F) > 1 / sqrt(1 + 1/4) = 0.894")


@claim(id="seed001-pre-identity", quick=True, design=claim_design,
       needs=Needs(probe={"pre": "ref", "post": "ref"}),
       experiment=PROBE + "; the block cosines at L = 16", settings=SETTINGS,
       regime=Regime((factor("init", "Xiong et al.'s analysis (xavier-like)", why="the probe uses xavier"),
                      factor("steps", "at the start of training", why="the probe measures at init"))),
       source="seed 001 (Korean paper summary, 001_362ada3767c69b55.txt), on Xiong et al.",
       statement="In Pre-LN, by contrast, the sub-layer is applied after the Layer Normalization, so at the start "
                 "it behaves close to an identity mapping: the input is passed on to the next layer as it is.",
       parts=[Part("near", "at init, a Pre-LN block passes its input on nearly unchanged",
                   COS + ", mean over the 16 blocks of L = 16, per seed (pre)", Direction(+1, NEAR),
                   WHY_NEAR + ". Design (seen seeds: 0.916, SD 0.003): 5 seeds detect 0.899 with 80% power"),
              Part("every-block", "... every block does, the first included",
                   COS + ", smallest over the 16 blocks of L = 16, per seed (pre)", Direction(+1, NEAR),
                   "a network close to the identity has no block far from it; the first block sees the embedding "
                   "alone, before the stream has grown. Design (seen seeds: 0.786, SD 0.01): 5 seeds detect 0.911 "
                   "with 80% power"),
              Part("vs-post", "closer to the identity than Post-LN's blocks ('by contrast')",
                   "the mean block cosine, pre minus post, paired by seed, L = 16", Direction(+1),
                   "the seed contrasts it with Post-LN, whose identity passes through the norm. Design (seen seeds: "
                   "+0.27, SD 0.01): 5 seeds detect +0.0168 with 80% power")])
def seed001_pre_identity(q: QuickData) -> dict[str, Measured]:
    L = q.ref_depth()
    cos = {p: q.values(p, L, "cos") for p in ("pre", "post")}  # (seeds, blocks)
    mean = {p: [float(np.mean(r)) for r in cos[p] if np.all(np.isfinite(r))] for p in cos}
    low = [float(np.min(r)) for r in cos["pre"] if np.all(np.isfinite(r))]
    cells = q.cells("pre", [L])
    return {"near": Measured(one_sample(mean["pre"]), cells, {"per_block_seed_mean": np.mean(cos["pre"], 0).round(3).tolist()}),
            "every-block": Measured(one_sample(low), cells, {"per_seed": low}),
            "vs-post": Measured(paired(mean["pre"], mean["post"]), cells + q.cells("post", [L]), {"post": mean["post"]})}
