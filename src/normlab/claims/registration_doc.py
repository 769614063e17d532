"""The registration document: what ``normlab claims register`` (and ``normlab campaign register``)
writes, built from the claims, their designs and their studies (``claims/registration.py`` reads
and checks a committed one). Nothing in it depends on the clock: the commit that adds the file is
what dates it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from normlab.claims import measuring_code
from normlab.claims.claim import CLAIMS
from normlab.claims.decision import decision_code_hash
from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_text
from normlab.study.presets import SCALES, study_preset

# 2: seeds per study, quick seeds, scoping, decision code; 3: measuring code (a file of 1 or 2 still
# loads: its parts are marked registered without measuring code)
FORMAT, VERSION = "normlab-claims-registration", 3


# A registered part's keys that are not its rule: its hash, and its design analysis (recorded
# beside the rule, not hashed into it: the rule hash is the claim's as the run computes it).
NOT_RULE = ("part_hash", "design", "descriptive")


def _sha(text: str | bytes, n: int = 16) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()[:n]


def part_hash(spec: dict[str, Any]) -> str:
    """Hash of one part's spec (``Part.spec``: id, asserts, quantity, rule, rule text, why)."""
    return _sha(json.dumps(spec, sort_keys=True))


def study_spec(name: str, scale: str, seeds: list[int] | None = None, stages: list[int] | None = None) -> Any:
    """Study preset ``name`` at ``scale``, with ``seeds`` instead of the preset's (a registration's),
    and the nested horizons ``stages`` its claims settle over (they supersede the preset's
    extend_stalled_to: ``claims/settling.py``). Without ``seeds``, inside ``design.at_seeds(n)``:
    n seeds (the count a design analysis plans), else the preset's. A first stage below the
    preset's horizon becomes its train.steps (the runs stop there first)."""
    from normlab.claims.design import planned_seeds

    n = planned_seeds()
    if seeds is None and n is not None:
        seeds = list(range(n))
    spec = study_preset(name, scale)
    if seeds is not None:
        spec = dataclasses.replace(spec, seeds=list(seeds))
    if not stages:
        return spec
    base = spec.base
    if stages[0] < spec.base_data().get("train", {}).get("steps", stages[0]):
        # Staged from before the preset's horizon (a costly study first read at 200 steps, then
        # resumed to its own 400): every run stops first at the first stage, as a stage asks.
        base = copy.deepcopy(base)
        base.setdefault("train", {})["steps"] = stages[0]
    return dataclasses.replace(spec, base=base, stages=list(stages), extend_stalled_to=None)


def shifted(seeds: list[int], first: int | None) -> list[int]:
    """As many seeds as ``seeds`` from ``first`` on (None: ``seeds`` themselves)."""
    return list(seeds) if first is None else [first + i for i in range(len(seeds))]


def study_ids(name: str, scale: str, seeds: list[int] | None = None, stages: list[int] | None = None) -> dict[str, Any]:
    """What identifies study ``name`` at ``scale`` (with ``seeds``, else the preset's): ``spec_hash``,
    the first 16 hex digits of sha256 of the STORE/spec.json a store of it is created with
    (``sha256sum STORE/spec.json``), ``trials_hash`` over its sorted trial ids (each id hashes a
    trial's whole resolved config, so a changed default shows up too), its ``seeds``, and its
    ``stages`` when it has some (a staged study's spec.json names them, so its spec hash does too)."""

    spec = study_spec(name, scale, seeds, stages)
    ids = sorted(t.id for t in spec.trials())
    got = {"spec_hash": _sha(json.dumps(spec.to_json_data(), indent=2, sort_keys=True)),
           "trials_hash": _sha("\n".join(ids)), "trials": len(ids), "seeds": list(spec.seeds)}
    if stages:
        got["stages"] = list(stages)
    return got


