"""Cells of the stability map, and contrasts between them, for the claims that read it.

Every training claim about warm-up, depth and learning rate compares cells of one study,
``stability-map`` (placement x lr x depth x warm-up x seeds, docs/studies.md), or of
``recipe-variants``, whose runs share the map's base config so that a map cell is their
control. A cell is a dict of dotted config keys; its value per seed is
:func:`~normlab.claims.studies.gain`. Effects:

- :func:`diff`: cell a minus cell b (Welch).
- :func:`interaction`: (a1 - a0) - (b1 - b0), each arm against its own control at the same
  lr and warm-up: how much more a factor (depth, warm-up, lr) moves a than b.
- :func:`below_plateau`: best val loss minus the corpus's unigram cross-entropy, per seed:
  "trains" needs it below minus the stall margin.

When every run of every arm of a contrast stalls or diverges, the part is inconclusive
whatever the interval says (``Measured.all_failed``): models stuck on the same plateau
differ by noise, not by placement.
"""

from __future__ import annotations

from typing import Any

from normlab.claims.claim import Measured
from normlab.claims.studies import StudyContext, gain, values, where
from normlab.stats.effects import contrast, one_sample, welch

MAP = "stability-map"
P, LR, L, W, INIT, FINAL = ("model.placement", "optim.lr", "model.n_layer", "optim.warmup_steps", "model.init",
                            "model.final_norm")


def warm(ctx: StudyContext) -> int:
    """The map's non-zero warm-up (the one warm-up cell every part compares with 0)."""
    return max(t.params[W] for t in ctx.trials(MAP))


def deep(ctx: StudyContext) -> int:
    return max(t.params[L] for t in ctx.trials(MAP))


def shallow(ctx: StudyContext) -> int:
    return min(t.params[L] for t in ctx.trials(MAP))


def _cell(ctx: StudyContext, cell: dict[str, Any]) -> list[Any]:
    study = cell.get("study", MAP)
    return where(ctx.trials(study), {k: v for k, v in cell.items() if k != "study"})


def _outcomes(ctx: StudyContext, cells: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    out = {}
    for name, c in cells.items():
        got = [ctx.outcome(t) for t in _cell(ctx, c)]
        out[name] = {o: got.count(o) for o in ("trains", "stalls", "diverged")}
        if None in got:  # not finished: such an arm cannot be said to have failed
            out[name]["unfinished"] = got.count(None)
    return out


def _failed(outcomes: dict[str, dict[str, int]]) -> str:
    """A reason when no run of any arm trains (all stall or diverge), else ''."""
    stalls = sum(o["stalls"] for o in outcomes.values())
    diverged = sum(o["diverged"] for o in outcomes.values())
    if stalls + diverged and not any(o["trains"] or o.get("unfinished") for o in outcomes.values()):
        return (f"every run of every arm failed to train ({stalls} stalled on the unigram plateau, "
                f"{diverged} diverged): the arms differ by noise, not by the factor compared")
    return ""


def diff(ctx: StudyContext, a: dict[str, Any], b: dict[str, Any]) -> Measured:
    """gain of cell a minus cell b (Welch), inconclusive when both cells fail."""
    va, ia = values(_cell(ctx, a), gain)
    vb, ib = values(_cell(ctx, b), gain)
    oc = _outcomes(ctx, {"a": a, "b": b})
    return Measured(welch(va, vb), ia + ib, {"a": va, "b": vb, "outcomes": oc}, all_failed=_failed(oc))


def interaction(ctx: StudyContext, a1: dict[str, Any], a0: dict[str, Any], b1: dict[str, Any],
                b0: dict[str, Any]) -> Measured:
    """(gain a1 - gain a0) - (gain b1 - gain b0): the factor's effect on a beyond its effect on b."""
    cells = {"a1": a1, "a0": a0, "b1": b1, "b0": b0}
    got = {k: values(_cell(ctx, c), gain) for k, c in cells.items()}
    e = contrast([(got["a1"][0], 1), (got["a0"][0], -1), (got["b1"][0], -1), (got["b0"][0], 1)], "interaction")
    means = {k: (sum(v) / len(v) if v else None) for k, (v, _) in got.items()}
    oc = _outcomes(ctx, cells)
    return Measured(e, [i for _, ids in got.values() for i in ids], {"means": means, "outcomes": oc},
                    all_failed=_failed(oc))


def below_plateau(ctx: StudyContext, cell: dict[str, Any]) -> Measured:
    """best val loss minus the unigram cross-entropy, per seed (a diverged run counts as ln V). The
    reference is that of the cell's own study (a cell of another study than the map must not
    make the map train only to read its corpus)."""
    ce = ctx.reference(cell.get("study", MAP))
    ref = float(ce.unigram)

    def gap(t: Any) -> float | None:
        g = gain(t)
        return None if g is None else g + float(ce.uniform) - ref

    v, ids = values(_cell(ctx, cell), gap)
    return Measured(one_sample(v), ids, {"per_seed": v, "unigram_ce": ref, "outcomes": _outcomes(ctx, {"cell": cell})})
