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


# One effect, read by two claims (seed002-post-shallow-long and seed004-post-ceiling): the end of
# the schedule, Post-LN minus Pre-LN. One quantity, one measurement and one horizon factor, so
# the two parts are scoped alike (issue 40: the same effect was scoped in one and not the other).
END_GAP = BEST + "post minus pre, 6 blocks, at the end of the 1000-step cosine schedule, per seed"
END_STEPS = factor("steps", "not stated: where training ends (final perplexity; a ceiling)", inside=False,
                   why="the lab reads the best loss at the end of a 1000-step schedule at d=64 (about one epoch): "
                       "where this schedule ends, not where a longer one would; both claims reading this "
                       "difference are scoped by it alike")


def end_gap(ctx: StudyContext) -> Measured:
    """The shared effect: best val loss, post minus pre, at the end of the study's schedule."""
    return _diff(ctx, "post", "pre", gain)


@claim(id="seed002-post-shallow-long", quick=False, studies=[LONG], experiment=EXP, settings=SET,
       regime=Regime((factor("depth", "below 12 layers", why="6 blocks"), END_STEPS,
                      factor("lr", "not stated", matters=False))),
       source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt), practical advice",
       statement="Below 12 layers post-norm may give slightly better perplexity, but the difference is usually "
                 "negligible.",
       parts=[Part("negligible", "at 6 blocks, trained to the end of its schedule, the Post-LN / Pre-LN difference "
                   "is negligible", END_GAP, Within(-0.05, 0.05),
                   MARGIN + "; the map's 200-step version of this claim (seed002-post-shallow) reads early training. "
                   "Design: 6 seeds a side, per-seed sd 0.015 (the confirm-2a run) show equivalence for a truth "
                   "within +-0.023 of 0 with 80% power")])
def seed002_post_shallow_long(ctx: StudyContext) -> dict[str, Measured]:
    return {"negligible": end_gap(ctx)}


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
       regime=Regime((END_STEPS, factor("depth", "not stated", matters=False))),
       source="seed 004 (Chinese survey, 004_d24365e98fdce59d.txt), on representation collapse",
       statement="Pre Norm may have a potential representation-collapse problem: its ceiling may be lower than "
                 "Post Norm's.",
       parts=[Part("ceiling", "at 6 blocks, at the end of a 1000-step schedule, Post-LN ends lower than Pre-LN (a "
                   "gap where one schedule ends, not a ceiling)", END_GAP, Direction(-1),
                   "a ceiling is where training can go, which one 1000-step schedule at d=64 does not reach: the lab "
                   "reads the gap where its schedule ends and says no more (a ceiling would need the gap to persist "
                   "or grow over longer horizons). The same effect as seed002-post-shallow-long's part negligible, "
                   "scoped alike. Design: 6 seeds a side, per-seed sd 0.015 (the confirm-2a run) detect -0.028 with "
                   "80% power")])
def seed004_post_ceiling(ctx: StudyContext) -> dict[str, Measured]:
    return {"ceiling": end_gap(ctx)}
