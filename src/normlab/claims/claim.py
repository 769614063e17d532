"""A claim: what is claimed, by whom, in which parts, measured how, decided how; and ``CLAIMS``,
the registry of every claim (empty here: ``claims/catalogue/`` fills it at its first lookup).

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

from normlab.claims.regime import Regime, lab_settings, merge_settings, probe_settings, scoped
from normlab.claims.rules import DESCRIPTIVE, INCONCLUSIVE, Rule, combine
from normlab.core.registry import Registry
from normlab.stats.effects import Effect
from normlab.study.presets import study_preset


@dataclass(frozen=True)
class Part:
    """One assertion of a claim, with its rule (declared with the claim; whether it was fixed before
    the data is what a committed registration shows: ``claims/registration.py``)."""

    id: str
    asserts: str      # what this part of the statement asserts, in the lab's words
    quantity: str     # what is measured; the effect's unit and sign convention
    rule: Rule
    why: str          # the reason for this rule and its parameters
    # A check of the implementation (true by construction, e.g. an identity coefficient of
    # exactly 1): decided like a part, shown apart, never counted among the verdicts.
    check: bool = False

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "asserts": self.asserts, "quantity": self.quantity, "rule": self.rule.spec(),
               "rule_text": self.rule.text(), "why": self.why}
        if self.check:
            out["check"] = True
        return out


@dataclass
class Measured:
    """What ``measure`` returns for one part."""

    effect: Effect
    trials: list[str] = field(default_factory=list)  # trial ids (or probe cells) the effect used
    numbers: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    # Set when every arm of the contrast stalled or diverged: the part is inconclusive
    # whatever the interval says (two stalled models differ by noise, not by placement).
    all_failed: str = ""


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
    regime: Regime | None = None  # the source's regime (claims/regime.py); None: not yet stated
    # The design analysis of its parts at a study scale: design(claim, scale) -> {part id: Design}
    # (claims/design.py), run when the claim is registered; None: not yet declared.
    design: Callable[[Any, str], dict[str, Any]] | None = field(repr=False, default=None)

    def experiment_at(self, scale: str | None) -> str:
        """The experiment the claim is decided on at study scale ``scale`` (None: at init)."""
        return self.experiments.get(scale, self.experiment) if scale else self.experiment

    def rule_hash(self, scale: str | None = None) -> str:
        return rule_spec_hash(self.statement, self.experiment_at(scale), [p.spec() for p in self.parts])

    def code_hash(self) -> str:
        return hashlib.sha256(inspect.getsource(self.measure).encode()).hexdigest()[:16]

    @property
    def kind(self) -> str:
        """"init" (decided at initialisation) or "training": what the scoping rule requires (regime.REQUIRED)."""
        return "init" if self.quick else "training"

    def scoping_hash(self) -> str:
        """Hash of what scopes this claim's verdicts (``Regime.scoping_spec``: the scoping rule and
        the claim's factor declarations), registered with its rules."""
        spec = (self.regime or Regime(())).scoping_spec(self.kind)
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def decide(self, data: Any) -> dict[str, Any]:
        """Measure, apply each part's rule, derive the claim's verdict: the claims.json record."""
        got = self.measure(data)
        scale = None if self.quick else getattr(data, "scale", None)
        missing = [p.id for p in self.parts if p.id not in got]
        if missing:
            raise RuntimeError(f"claim {self.id}: measure() returned no value for parts {missing}")
        key = scale or "init"
        parts: list[dict[str, Any]] = []
        checks: list[dict[str, Any]] = []
        for p in self.parts:
            m = got[p.id]
            raw = INCONCLUSIVE if m.all_failed else p.rule.verdict(m.effect)
            away = (self.regime or Regime(())).departures(key, p.id, kind=self.kind)  # the scoping rule, every part alike
            rec = {**p.spec(), "effect": m.effect.as_dict(), "effect_text": m.effect.text(), "rule_verdict": raw,
                   "verdict": scoped(raw, away), "departures": away,
                   "p": None if m.all_failed else p.rule.p(m.effect), "trials": m.trials, "numbers": m.numbers,
                   "note": "; ".join(x for x in (m.all_failed, m.note) if x)}
            (checks if p.check else parts).append(rec)
        raw_claim, away = claim_verdict(parts)
        return {"id": self.id, "statement": self.statement, "source": self.source,
                "experiment": self.experiment_at(scale),
                "settings": self.settings, "quick": self.quick, "figure": self.figure, "studies": list(self.studies),
                "rule_verdict": raw_claim, "verdict": scoped(raw_claim, away), "departures": away,
                "regime": (self.regime or Regime(())).spec(key, self.lab(data), kind=self.kind),
                "parts": parts, "checks": checks, "rule_hash": self.rule_hash(scale), "code_hash": self.code_hash(),
                "scoping_hash": self.scoping_hash()}

    def lab(self, data: Any) -> dict[str, str]:
        """The lab's side of the regime: read off the studies' specs, or the probe's settings."""
        if self.quick:
            return probe_settings(getattr(data, "probe", {}) or {})

        specs = {n: study_preset(n, data.scale) for n in self.studies}
        return merge_settings({n: lab_settings(s.base, s.axes, len(s.seeds)) for n, s in specs.items()})


