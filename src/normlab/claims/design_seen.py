"""The design analysis of a training part from the lab's seen data: each part's own rule at the
seeds its study plans, with the spread and effect its published runs saw (``claims/design.py``).

The priors are the effects the lab's published runs saw, per scale, from the committed
``claims/catalogue/seen_priors.json`` (``claims/seen_priors.py`` says which run gives a part's
prior and writes the file); the package reads only that file, never docs/.

:func:`seen_design` maps each part's seen effect to a design:

- one-sample / paired t: :func:`mean_design` with the SD of the seen per-seed values;
- welch: :func:`mean_design` with each arm's own SD;
- interaction ((a1 - a0) - (b1 - b0), four cells): a Welch difference of two arms of SD
  ``se * sqrt(n / 2)`` (the seen standard error at the seen n); slightly conservative, since
  Welch's degrees of freedom (up to 2(n - 1)) are fewer than the four cells' (4(n - 1));
- rates (clopper-pearson, wilson, exact-unconditional: any effect with counts): :func:`rate_design`
  at the seen rate (a difference: the control's seen rate ``p_b``).

Planned n per arm = the seen n x (the seeds the claim's study plans at the scale) / (the seeds of
that study in the prior's run); with several studies the smallest ratio (the conservative one).
A degenerate spread (SD 0, as when every run diverged to the same value, or fewer than two
values) is replaced by ``SD_FLOOR``, 0.01 in the quantity's own unit (0.01 nats for a loss: the
published runs' per-seed SDs of a loss gain at step 200 lie between 0.002 and 0.014 nats; as many
decades or cosine units elsewhere): no spread is not a noiseless quantity, and would claim
infinite power. A small but real spread is kept as seen.

Quick claims (measured at initialisation by the probe) are designed the same way, from the probe
values of the latest confirmatory run that measured them, kept under the key ``"probe"`` whatever
the run's scale (the probe has no horizon). Their planned n is the seen n x the quick seeds a
registration plans (:func:`at_quick_seeds`: a campaign stage's ``quick_seeds``) / the seen run's
probe seeds; outside it, a quick claim declares its own design or has none.

A prior measured another quantity than the part does now (its ``quantity`` text differs) is no
prior, unless ``REWORDED`` says the text alone changed (the measuring code did not). A part with
no prior of its own takes that of a part with exactly its quantity text (one measurement that two
claims read, e.g. Post-LN's init effect in seed002-init-sensitive and seed004-lr-sensitive).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import statistics
from typing import Any, Iterator

from normlab.claims.design import Design, level, mean_design, planned_seeds, rate_design
from normlab.claims.folder import PROBE
from normlab.claims.seen_priors import MEAN, load
from normlab.core.errors import ConfigError, UserError
from normlab.study.presets import study_preset

SD_FLOOR = 0.01
# Parts whose quantity text changed after the seen run while what is measured did not.
REWORDED = {k: "b28b60a names the schedule in the text; the measurement (best val loss, post minus pre, shallow-long, "
               "end_gap) is the one the confirm-2a run made"
            for k in ("seed002-post-shallow-long/negligible", "seed004-post-ceiling/ceiling")}
_MEMO: dict[tuple[str, str, str, float, int | None, int | None], dict[str, Design]] = {}
_QUICK: contextvars.ContextVar[int | None] = contextvars.ContextVar("normlab_design_quick_seeds", default=None)


def planned_quick_seeds() -> int | None:
    """The probe seeds a registration plans inside :func:`at_quick_seeds` (None outside)."""
    return _QUICK.get()


@contextlib.contextmanager
def at_quick_seeds(n: int) -> Iterator[None]:
    """Every quick claim's design inside plans ``n`` probe seeds from its seen probe values (a
    campaign stage that registers its quick seeds), instead of its declared design or none."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 3:
        raise ConfigError("quick_seeds", n, "a count of at least 3 probe seeds")
    token = _QUICK.set(n)
    try:
        yield
    finally:
        _QUICK.reset(token)


def _sd(xs: list[float]) -> float:
    """The per-seed spread; ``SD_FLOOR`` when it is degenerate (see the module docstring)."""
    v = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    sd = statistics.stdev(v) if len(v) >= 2 else 0.0
    return sd if sd > 0 else SD_FLOOR


def ratio(studies: tuple[str, ...] | list[str], scale: str, seen: dict[str, list[int]]) -> float:
    """Planned over seen seeds, the smallest over the studies the prior's run ran (1 if none)."""
    got = []
    for s in studies:
        if seen.get(s):
            try:
                planned = planned_seeds() or len(study_preset(s, scale).seeds)  # design.at_seeds, else the preset's
                got.append(planned / len(seen[s]))
            except UserError:  # the study has no such scale: it plans nothing to scale by
                continue
    return min(got) if got else 1.0


