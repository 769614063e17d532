"""Training claims read where training ends: Post-LN against Pre-LN at 6 blocks trained to the
end of a cosine schedule five times the stability map's length (study ``shallow-long``,
``normlab/study/long_preset.py``). Seed 002 and seed 004 make statements about the final
loss and about how training goes; a 200-step map cell reads neither."""

from __future__ import annotations

from typing import Any

from normlab.claims.claim import Measured, Part, claim
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction, Within
from normlab.claims.studies import StudyContext, first_eval, gain, spike_score, welch_cells

LONG, P = "shallow-long", "model.placement"
EXP = ("study 'shallow-long': post, pre x 6 seeds, 6 blocks d=64, lr 1e-3 with a 50-step warm-up and cosine decay to "
       "1e-4 over 1000 steps, xavier init, no clipping, diagnostics every 100 steps")
SET = "xavier init; no gradient clipping; 1000 steps (about one epoch of the training text)"
BEST = "best val loss (nats per character), "
MARGIN = ("0.05 nats per character is a 5% change in perplexity, the smallest difference that would make a "
          "practitioner choose one placement over the other")


def _diff(ctx: StudyContext, a: str, b: str, fn: Any) -> Measured:
    return welch_cells(ctx, LONG, {P: a}, {P: b}, fn, labels=(a, b))


@claim(id="seed002-post-shallow-long", quick=False, studies=[LONG], experiment=EXP, settings=SET,
       regime=Regime((factor("depth", "below 12 layers", why="6 blocks"),
                      factor("steps", "trained to the end (final perplexity)", inside={"cpu": True},
                             why="the loss at the end of a full schedule (cosine to lr/10), as the statement "
                                 "reads it; the seed's pet project trains 10 epochs, this study about 1"),
                      factor("lr", "not stated", matters=False))),
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), practical advice",
       statement="Below 12 layers post-norm may give slightly better perplexity, but the difference is usually "
                 "negligible.",
       parts=[Part("negligible", "at 6 blocks, trained to the end of its schedule, the Post-LN / Pre-LN difference "
                   "is negligible", BEST + "post minus pre, per seed", Within(-0.05, 0.05),
                   MARGIN + "; the map's 200-step version of this claim (seed002-post-shallow) reads early training")])
def seed002_post_shallow_long(ctx: StudyContext) -> dict[str, Measured]:
    return {"negligible": _diff(ctx, "post", "pre", gain)}


@claim(id="seed004-pre-faster", quick=False, studies=[LONG], experiment=EXP, settings=SET,
       regime=Regime((factor("steps", "whole training runs", inside={"cpu": True},
                             why="the first evaluation (step 100) for 'faster', the whole run for 'more stably'"),
                      factor("depth", "not stated (GPT, MPT, Falcon, Llama)", matters=False),
                      factor("lr", "not stated", matters=False))),
       source="seed 004 (Chinese survey, 004_d24365e98fdce59d.txt), summary of the Pre/Post comparison",
       statement="So, in sum, Pre Norm trains faster and more stably.",
       parts=[Part("faster", "Pre-LN's loss falls faster", "val loss at the first evaluation after step 0 (step 100), "
                   "pre minus post, per seed", Direction(-1), "faster = a lower loss early"),
              Part("stabler", "Pre-LN trains more stably", "OLMo-core's SpikeScore at the last diagnostics line (spike "
                   "steps / steps: a loss or gradient norm 6 sigma above the trailing 128 steps), pre minus post",
                   Direction(-1), "more stably = fewer loss and gradient spikes")])
def seed004_pre_faster(ctx: StudyContext) -> dict[str, Measured]:
    return {"faster": _diff(ctx, "pre", "post", first_eval), "stabler": _diff(ctx, "pre", "post", spike_score)}


@claim(id="seed004-post-ceiling", quick=False, studies=[LONG], experiment=EXP, settings=SET,
       regime=Regime((factor("steps", "large-model training", inside=False,
                             why="the ceiling of a model trained at scale; the lab trains 1000 steps at d=64"),
                      factor("depth", "not stated", matters=False))),
       source="seed 004 (Chinese survey, 004_d24365e98fdce59d.txt), on representation collapse",
       statement="Pre Norm may have a potential representation-collapse problem: its ceiling may be lower than "
                 "Post Norm's.",
       parts=[Part("ceiling", "trained to the end of its schedule, Post-LN ends lower than Pre-LN",
                   BEST + "post minus pre, per seed", Direction(-1),
                   "a higher ceiling = a lower loss where training ends")])
def seed004_post_ceiling(ctx: StudyContext) -> dict[str, Measured]:
    return {"ceiling": _diff(ctx, "post", "pre", gain)}
