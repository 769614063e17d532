"""How much of the registered evidence decides, after the catalogue's adjustment, and what
stopped the rest (issue 40: at least 80% of the registered decisive parts decided, the rest
naming the limit that stopped them: horizon, seeds or cost).

A part is *decided* when its verdict after one Holm over the catalogue (``claims/family.py``) is
not "inconclusive". For each part that is not, the read-out names its limit from what its run
published, nothing re-measured:

* **horizon**: its outcome was still moving at the longest registered stage (``settle_status``
  "unsettled"): a longer stage may change it, so more seeds are not the first fix;
* **seeds**: how many seeds per side would decide it if its effect holds: its distance to the
  rule's nearest boundary in standard errors grows like sqrt(n) (and a t test's degrees of
  freedom with n), and to pass the catalogue's Holm it needs a two-sided p below 0.05 / m
  (Bonferroni over the family's m p-values: Holm's first step, so the count is an upper bound
  for all but the smallest p);
* **cost**: the same count beyond ``AFFORDABLE`` seeds per side: the effect lies so close to
  its boundary that no design this lab can pay for decides it.

A part without a p-value because no run of either arm trained (the rule reads noise there, not
the factor) is not a matter of seeds: more of them fail alike. Where some of its runs stalled on
the plateau its limit is **horizon** (a longer run may let them leave it); where every run
diverged, **cost** (neither seeds nor horizon decide it at those settings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from normlab.claims.family import INCONCLUSIVE, Family
from normlab.claims.rules import DESCRIPTIVE
from normlab.stats.frontier import Z95

AFFORDABLE = 24  # seeds per side: four times the campaign's largest design (6)


@dataclass(frozen=True)
class Readout:
    """One registered part after the catalogue's adjustment: decided or not, and if not its
    limit ("horizon", "seeds" or "cost") with the seeds per side that would decide it."""

    run: str
    claim: str
    part: str
    verdict: str
    limit: str | None
    seeds_now: int | None
    seeds_needed: int | None
    text: str
    before: str = ""  # its verdict as its run published it, before the catalogue's adjustment

    @property
    def decisive_before(self) -> bool:
        return self.before not in ("", INCONCLUSIVE)

    @property
    def decided(self) -> bool:
        return self.limit is None


def _distance(effect: dict[str, Any], rule: dict[str, Any]) -> float | None:
    """The estimate's distance to the boundary that would decide the rule, in its units."""
    e = effect.get("estimate")
    if e is None:
        return None
    if rule.get("kind") == "direction":
        return abs(e - float(rule.get("ref", 0.0)))
    if rule.get("kind") in ("within", "outside"):
        return min(abs(e - float(rule["lo"])), abs(e - float(rule["hi"])))
    return None


def _se(effect: dict[str, Any]) -> float | None:
    se = effect.get("se")
    if se:
        return float(se)
    lo, hi = effect.get("lo"), effect.get("hi")
    return None if lo is None or hi is None else (hi - lo) / (2 * Z95)


def _seeds(effect: dict[str, Any]) -> int | None:
    """The fewer seeds of the effect's sides (None: none recorded)."""
    ns = [int(v) for v in (effect.get("n_a"), effect.get("n_b")) if v]
    return min(ns) if ns else None


def _no_run_trained(rec: dict[str, Any]) -> tuple[int, int] | None:
    """(stalled, diverged) where the part has no p because no run of any arm trained; else None."""
    outcomes = (rec.get("numbers") or {}).get("outcomes")
    if rec.get("p") is not None or not isinstance(outcomes, dict):  # (a rate's list of run outcomes: one arm)
        return None
    arms = [a for a in outcomes.values() if isinstance(a, dict)]
    if not arms or any(int(a.get("trains", 0)) for a in arms):
        return None
    return sum(int(a.get("stalls", 0)) for a in arms), sum(int(a.get("diverged", 0)) for a in arms)