def quick_ratio(prior: dict[str, Any], fixed: int | None = None) -> float:
    """Planned over seen probe seeds (1 outside :func:`at_quick_seeds`, or when the run's are unknown);
    a measurement that reads ``fixed`` seeds whatever the probe's count plans those (the exact checks)."""
    seen, planned = len((prior.get("seeds") or {}).get(PROBE) or []), planned_quick_seeds()
    if fixed is not None and planned:
        return fixed / max(1, len(prior.get("values_a") or []))
    return planned / seen if planned and seen else 1.0


def design_from(name: str, rule: Any, prior: dict[str, Any], factor: float = 1.0, via: str = "") -> Design:
    """The design of ``rule`` at ``factor`` x the prior's n per arm, from its seen effect (``via``:
    the part whose prior it is, when another's)."""
    def n(x: Any) -> int:
        return max(0, round(int(x) * factor))

    m, est = prior["method"], prior.get("estimate")
    at = f"step {prior['horizon']}, " if prior.get("horizon") is not None else ""
    seen = f"seen {prior['run']}{' as ' + via if via else ''}, {at}"
    if prior.get("counts"):
        c = [int(x) for x in prior["counts"]]
        if len(c) == 2:
            d = rate_design(name, rule, n(c[1]), effect=c[0] / c[1] if c[1] else None)
            note = f"{seen}{c[0]} of {c[1]}"
        else:
            pb = c[2] / c[3] if c[3] else 0.0
            d = rate_design(name, rule, n(c[1]), n(c[3]), p_b=pb, effect=(c[0] / c[1] if c[1] else 0.0) - pb)
            note = f"{seen}{c[0]} of {c[1]} against {c[2]} of {c[3]}"
    elif m in MEAN:
        sd = _sd(prior["values_a"])
        d = mean_design(name, rule, n(len(prior["values_a"])), sd, effect=est)
        note = f"{seen}SD {sd:.3g}"
    elif m == "welch":
        sa, sb = _sd(prior["values_a"]), _sd(prior["values_b"])
        d = mean_design(name, rule, n(len(prior["values_a"])), sa, n(len(prior["values_b"])), sb, effect=est)
        note = f"{seen}SD {sa:.3g} / {sb:.3g}"
    elif m == "interaction":
        k = min(int(prior["n_a"]), int(prior["n_b"]))
        se = prior.get("se")
        sd = se * math.sqrt(k / 2) if se is not None and math.isfinite(se) and se > 0 else SD_FLOOR
        d = mean_design(name, rule, n(prior["n_a"]), sd, n(prior["n_b"]), sd, effect=est)
        note = f"{seen}interaction as two arms of SD {sd:.3g}"
    else:
        raise ValueError(f"{name}: no design for a prior of method {m!r}")
    ran = min((len(v) for v in (prior.get("seeds") or {}).values()), default=0)
    short = [len(prior.get(k) or []) for k in ("values_a", "values_b") if prior.get(k)]
    if not prior.get("counts") and short and min(short) < ran:  # runs with no value: diverged, unfinished
        note += f"; {min(short)} of {ran} seeds gave a value"
    return dataclasses.replace(d, plan=f"{d.plan} ({note})")


def seen_design(claim: Any, scale: str, priors: dict[str, Any] | None = None) -> dict[str, Design]:
    """{part id: Design} of training ``claim`` at ``scale`` from the seen priors (``priors``: a
    document as :func:`extract` gives; None: the committed file). A part with no prior at this
    scale, a prior of another quantity, or a check, is absent."""
    key = (claim.id, scale, claim.rule_hash(scale), level(), planned_seeds(), planned_quick_seeds())
    if priors is None and key in _MEMO:  # another level or count: another analysis
        return dict(_MEMO[key])
    got = (priors if priors is not None else load())["priors"].get(PROBE if claim.quick else scale, {})
    same: dict[str, str] = {}  # quantity text -> the first part (by key) with a prior of it
    for k in sorted(got):
        same.setdefault(got[k].get("quantity", ""), k)
    out: dict[str, Design] = {}
    for p in claim.parts:
        prior = got.get(f"{claim.id}/{p.id}")
        if prior is not None and prior.get("quantity", p.quantity) != p.quantity \
                and f"{claim.id}/{p.id}" not in REWORDED:
            prior = None  # it measured another quantity
        via = "" if prior is not None or p.quantity not in same else same[p.quantity]
        prior = got[via] if via else prior
        if prior is None or p.check:
            continue
        needs = getattr(claim, "needs", None)
        factor = quick_ratio(prior, needs.fixed_seeds() if needs is not None else None) if claim.quick \
            else ratio(claim.studies, scale, prior["seeds"])
        out[p.id] = design_from(f"{claim.id}/{p.id}", p.rule, prior, factor, via)
    if priors is None:
        _MEMO[key] = dict(out)
    return out


__all__ = ["REWORDED", "SD_FLOOR", "at_quick_seeds", "design_from", "planned_quick_seeds", "quick_ratio", "ratio",
           "seen_design"]
