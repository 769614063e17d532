"""Group-sequential seeds: a part looked at after a few seed counts, stopped at the first look
where it is decided, with the type-I error spent across the looks by the Lan-DeMets
O'Brien-Fleming function (Lan & DeMets 1983).

At information fraction t (seeds so far over the registered maximum) each side has spent
``a(t) = 2 - 2 Phi(z_{a/2} / sqrt(t))`` of its a = alpha / 2 (the two-sided alpha(t) is 2 a(t)):
almost nothing at the early looks, nearly all of alpha at the last. The z statistics of successive looks are correlated,
corr(Z_i, Z_j) = sqrt(t_i / t_j) (t_i <= t_j), and the boundary c_k of look k is where

    P(|Z_1| < c_1, ..., |Z_{k-1}| < c_{k-1}, |Z_k| < c_k) = 1 - alpha(t_k)

under the null: each look spends alpha(t_k) - alpha(t_{k-1}). The probability is scipy's
multivariate normal integral (``scipy.stats.multivariate_normal.cdf``, Genz's quasi-Monte Carlo
with a fixed generator, so the boundaries are the same on every machine) and c_k its root
(``scipy.optimize.brentq``). tests/stats/test_sequential.py checks them against the published
Lan-DeMets O'Brien-Fleming boundaries for 2 to 5 equally spaced looks.

A look decides a part when its rule's verdict is decisive and the rule's p-value (the smallest
alpha at which its interval would reach that verdict, ``claims/rules.py``) is below the look's
nominal level ``2 (1 - Phi(c_k))``. The boundaries are normal ones; with few seeds the rules'
p-values come from t distributions, which makes each look at least as strict as its z boundary.

**In a family** (:meth:`SeedPlan.weighted_look`, :meth:`SeedPlan.combined_p`). The exact
boundaries control one part's error; a part of the catalogue also needs a p-value that the
catalogue's one Holm can adjust. The campaign therefore splits each part's alpha over its
looks by weighted Bonferroni: look k gets the share w_k = (a(t_k) - a(t_{k-1})) / alpha of the
same spending function (O'Brien-Fleming's shape: almost nothing early, most at the last look),
a look stops the part when its p is below w_k alpha, and the part's p-value is
min_k p_k / w_k over the looks made. P(min_k p_k / w_k <= x) <= sum_k w_k x = x under the null
whatever the looks' correlation and whatever decided when to stop, so it is a valid p-value
for Holm; the price is a little power against the exact boundaries (the looks are correlated).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from normlab.core.errors import ConfigError

INCONCLUSIVE = "inconclusive"
ABSEPS = 1e-5   # absolute error of each integral: the boundaries agree to 4 decimals with 1e-6, 5x faster
SEED = 20260101  # the integrals' quasi-Monte Carlo generator: fixed, so boundaries reproduce


def obf_spent(t: float, alpha: float = 0.05) -> float:
    """The two-sided alpha spent by information fraction ``t`` (0 < t <= 1): on each side, Lan &
    DeMets' O'Brien-Fleming-type function a(t) = 2 - 2 Phi(z_{a/2} / sqrt(t)) at a = alpha / 2
    (gsDesign's ``sfLDOF``, ldbounds' ``iuse=1``), so 2 a(t) in all."""
    from scipy.stats import norm

    side = alpha / 2
    return float(2 * (2 - 2 * norm.cdf(norm.isf(side / 2) / math.sqrt(t))))


def _inside(cs: tuple[float, ...], ts: tuple[float, ...]) -> float:
    """P(|Z_j| < c_j for every look j) for looks at fractions ``ts``."""
    import numpy as np
    from scipy.stats import multivariate_normal, norm

    if len(cs) == 1:
        return float(norm.cdf(cs[0]) - norm.cdf(-cs[0]))
    t = np.asarray(ts, float)
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    c = np.asarray(cs, float)
    return float(multivariate_normal.cdf(c, mean=np.zeros(len(c)), cov=cov, lower_limit=-c, abseps=ABSEPS, releps=0.0,
                                         maxpts=200_000 * len(c), rng=np.random.default_rng(SEED)))


def _gap(c: float, prev: tuple[float, ...], ts: tuple[float, ...], target: float) -> float:
    """How far P(no crossing up to this look, its boundary at ``c``) is above ``target``."""
    return _inside((*prev, c), ts) - target


@functools.lru_cache(maxsize=64)
def obf_boundaries(fractions: tuple[float, ...], alpha: float = 0.05) -> tuple[float, ...]:
    """Two-sided z boundaries c_1..c_K at the information ``fractions`` (increasing, the last 1)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    cs: list[float] = []
    for k, t in enumerate(fractions):
        spent = obf_spent(t, alpha)
        if k == 0:
            cs.append(float(norm.isf(spent / 2)))
            continue
        cs.append(float(brentq(_gap, 0.5, 12.0, args=(tuple(cs), fractions[:k + 1], 1 - spent), xtol=1e-6)))
    return tuple(cs)