def rule_spec_hash(statement: str, experiment: str, parts: list[dict[str, Any]]) -> str:
    """The rule hash of a claim from its written-down specs (``Part.spec`` of each part): what
    :meth:`Claim.rule_hash` computes, and what a registration file is checked against
    (``claims/registration.py``), so that either can be recomputed from the text alone."""
    spec = {"statement": statement, "experiment": experiment, "parts": parts}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


# Every claim by id, quick ones first; ``--only`` picks from it. Filled once, by the catalogue.
CLAIMS: Registry[Claim] = Registry("claim", "--only", catalogue="normlab.claims.catalogue")


def claim(**kw: Any) -> Callable[[Callable[[Any], dict[str, Measured]]], Claim]:
    """Turn the decorated ``measure(data) -> {part id: Measured}`` into a :class:`Claim`.
    Nothing is registered here: ``claims/catalogue/`` adds every claim its modules define
    to :data:`CLAIMS`."""

    def deco(fn: Callable[[Any], dict[str, Measured]]) -> Claim:
        ids = [p.id for p in kw["parts"]]
        if len(set(ids)) != len(ids):
            raise ValueError(f"claim {kw['id']}: duplicate part ids {ids}")
        return Claim(measure=fn, **{**kw, "parts": tuple(kw["parts"]), "studies": tuple(kw.get("studies", ())),
                                    "experiments": dict(kw.get("experiments", {}))})

    return deco


def claim_verdict(parts: list[dict[str, Any]], holm: bool = False) -> tuple[str, list[str]]:
    """(the rule's verdict of the claim, the departures that scope it) from its part records.

    The claim's verdict rests on the parts inside the source's regime; only when none is inside
    does it rest on all of them, and then it is scoped to the lab's settings. ``holm``: a part
    that does not survive the Holm adjustment (``holm_ok`` False) counts as inconclusive.
    """
    parts = [x for x in parts if x.get("verdict") != DESCRIPTIVE]  # measured, never decided
    if not parts:
        return DESCRIPTIVE, []
    inside = [x for x in parts if not x.get("departures")]
    # (a claims.json from before regimes has no departures and no rule_verdict: its verdicts are the rules')
    raw = combine([INCONCLUSIVE if holm and x.get("holm_ok") is False else x.get("rule_verdict", x["verdict"])
                   for x in (inside or parts)])
    return raw, ([] if inside else sorted({f for x in parts for f in x.get("departures", [])}))


def resting_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parts a claim's verdict rests on (see :func:`claim_verdict`)."""
    parts = [x for x in parts if x.get("verdict") != DESCRIPTIVE]
    return [x for x in parts if not x.get("departures")] or parts


def describe(records: list[dict[str, Any]], ids: set[str]) -> int:
    """Mark the parts ``ids`` ("claim/part") of ``records`` descriptive, as their registration
    says (issue 40: a part whose design cannot decide at the level the catalogue asks is
    registered as descriptive, with no verdict): the effect and its interval stay; the verdict
    becomes "descriptive" and the p-value None, so no Holm family counts it and no claim's
    verdict rests on it; each claim's verdict is derived again from its other parts. Returns the
    parts marked."""
    n = 0
    for r in records:
        hit = False
        for p in r["parts"]:
            if f"{r['id']}/{p['id']}" in ids:
                p.update(descriptive=True, rule_verdict=DESCRIPTIVE, verdict=DESCRIPTIVE, p=None)
                n, hit = n + 1, True
        if hit:
            raw, away = claim_verdict(r["parts"])
            r["rule_verdict"], r["verdict"], r["departures"] = raw, scoped(raw, away), away
    return n