def seeds_needed(effect: dict[str, Any], rule: dict[str, Any], family_size: int, most: int = 1000,
                 p: float | None = None) -> int | None:
    """Seeds per side that would take the part past the catalogue's Holm if its effect holds
    (None: no estimate or no spread to scale from). The standard error shrinks like 1/sqrt(n)
    and, for a t-based interval, its degrees of freedom grow with n (Welch's at n seeds a side
    from 5: df ~5.6; at 4 seeds the t tail, not the effect, is often what fails). ``p``: the
    part's own p-value, when it has one, anchors the statistic (an exact rate test's p is not its
    interval's normal approximation), and the count then exceeds today's, which did not decide."""
    from scipy.stats import norm
    from scipy.stats import t as student

    n, d, se = _seeds(effect), _distance(effect, rule), _se(effect)
    if not n or d is None or not se or d <= 0:
        return None
    df, need = effect.get("df"), 0.05 / max(family_size, 1)
    now = d / se
    if p is not None and 0 < p < 1:
        now = float(student.isf(p / 2, df) if df else norm.isf(p / 2))
    for m in range(n + (p is not None), most + 1):
        t_m = now * math.sqrt(m / n)
        df_m = float(df) * (m - 1) / max(n - 1, 1) if df else math.inf  # no t: a normal tail
        if 2 * float(student.sf(t_m, df_m)) < need:
            return m
    return None


def readout(fam: Family, runs: Iterable[str]) -> list[Readout]:
    """Every part of ``runs`` (claims.json folders under the family's root) with its decision or
    its limit, from the records its run published."""
    keep, out = set(runs), []
    for fp in fam.parts:
        if fp.run not in keep or fp.verdict == DESCRIPTIVE:  # registered with no verdict: not a decisive part
            continue
        rec = fam.records.get((fp.run, fp.claim, fp.part), {})
        effect, rule = rec.get("effect") or {}, rec.get("rule") or {}
        after = fp.verdict_after
        n_now = _seeds(effect)
        if after != INCONCLUSIVE:
            out.append(Readout(fp.run, fp.claim, fp.part, after, None, n_now, None, "decided", fp.verdict))
            continue
        failed = _no_run_trained(rec)
        if failed is not None:
            stalls, diverged = failed
            limit = "horizon" if stalls else "cost"
            text = (f"no run of either arm trained by step {rec.get('horizon')} ({stalls} stalled, {diverged} "
                    "diverged), so it has no p-value and more seeds fail alike"
                    + ("; a longer horizon may let the stalled runs train" if stalls else ""))
            out.append(Readout(fp.run, fp.claim, fp.part, after, limit, n_now, None, text, fp.verdict))
            continue
        need = seeds_needed(effect, rule, fam.size, p=rec.get("p"))
        if rec.get("settle_status") == "unsettled":
            limit, text = "horizon", f"still moving at step {rec.get('horizon')}, its longest stage"
        elif need is not None and need <= AFFORDABLE:
            limit, text = "seeds", f"about {need} seeds a side would decide it if its effect holds (now {n_now})"
        else:
            limit = "cost"
            text = (f"its estimate lies so near its boundary that more than {AFFORDABLE} seeds a side would be needed"
                    + (f" (about {need})" if need is not None else ""))
        out.append(Readout(fp.run, fp.claim, fp.part, after, limit, n_now, need, text, fp.verdict))
    return out


def share(rows: list[Readout]) -> str:
    """One line: how many decided, and the limits of the rest."""
    if not rows:
        return "no registered part yet"
    done = sum(r.decided for r in rows)
    limits = {k: sum(r.limit == k for r in rows) for k in ("horizon", "seeds", "cost")}
    rest = ", ".join(f"{v} by {k}" for k, v in limits.items() if v)
    before = sum(r.decisive_before for r in rows)
    return (f"{done} of {len(rows)} registered parts decided after the catalogue's adjustment "
            f"({100 * done / len(rows):.0f}%; {before} decisive at their rules' own level before it)"
            f"{'; the rest stopped ' + rest if rest else ''}")


__all__ = ["AFFORDABLE", "Readout", "readout", "seeds_needed", "share"]