def obf_classic(looks: int, alpha: float = 0.05) -> tuple[float, ...]:
    """O'Brien & Fleming's (1979) own boundaries for ``looks`` equally spaced looks: c_k =
    C sqrt(K / k), the constant C making the two-sided level ``alpha`` exact. Not a spending
    function (the looks must be planned as such); here to check the integrals against the
    published constants (Jennison & Turnbull 2000, Table 2.3)."""
    from scipy.optimize import brentq

    ts = tuple((k + 1) / looks for k in range(looks))
    shape = [math.sqrt(looks / (k + 1)) for k in range(looks)]
    big = float(brentq(lambda c: _inside(tuple(c * v for v in shape), ts) - (1 - alpha), 1.0, 5.0, xtol=1e-6))
    return tuple(big * v for v in shape)


@dataclass(frozen=True)
class Look:
    """What a look at ``seeds`` seeds found: ``stop`` (decided, or the registered maximum
    reached), the ``verdict`` it stops with (the rule's, or inconclusive at the maximum), and
    the seed count of the next look (None when it stops)."""

    seeds: int
    stop: bool
    verdict: str
    next_seeds: int | None
    nominal: float
    p: float | None

    def text(self) -> str:
        p = "no p-value" if self.p is None else f"p {self.p:.3g}"
        if self.stop and self.verdict != INCONCLUSIVE:
            return f"decided at {self.seeds} seeds: {self.verdict} ({p} < {self.nominal:.3g}, the look's level)"
        if self.stop:
            return (f"undecided at the registered maximum of {self.seeds} seeds ({p}, level {self.nominal:.3g}): "
                    "inconclusive, limited by seeds")
        return f"undecided at {self.seeds} seeds ({p}, level {self.nominal:.3g}): add seeds up to {self.next_seeds}"


@dataclass(frozen=True)
class SeedPlan:
    """A registered group-sequential plan: the seed counts of the looks (increasing; the last is
    the registered maximum) and the family's two-sided alpha spent over them."""

    looks: tuple[int, ...]
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if not self.looks or self.looks[0] < 3 or any(b <= a for a, b in zip(self.looks, self.looks[1:])):
            raise ConfigError("sequential.looks", list(self.looks), "must be increasing seed counts from at least 3 "
                              "(fewer seeds a side are always inconclusive), e.g. [4, 6, 8]")
        if not 0 < self.alpha < 1:
            raise ConfigError("sequential.alpha", self.alpha, "must lie in (0, 1)")

    def spec(self) -> dict[str, Any]:
        return {"looks": list(self.looks), "alpha": self.alpha, "spending": "Lan-DeMets O'Brien-Fleming"}

    def text(self) -> str:
        levels = ", ".join(f"{n} seeds: p < {a:.3g}" for n, a in zip(self.looks, self.nominal()))
        return f"looks at {levels} (two-sided alpha {self.alpha:g}, Lan-DeMets O'Brien-Fleming spending)"

    def fractions(self) -> tuple[float, ...]:
        return tuple(n / self.looks[-1] for n in self.looks)

    def boundaries(self) -> tuple[float, ...]:
        return obf_boundaries(self.fractions(), self.alpha)

    def nominal(self) -> tuple[float, ...]:
        """Each look's nominal two-sided level 2 (1 - Phi(c_k))."""
        from scipy.stats import norm

        return tuple(float(2 * norm.sf(c)) for c in self.boundaries())

    def weights(self) -> tuple[float, ...]:
        """Each look's share of alpha under weighted Bonferroni: the spending function's
        increments over alpha (they sum to 1: a(1) = alpha)."""
        spent = [obf_spent(t, self.alpha) for t in self.fractions()]
        return tuple((b - a) / self.alpha for a, b in zip([0.0, *spent[:-1]], spent))

    def weighted_look(self, seeds: int, verdict: str, p: float | None) -> Look:
        """The look at ``seeds`` seeds under weighted Bonferroni: stop when the rule is decisive
        and ``p`` is below the look's share of alpha, ``w_k alpha``."""
        k = self._index(seeds)
        return self._look(k, self.weights()[k] * self.alpha, verdict, p)

    def _look(self, k: int, level: float, verdict: str, p: float | None) -> Look:
        """Look ``k`` at ``level``: decided below it, else more seeds (or the maximum, undecided)."""
        seeds, last = self.looks[k], k == len(self.looks) - 1
        if verdict != INCONCLUSIVE and p is not None and p < level:
            return Look(seeds, True, verdict, None, level, p)
        return Look(seeds, last, INCONCLUSIVE, None if last else self.looks[k + 1], level, p)

    def combined_p(self, ps: dict[int, float | None]) -> float | None:
        """The part's p-value over the looks made (seed count -> the rule's p there):
        min_k p_k / w_k, at most 1 (None: no look gave a p)."""
        w = self.weights()
        got = [float(p) / w[self._index(n)] for n, p in ps.items() if p is not None]
        return min(1.0, min(got)) if got else None

    def _index(self, seeds: int) -> int:
        if seeds not in self.looks:
            raise ConfigError("sequential.seeds", seeds, f"is not a registered look; looks: "
                              f"{', '.join(map(str, self.looks))}")
        return self.looks.index(seeds)

    def look(self, seeds: int, verdict: str, p: float | None) -> Look:
        """The look at ``seeds`` seeds of a part whose rule gave ``verdict`` with p-value ``p``."""
        k = self._index(seeds)
        return self._look(k, self.nominal()[k], verdict, p)


__all__ = ["Look", "SeedPlan", "obf_boundaries", "obf_classic", "obf_spent"]
