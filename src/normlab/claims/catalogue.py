"""The claims catalogue: what is claimed, by whom, how it is measured and decided.

Each claim is a :class:`Claim` registered in ``CLAIMS`` under its id; ``decide`` turns the
measurements of its experiment into a :class:`Verdict`. Statements are quoted as the source
puts them (REFERENCE.md section 4, the seed files of section 5), never corrected in place:
the verdict is where the lab answers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from normlab.registry import Registry

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not supported", "inconclusive"


@dataclass
class Verdict:
    verdict: str                       # supported | not supported | inconclusive
    summary: str                       # one line with the decisive numbers
    numbers: dict[str, Any] = field(default_factory=dict)
    spread: str = ""                   # e.g. "± stderr over 5 seeds"
    figure: str | None = None          # file name (without extension) of the evidence figure


@dataclass
class Claim:
    id: str
    statement: str                     # as the source puts it
    source: str                        # paper or seed file
    experiment: str                    # probe / study preset with sizes
    quantity: str
    rule: str                          # the decision rule, in words
    quick: bool                        # decidable at initialisation
    decide: Callable[[Any], Verdict] = field(repr=False, default=None)  # type: ignore[assignment]

    def record(self, v: Verdict) -> dict[str, Any]:
        """The JSON object of claims.json: the claim's fields plus its verdict."""
        d = {k: val for k, val in asdict(self).items() if k != "decide"}
        d.update(asdict(v))
        return d


CLAIMS: Registry[Claim] = Registry("claim", "--only")


def claim(**kw: Any) -> Callable[[Callable[[Any], Verdict]], Callable[[Any], Verdict]]:
    """Register the decorated ``decide(measurements) -> Verdict`` as a claim."""

    def deco(fn: Callable[[Any], Verdict]) -> Callable[[Any], Verdict]:
        CLAIMS.add(kw["id"], Claim(decide=fn, **kw))
        return fn

    return deco


def three_way(yes: bool, no: bool) -> str:
    """supported when the rule for yes holds, not supported when the rule for no holds."""
    return SUPPORTED if yes and not no else NOT_SUPPORTED if no and not yes else INCONCLUSIVE
