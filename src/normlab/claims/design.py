"""Design (power) analysis before registration: what a part's rule can decide at the planned
seeds, from exploratory data (seen seeds) or a stated prior.

Each analysis applies the part's own rule (``claims/rules.py``) to the lab's own effects
(``stats/effects.py``) on data drawn at the planned design, and reports the smallest effect the
rule detects with 80% power: the true value at which the predicted verdict ("supported") comes
out in at least 80% of the draws. A :class:`Design` whose rule cannot reach 80% power at any true
value cannot decide whatever the data; :func:`require_decidable` refuses it in one line naming
the part and the effect it could detect (issue 40: redesign it, or register it as descriptive).

- :func:`mean_design`: a mean over seeds (one-sample, paired) or a difference of means (Welch),
  per-seed values normal with the exploratory spread. A shift of the truth shifts the interval
  and nothing else, so the intervals are drawn once at effect 0 and the power at any effect is
  read off them: for ``Direction(+1, ref)`` the detectable effect is ref - q20(lo_0).
- :func:`rate_design`: a rate (k of n) or a difference of rates; exact, by enumerating every
  table and its binomial probability (no draws).
- ``claims/design_frontier.py``: differences of critical lrs.

For a ``Within`` rule (an equivalence) ``detectable`` is how far from the margin's centre the
truth may lie and still be shown inside with 80% power (None: not even at the centre); for
``Outside``, the true value nearest the margin shown outside with 80% power. ``power`` is the power at the stated ``effect`` (the exploratory estimate, or the
prior's), when one is given.

**The level.** A rule decides at its 95% interval, but the catalogue's one Holm then asks more of
each part: p below 0.05 / m at its strictest step, m the catalogue's p-values (about 200). A
design analysed at 0.05 promises a power the adjusted verdict does not have (campaign 1, designed
at 0.05: 63 of its 79 parts decisive at their rules' own level, 41 after the catalogue's Holm).
Inside :func:`at_level` every analysis asks the decision at that level:
the rule's verdict, with its interval (mean designs) or p-value (rates, critical lrs) at the
level instead of 0.05; ``normlab campaign register`` uses the plan's ``design_level``.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

from normlab.claims.rules import INCONCLUSIVE, SUPPORTED, Direction, Outside, Rule, Within
from normlab.core.errors import ConfigError, UserError
from normlab.stats.effects import MIN_SEEDS, Effect, one_sample, rate, rate_diff, welch

POWER = 0.8
SIMS = 2000
LEVEL = 0.05  # the level a rule's own 95% interval decides at
_LEVEL: contextvars.ContextVar[float] = contextvars.ContextVar("normlab_design_level", default=LEVEL)
_SEEDS: contextvars.ContextVar[int | None] = contextvars.ContextVar("normlab_design_seeds", default=None)


def planned_seeds() -> int | None:
    """The seeds a study plans inside :func:`at_seeds` (None outside: each preset's own)."""
    return _SEEDS.get()


@contextlib.contextmanager
def at_seeds(n: int) -> Iterator[None]:
    """Every design analysis inside plans ``n`` seeds for every study (a registration whose
    studies register ``n`` seeds: a group-sequential stage's largest look), instead of each
    preset's count: ``registration_doc.study_spec`` reads it, and so every design that counts
    its seeds from the planned study. A design that states its seed count refuses inside."""
    if not isinstance(n, int) or isinstance(n, bool) or n < MIN_SEEDS:
        raise ConfigError("seeds", n, f"a seed count >= {MIN_SEEDS}")
    token = _SEEDS.set(n)
    try:
        yield
    finally:
        _SEEDS.reset(token)


def level() -> float:
    """The level the design analyses now ask a decision at (``LEVEL`` outside :func:`at_level`)."""
    return _LEVEL.get()


@contextlib.contextmanager
def at_level(alpha: float) -> Iterator[None]:
    """Every design analysis inside asks a decision at ``alpha`` (the level the catalogue's Holm
    will ask of the part) instead of the rules' own 0.05."""
    if not isinstance(alpha, (int, float)) or not 0 < alpha <= LEVEL:
        raise ConfigError("design_level", alpha, f"a level in (0, {LEVEL:g}], e.g. 2.5e-4 (0.05 / 200 p-values)")
    token = _LEVEL.set(float(alpha))
    try:
        yield
    finally:
        _LEVEL.reset(token)


def decides_at(rule: Rule, e: Effect, alpha: float) -> bool:
    """Whether a decisive verdict of ``rule`` on ``e`` also holds at ``alpha``: at the rules' own
    level always; below it, when the rule's p-value is below ``alpha``."""
    if alpha >= LEVEL:
        return True
    p = rule.p(e)
    return p is not None and p < alpha


@dataclass(frozen=True)
class Design:
    """What a part's rule can decide at a planned design. ``detectable``: the smallest effect (a
    true value of the quantity) detected with 80% power, None when none is (``searched``: how far
    the search went); ``power``: at the stated effect; ``limit``: what stops it, when it cannot
    decide, and the fix."""

    part: str
    rule: Rule
    plan: str                        # the design in words: "4 seeds a side", "lrs ... x 4 seeds"
    detectable: float | None
    power: float | None = None
    effect: float | None = None
    searched: float | None = None
    best_bound: float | None = None  # critical lrs: the best 95% bound the design can reach
    limit: str = ""
    unit: str = ""
    level: float = LEVEL             # the level a decision is asked at (at_level)
    # the probability of a decisive verdict (supported or contradicted) at the stated effect: what
    # a part registered as decisive promises (below 80%: register it as descriptive, or redesign)
    decides: float | None = None

    @property
    def decidable(self) -> bool:
        return self.detectable is not None and not self.limit

    def record(self) -> dict[str, Any]:
        extra: dict[str, Any] = {} if self.level == LEVEL else {"level": self.level}
        if self.decides is not None:
            extra["decides"] = self.decides
        return {"part": self.part, "rule": self.rule.spec(), "plan": self.plan, "detectable": self.detectable,
                "power": self.power, "effect": self.effect, "best_bound": self.best_bound, "limit": self.limit,
                "decidable": self.decidable, **extra, "text": self.text()}

    def text(self) -> str:
        u = f" {self.unit}" if self.unit else ""
        at_lvl = "" if self.level == LEVEL else f" at level {self.level:.3g}"
        if not self.decidable:
            return f"{self.part}: cannot decide{at_lvl} at the planned design ({self.plan}): {self.limit}"
        what = (f"shows equivalence{at_lvl} with 80% power for a truth within +-{self.detectable:.3g}{u} of the "
                "margin's centre" if isinstance(self.rule, Within) else
                f"detects {self.detectable:+.3g}{u}{at_lvl} with 80% power")
        at = "" if self.power is None or self.effect is None else \
            f"; power {self.power:.0%} at the expected {self.effect:+.3g}{u}"
        if self.decides is not None and self.effect is not None:
            at += f" (a decisive verdict either way {self.decides:.0%})"
        return f"{self.part}: {self.plan}: {what}{at}"


def require_decidable(d: Design) -> None:
    """Refuse (UserError, one line) a part that cannot decide whatever the data."""
    if not d.decidable:
        raise UserError(d.text())


def _quantile(xs: Any, q: float) -> float:
    import numpy as np

    return float(np.quantile(np.asarray(xs, float), q))


def mean_design(part: str, rule: Rule, n_a: int, sd_a: float, n_b: int | None = None, sd_b: float | None = None,
                effect: float | None = None, sims: int = SIMS, seed: int = 0, unit: str = "") -> Design:
    """A mean over ``n_a`` seeds (``n_b`` None) or a Welch difference of ``n_a`` and ``n_b``
    seeds, per-seed spreads ``sd_a`` / ``sd_b`` (exploratory: ``statistics.stdev`` of the seen
    seeds' values)."""
    import numpy as np

    plan = f"{n_a} seeds" + (f" against {n_b}" if n_b is not None else "")
    if min(n_a, n_b if n_b is not None else n_a) < MIN_SEEDS:
        return Design(part, rule, plan, None, limit=f"fewer than {MIN_SEEDS} seeds a side is always inconclusive; "
                                                     f"plan {MIN_SEEDS} or more", unit=unit, level=level())
    rng = np.random.default_rng(seed)
    alpha = level()
    los, his = np.empty(sims), np.empty(sims)
    for i in range(sims):  # the lab's own intervals, truth 0 (a shift of the truth shifts them)
        a = rng.normal(0.0, sd_a, n_a).tolist()
        e = one_sample(a) if n_b is None else welch(a, rng.normal(0.0, sd_b if sd_b is not None else sd_a, n_b).tolist())
        los[i], his[i] = level_interval(e, alpha)

    def power(theta: float) -> float:
        return float(np.mean(_supported(rule, los + theta, his + theta)))

    decides = None if effect is None else float(np.mean(_supported(rule, los + effect, his + effect)
                                                        | _contradicted(rule, los + effect, his + effect)))

    if isinstance(rule, Direction):
        det = rule.ref - _quantile(los, 1 - POWER) if rule.sign > 0 else rule.ref - _quantile(his, POWER)
    elif isinstance(rule, Within):  # the truths shown inside with 80% power, scanned over the margin
        return replace(_scan(part, rule, plan, lambda ts: [power(float(t)) for t in ts], rule.lo, rule.hi,
                                         effect, 400, unit, alpha), decides=decides)
    else:  # Outside: above the upper bound
        det = rule.hi - _quantile(los, 1 - POWER)
    return Design(part, rule, plan, float(det), power(effect) if effect is not None else None, effect, unit=unit,
                  level=alpha, decides=decides)


def level_interval(e: Effect, alpha: float) -> tuple[float, float]:
    """``e``'s interval at ``alpha``: its own 95% one at the rules' level, else the estimate -+ the
    two-sided ``alpha`` critical value of its t (normal without degrees of freedom) times its se."""
    from scipy import stats

    assert e.lo is not None and e.hi is not None
    if alpha >= LEVEL or e.se is None or e.estimate is None:
        return e.lo, e.hi
    half = float(stats.norm.isf(alpha / 2) if e.df is None else stats.t.isf(alpha / 2, e.df)) * e.se
    return e.estimate - half, e.estimate + half


def _supported(rule: Rule, lo: Any, hi: Any) -> Any:
    """Whether intervals [lo, hi] (arrays) get the rule's "supported", as the rule decides it."""
    if isinstance(rule, Direction):
        return lo > rule.ref if rule.sign > 0 else hi < rule.ref
    if isinstance(rule, Within):
        return (lo > rule.lo) & (hi < rule.hi)
    return (lo > rule.hi) | (hi < rule.lo)


def _contradicted(rule: Rule, lo: Any, hi: Any) -> Any:
    """Whether intervals [lo, hi] (arrays) get the rule's "contradicted", as the rule decides it."""
    if isinstance(rule, Direction):
        return hi < rule.ref if rule.sign > 0 else lo > rule.ref
    if isinstance(rule, Within):
        return (lo > rule.hi) | (hi < rule.lo)
    return (lo > rule.lo) & (hi < rule.hi)


def _binom(n: int, p: Any) -> Any:
    """Binomial(n, p) probabilities of 0..n for each p (rows)."""
    import numpy as np
    from scipy import stats

    return stats.binom.pmf(np.arange(n + 1)[None, :], n, np.atleast_1d(p)[:, None])


def rate_design(part: str, rule: Rule, n_a: int, n_b: int | None = None, p_b: float | None = None,
                effect: float | None = None, grid: int = 1000) -> Design:
    """A rate over ``n_a`` runs (``n_b`` None), or the difference of rates of ``n_a`` and
    ``n_b`` runs with the control's rate ``p_b`` (exploratory, or the prior's). Exact: every
    table's verdict from the lab's exact intervals, weighted by its binomial probability."""
    import numpy as np

    alpha = level()

    def verdict(e: Effect) -> str:  # the rule's verdict where it also holds at the level asked
        v = rule.verdict(e)
        return v if v != INCONCLUSIVE and decides_at(rule, e, alpha) else INCONCLUSIVE

    if n_b is None:
        got = [verdict(rate(k, n_a)) for k in range(n_a + 1)]
        lo_t, hi_t, plan = 0.0, 1.0, f"{n_a} runs"

        def prob(t: Any, mask: Any) -> Any:
            return _binom(n_a, t) @ mask
    else:
        if p_b is None:
            raise ValueError("rate_design: a difference of rates needs the control's rate p_b")
        got = [[verdict(rate_diff(ka, n_a, kb, n_b)) for kb in range(n_b + 1)] for ka in range(n_a + 1)]
        pb = _binom(n_b, p_b)[0]
        lo_t, hi_t, plan = -p_b, 1.0 - p_b, f"{n_a} runs against {n_b} (control rate {p_b:g})"

        def prob(t: Any, mask: Any) -> Any:
            return (_binom(n_a, np.clip(np.atleast_1d(t) + p_b, 0.0, 1.0)) @ mask) @ pb

    table = np.array(got, dtype=object)
    yes, decisive = (table == SUPPORTED).astype(float), (table != INCONCLUSIVE).astype(float)
    d = _scan(part, rule, plan, lambda t: prob(t, yes), lo_t, hi_t, effect, grid, "", alpha)
    return d if effect is None else replace(d, decides=float(np.asarray(prob(np.array([effect]),
                                                                                          decisive))[0]))


def _scan(part: str, rule: Rule, plan: str, power_at: Callable[[Any], Any], lo_t: float, hi_t: float,
          effect: float | None, grid: int, unit: str = "", alpha: float = LEVEL) -> Design:
    """The smallest effect with 80% power, from the predicted side of the reference outward.
    Within: the truths shown inside with 80% power form a band around the margin's centre, and
    ``detectable`` is its half-width (None: no truth is shown inside with 80% power)."""
    import numpy as np

    ts = np.linspace(lo_t, hi_t, grid + 1)
    pw = np.asarray(power_at(ts), float)
    power = None if effect is None else float(np.asarray(power_at(np.array([effect])))[0])
    if isinstance(rule, Direction):
        side = ts > rule.ref if rule.sign > 0 else ts < rule.ref
    elif isinstance(rule, Within):
        side = (ts > rule.lo) & (ts < rule.hi)
    else:
        side = (ts > rule.hi) | (ts < rule.lo)
    ok = side & (pw >= POWER)
    if not ok.any():
        best = float(pw[side].max()) if side.any() else 0.0
        return Design(part, rule, plan, None, power, effect, limit=f"no true value gives the rule's verdict 80% power "
                      f"(at best {best:.0%}); add seeds or runs", unit=unit, level=alpha)
    if isinstance(rule, Within):
        centre = (rule.lo + rule.hi) / 2
        return Design(part, rule, plan, float(np.abs(ts[ok] - centre).max()), power, effect, unit=unit, level=alpha)
    if isinstance(rule, Outside):  # the truth nearest the margin on either side
        gap = np.where(ts > rule.hi, ts - rule.hi, rule.lo - ts)
        return Design(part, rule, plan, float(ts[ok][np.argmin(gap[ok])]), power, effect, unit=unit, level=alpha)
    near = ts[ok][0] if rule.sign > 0 else ts[ok][-1]
    return Design(part, rule, plan, float(near), power, effect, unit=unit, level=alpha)


__all__ = ["LEVEL", "POWER", "Design", "at_level", "at_seeds", "decides_at", "level", "level_interval",
           "mean_design", "planned_seeds", "rate_design", "require_decidable"]
