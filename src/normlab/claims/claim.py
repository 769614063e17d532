"""A claim: what is claimed, by whom, in which parts, measured how, decided how (the catalogue of
every claim is ``claims/catalogue.py``).

A :class:`Claim` quotes its statement as the source puts it (never corrected in place: the
verdict is where the lab answers) and splits it into the :class:`Part` s it asserts. Each
part declares its quantity and its :mod:`rule <normlab.claims.rules>` with the claim, apart
from the measuring; ``measure(data)`` only measures, returning one :class:`Measured` per
part. The verdicts are applied here, the same way for every claim. The rule texts and
parameters are hashed (``rule_hash``) and so is the measuring code (``code_hash``), so a
changed rule shows up in the verdict history; that a rule predates the data is shown only by
a committed pre-registration (``claims/registration.py``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from normlab.claims.rules import Rule, combine
from normlab.stats import Effect


@dataclass(frozen=True)
class Part:
    """One assertion of a claim, with its rule (declared with the claim; whether it was fixed before
    the data is what a committed registration shows: ``claims/registration.py``)."""

    id: str
    asserts: str      # what this part of the statement asserts, in the lab's words
    quantity: str     # what is measured; the effect's unit and sign convention
    rule: Rule
    why: str          # the reason for this rule and its parameters

    def spec(self) -> dict[str, Any]:
        return {"id": self.id, "asserts": self.asserts, "quantity": self.quantity, "rule": self.rule.spec(),
                "rule_text": self.rule.text(), "why": self.why}


@dataclass
class Measured:
    """What ``measure`` returns for one part."""

    effect: Effect
    trials: list[str] = field(default_factory=list)  # trial ids (or probe cells) the effect used
    numbers: dict[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass
class Claim:
    id: str
    statement: str                # as the source puts it (translated where the source is not English)
    source: str                   # paper or seed file
    experiment: str
    parts: tuple[Part, ...]
    quick: bool                   # decidable at initialisation
    measure: Callable[[Any], dict[str, Measured]] = field(repr=False, default=None)  # type: ignore[assignment]
    figure: str | None = None     # evidence figure (file name without extension)
    settings: str = ""            # the settings a reader must know (init, clipping, seeds)
    studies: tuple[str, ...] = ()  # study presets a training claim reads
    experiments: dict[str, str] = field(default_factory=dict)  # the experiment at other scales, e.g. "seed"
    needs: Any = None             # a quick claim's measure.Needs: the only data `--only` measures for it

    def experiment_at(self, scale: str | None) -> str:
        """The experiment the claim is decided on at study scale ``scale`` (None: at init)."""
        return self.experiments.get(scale, self.experiment) if scale else self.experiment

    def rule_hash(self, scale: str | None = None) -> str:
        return rule_spec_hash(self.statement, self.experiment_at(scale), [p.spec() for p in self.parts])

    def code_hash(self) -> str:
        return hashlib.sha256(inspect.getsource(self.measure).encode()).hexdigest()[:16]

    def decide(self, data: Any) -> dict[str, Any]:
        """Measure, apply each part's rule, derive the claim's verdict: the claims.json record."""
        got = self.measure(data)
        scale = None if self.quick else getattr(data, "scale", None)
        missing = [p.id for p in self.parts if p.id not in got]
        if missing:
            raise RuntimeError(f"claim {self.id}: measure() returned no value for parts {missing}")
        parts = []
        for p in self.parts:
            m = got[p.id]
            parts.append({**p.spec(), "effect": m.effect.as_dict(), "effect_text": m.effect.text(),
                          "verdict": p.rule.verdict(m.effect), "p": p.rule.p(m.effect), "trials": m.trials,
                          "numbers": m.numbers, "note": m.note})
        return {"id": self.id, "statement": self.statement, "source": self.source,
                "experiment": self.experiment_at(scale),
                "settings": self.settings, "quick": self.quick, "figure": self.figure,
                "verdict": combine([x["verdict"] for x in parts]), "parts": parts,
                "rule_hash": self.rule_hash(scale), "code_hash": self.code_hash()}


def rule_spec_hash(statement: str, experiment: str, parts: list[dict[str, Any]]) -> str:
    """The rule hash of a claim from its written-down specs (``Part.spec`` of each part): what
    :meth:`Claim.rule_hash` computes, and what a registration file is checked against
    (``claims/registration.py``), so that either can be recomputed from the text alone."""
    spec = {"statement": statement, "experiment": experiment, "parts": parts}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def claim(**kw: Any) -> Callable[[Callable[[Any], dict[str, Measured]]], Claim]:
    """Turn the decorated ``measure(data) -> {part id: Measured}`` into a :class:`Claim`.
    Nothing is registered here: each claims module lists its claims in ``CLAIMS`` and
    :func:`all_claims` builds the registry from those lists."""

    def deco(fn: Callable[[Any], dict[str, Measured]]) -> Claim:
        ids = [p.id for p in kw["parts"]]
        if len(set(ids)) != len(ids):
            raise ValueError(f"claim {kw['id']}: duplicate part ids {ids}")
        return Claim(measure=fn, **{**kw, "parts": tuple(kw["parts"]), "studies": tuple(kw.get("studies", ())),
                                    "experiments": dict(kw.get("experiments", {}))})

    return deco