def claim_entry(c: Any, scale: str, found: dict[str, Any] | None = None,
                descriptive: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One claim as registered (the rule hash at the scale the claim is decided at: None for a
    quick claim, as ``Claim.decide`` uses it), with each part's design analysis (``found``, else
    :func:`designs`; {} where only the hashes are wanted: the designs simulate)."""
    s = None if c.quick else scale
    found = designs(c, scale) if found is None else found
    return {"statement": c.statement, "source": c.source, "experiment": c.experiment_at(s), "quick": c.quick,
            "studies": list(c.studies), "rule_hash": c.rule_hash(s), "scoping_hash": c.scoping_hash(),
            "parts": [{**p.spec(), "part_hash": part_hash(p.spec()),
                       "design": found[p.id].record() if p.id in found else None,
                       **({"descriptive": True} if f"{c.id}/{p.id}" in descriptive else {})} for p in c.parts],
            "measuring_code": {"hash": measuring_code.measuring_hash(c), "set": measuring_code.set_name(c)}}


def designs(c: Any, scale: str) -> dict[str, Any]:
    """{part id: Design} of ``c`` at ``scale``: its declared ``Claim.design``; for a training claim
    that declares none, the design from the lab's seen data (``claims/design_seen.py``: the parts
    with a seen prior at this scale); else {}. Inside ``design_seen.at_quick_seeds`` (a stage that
    registers its probe seeds) a quick claim's parts are planned at those seeds from their seen
    probe values; a part with none keeps its declared design (planned at its own, stated seeds)."""
    from normlab.claims.design_seen import planned_quick_seeds, seen_design

    declared = {} if c.design is None else dict(c.design(c, scale))
    if c.quick:
        return declared | (seen_design(c, scale) if planned_quick_seeds() is not None else {})
    return declared if c.design is not None else seen_design(c, scale)


def require_designs(chosen: list[Any], scale: str, every: bool = False,
                    found: dict[str, dict[str, Any]] | None = None, descriptive: frozenset[str] = frozenset()) -> None:
    """Refuse, before anything is written, a registration with a part that cannot decide whatever
    the data (its design's one line: the part, the plan, the best it could reach and the fix).
    A declared design refuses always; one from seen data (an automatic exploratory estimate) only
    with ``every``, which also refuses a part with no design at all (a quick claim that declares
    none, a training part with neither a declared design nor a seen prior): a campaign's
    registration. ``found``: {claim id: designs} already computed. ``descriptive``: parts
    ("claim/part") registered as descriptive, which need not decide."""
    got = found if found is not None else {c.id: designs(c, scale) for c in chosen}
    undecidable = [d.text() for c in chosen for pid, d in got[c.id].items()
                   if not d.decidable and (every or c.design is not None) and f"{c.id}/{pid}" not in descriptive]
    if undecidable:
        more = f" (and {len(undecidable) - 1} more part(s) that cannot decide)" if len(undecidable) > 1 else ""
        raise UserError(f"{undecidable[0]}{more}; redesign it, or register it as descriptive (no verdict)")
    if every:
        missing = [f"{c.id}/{p.id}" for c in chosen for p in c.parts
                   if not p.check and p.id not in got[c.id] and f"{c.id}/{p.id}" not in descriptive]
        if missing:
            raise UserError(f"--require-designs: {', '.join(missing)} declare no design analysis (Claim.design) and "
                            "have no seen-data prior (claims/design_seen.py); declare one or register without "
                            "--require-designs")


# the quick measurements' seed count when no plan names one (the presets' probe)
QUICK_SEEDS = 5


def document_hash(doc: dict[str, Any]) -> str:
    return _sha(json.dumps({k: v for k, v in doc.items() if k != "document_hash"}, sort_keys=True))


def choose(scale: str, only: list[str] | None = None, quick: bool = False) -> list[Any]:
    """The claims a registration (or a run) with these options covers; UserError as the run gives."""

    chosen = [CLAIMS.get(i, "--only") for i in only] if only else [c for _, c in CLAIMS.items()]
    chosen = [c for c in chosen if c.quick or not quick]
    if scale not in SCALES:
        lacking = [c.id for c in chosen if scale not in c.experiments]
        have = sorted(i for i, c in CLAIMS.items() if scale in c.experiments)
        if lacking:
            raise UserError(f"--scale={scale}: only claims {', '.join(have) or '(none)'} have this scale; "
                            "name them with --only")
    return chosen


def build(scale: str, only: list[str] | None = None, quick: bool = False, first_seed: int | None = None,
          quick_seeds: int = QUICK_SEEDS, every_design: bool = False, stages: dict[str, list[int]] | None = None,
          tolerances: dict[str, float] | None = None, seeds: int | None = None,
          sequential: dict[str, Any] | None = None, design_level: float | None = None,
          descriptive: list[str] | None = None, plan_quick: bool = False) -> dict[str, Any]:
    """The registration document of the claims ``normlab claims`` with these options decides;
    ``first_seed``: every study's seeds and the ``quick_seeds`` seeds of the quick measurements
    start there (unseen seeds for a confirmatory run), else the presets' seeds and 0, 1, ...;
    ``stages`` and ``tolerances``: the settling rule; ``seeds`` and ``sequential``: a
    group-sequential design; ``design_level``: the level the designs ask; ``descriptive``: the
    parts registered with no verdict; ``plan_quick``: the quick claims designed at ``quick_seeds``
    (:func:`document`)."""
    return document(choose(scale, only, quick), scale, first_seed, quick_seeds, every_design, stages, tolerances,
                    seeds, sequential, design_level, descriptive, plan_quick)


def document(chosen: list[Any], scale: str, first_seed: int | None = None, quick_seeds: int = QUICK_SEEDS,
             every_design: bool = False, stages: dict[str, list[int]] | None = None,
             tolerances: dict[str, float] | None = None, seeds: int | None = None,
             sequential: dict[str, Any] | None = None, design_level: float | None = None,
             descriptive: list[str] | None = None, plan_quick: bool = False) -> dict[str, Any]:
    """The registration document of the claims ``chosen`` at ``scale`` (seeds as :func:`build`);
    refused first when a part cannot decide (:func:`require_designs`). ``stages`` (study ->
    horizons) and ``tolerances`` ("claim/part" or "claim" -> effect tolerance) register the
    settling rule of the staged studies' parts (``claims/settling.py``). ``seeds``: every study
    registers that many seeds instead of its preset's count (a group-sequential stage's largest
    look), and ``sequential`` its looks, level and weights (``claims/sequential_stage.py``).
    ``design_level``: every design analysis asks a decision at that level (``claims/design.py``'s
    ``at_level``: the level the catalogue's Holm will ask), recorded as such; None: the rules' 0.05.
    ``descriptive``: parts ("claim/part") registered with no verdict (``claim.describe``): a part
    whose design cannot decide at that level is measured and shown, never decided or adjusted.
    ``plan_quick``: each quick claim's design is planned at ``quick_seeds`` probe seeds from its
    seen probe values (``design_seen.at_quick_seeds``: a campaign stage's ``quick_seeds``)."""
    from normlab.claims.design import at_level, at_seeds
    from normlab.claims.design_seen import at_quick_seeds

    described = frozenset(descriptive or ())
    valid = [f"{c.id}/{p.id}" for c in chosen for p in c.parts if not p.check]
    stray = sorted(described - set(valid))
    if stray:
        raise UserError(f"descriptive: {stray[0]} is not a part of the chosen claims; valid: {', '.join(valid)}")
    with contextlib.ExitStack() as planned:  # the designs ask the level and plan the seeds registered
        if design_level is not None:
            planned.enter_context(at_level(design_level))
        if seeds is not None:
            planned.enter_context(at_seeds(seeds))
        if plan_quick:
            planned.enter_context(at_quick_seeds(quick_seeds))
        found = {c.id: designs(c, scale) for c in chosen}
    require_designs(chosen, scale, every_design, found, described)
    names = sorted({n for c in chosen if not c.quick for n in c.studies})
    stages = {n: list(v) for n, v in (stages or {}).items()}
    stray = sorted(set(stages) - set(names))
    if stray:
        raise UserError(f"stages: {', '.join(stray)} is not a study of the chosen claims ({', '.join(names) or 'none'})")
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "scale": scale,
                           "claims": {c.id: claim_entry(c, scale, found[c.id], described) for c in chosen},
                           "studies": {n: study_ids(n, scale, shifted(study_preset(n, scale).seeds if seeds is None
                                                                      else list(range(seeds)), first_seed),
                                                    stages.get(n)) for n in names},
                           "decision_code": decision_code_hash(), "measuring_code": measuring_code.section(chosen)}
    if tolerances:
        ids = {c.id for c in chosen} | {f"{c.id}/{p.id}" for c in chosen for p in c.parts}
        unknown = sorted(set(tolerances) - ids)
        if unknown:
            raise UserError(f"tolerances: {unknown[0]} names no chosen claim or part (write CLAIM or CLAIM/PART)")
        doc["tolerances"] = {k: float(v) for k, v in sorted(tolerances.items())}
    if any(c.quick for c in chosen):
        doc["quick_seeds"] = shifted(list(range(quick_seeds)), first_seed)
    if sequential is not None:
        doc["sequential"] = sequential
    if design_level is not None:
        doc["design_level"] = design_level
    doc["document_hash"] = document_hash(doc)
    return doc


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def write(path: str | Path, doc: dict[str, Any], force: bool = False) -> bool:
    """Write ``doc`` to ``path`` atomically; False when the file already holds exactly it. A file
    holding something else is refused unless ``force`` (a committed registration is evidence)."""

    path = Path(path)
    text = dumps(doc)
    if path.exists():
        try:
            old = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{path}: cannot read the file there ({e}); choose another --out") from None
        if old == text:
            return False
        if not force:
            raise UserError(f"{path}: holds a different registration; pass --force to replace it (the old "
                            "one stays in git history), or choose another --out")
    atomic_write_text(path, text)
    return True


__all__ = ["FORMAT", "NOT_RULE", "VERSION", "build", "choose", "claim_entry", "designs", "document", "document_hash",
           "dumps", "part_hash", "require_designs", "shifted", "study_ids", "study_spec", "write"]
