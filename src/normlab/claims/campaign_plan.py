"""A campaign's plan (``normlab campaign``, ``claims/campaign.py``): the TOML file read and checked,
every error naming its key (``plan.first_seed``, ``stage[1].claims``, ``stage[0].sequential.looks``)
before anything runs; ``claims/campaign.py`` shows the form and runs it."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.claims import sequential_stage
from normlab.core.errors import ConfigError, UserError
from normlab.stats.sequential import SeedPlan

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

PLAN_KEYS = {"name", "scale", "first_seed", "budget_core_hours", "workers", "tolerances", "stage", "description",
             "design_level"}
STAGE_KEYS = {"name", "registration", "claims", "settle", "estimate_core_hours", "full_grid_core_hours", "why", "scale",
              "first_seed", "sequential", "descriptive", "quick_seeds"}


@dataclass(frozen=True)
class Stage:
    name: str
    registration: str                     # relative to the plan's folder
    claims: list[str]
    settle: dict[str, list[int]] = field(default_factory=dict)
    estimate_core_hours: float = 0.0
    full_grid_core_hours: float | None = None
    why: str = ""
    scale: str | None = None              # None: the plan's (e.g. "seed": a source's own settings)
    first_seed: int | None = None         # None: the plan's (a stage rerun on fresh seeds sets its own)
    sequential: SeedPlan | None = None    # seeds in looks (claims/sequential_stage.py); None: all at once
    descriptive: list[str] = field(default_factory=list)  # "claim/part" registered with no verdict
    quick_seeds: int | None = None        # probe seeds of its quick claims, designed from seen values; None: 5, as declared


@dataclass(frozen=True)
class Plan:
    path: Path
    name: str
    scale: str
    first_seed: int
    budget_core_hours: float
    workers: int
    stages: list[Stage]
    tolerances: dict[str, float] = field(default_factory=dict)
    description: str = ""
    design_level: float | None = None  # the level registrations ask designs at (claims/design.py's at_level)

    @property
    def folder(self) -> Path:
        return self.path.parent

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise UserError(f"--stage {name}: no such stage in {self.path}; choose one of "
                        f"{', '.join(s.name for s in self.stages)}")

    def registration_path(self, s: Stage) -> Path:
        return self.folder / s.registration

    def scale_of(self, s: Stage) -> str:
        return s.scale or self.scale

    def first_seed_of(self, s: Stage) -> int:
        return self.first_seed if s.first_seed is None else s.first_seed


def _unknown(where: str, got: dict[str, Any], valid: set[str]) -> None:
    extra = sorted(set(got) - valid)
    if extra:
        raise ConfigError(f"{where}.{extra[0]}", got[extra[0]], f"unknown key; valid: {', '.join(sorted(valid))}")


def _stage(i: int, d: Any) -> Stage:
    where = f"stage[{i}]"
    if not isinstance(d, dict):
        raise ConfigError(where, d, "each [[stage]] is a table with name, registration and claims")
    _unknown(where, d, STAGE_KEYS)
    for k in ("name", "registration", "claims"):
        if k not in d:
            raise ConfigError(f"{where}.{k}", None, "required")
    name = d["name"]
    if not isinstance(name, str) or not name or "/" in name:
        raise ConfigError(f"{where}.name", name, "a short folder name without '/'")
    claims = d["claims"]
    if not isinstance(claims, list) or not claims or not all(isinstance(c, str) for c in claims):
        raise ConfigError(f"{where}.claims", claims, "a non-empty list of claim ids")
    from normlab.claims.claim import CLAIMS

    for c in claims:
        CLAIMS.get(c, f"{where}.claims")  # an unknown id fails listing the valid ones
    settle = d.get("settle", {})
    if not isinstance(settle, dict) or not all(isinstance(v, list) and v and all(isinstance(h, int) for h in v)
                                               for v in settle.values()):
        raise ConfigError(f"{where}.settle", settle, "a table of study = [horizons], e.g. \"stability-map\" = "
                          "[200, 400, 1000]")
    for k in ("estimate_core_hours", "full_grid_core_hours"):
        v = d.get(k)
        if v is not None and not (isinstance(v, (int, float)) and v >= 0):
            raise ConfigError(f"{where}.{k}", v, "core-hours, a number >= 0")
    scale = d.get("scale")
    if scale is not None and not isinstance(scale, str):
        raise ConfigError(f"{where}.scale", scale, "a scale name, e.g. \"seed\" (default: the plan's)")
    first = d.get("first_seed")
    if first is not None and not (isinstance(first, int) and first >= 0):
        raise ConfigError(f"{where}.first_seed", first, "an integer >= 0 (default: the plan's)")
    looks = sequential_stage.parse(where, d.get("sequential"))
    quick = [c for c in claims if CLAIMS.get(c, f"{where}.claims").quick]
    if looks is not None and quick:
        raise ConfigError(f"{where}.sequential", d.get("sequential"), f"looks add seeds to training studies; "
                          f"{', '.join(quick)} {'is a quick claim' if len(quick) == 1 else 'are quick claims'}: "
                          "give it a stage of its own")
    qs = d.get("quick_seeds")
    if qs is not None and not (isinstance(qs, int) and not isinstance(qs, bool) and qs >= 3 and quick):
        raise ConfigError(f"{where}.quick_seeds", qs, "the probe seeds of the stage's quick claims, an integer >= 3 "
                          "(the stage needs a quick claim)" if quick else "only for a stage with quick claims; "
                          "its claims are all training claims")
    described = d.get("descriptive", [])
    parts = [f"{c}/{p.id}" for c in claims for p in CLAIMS.get(c, f"{where}.claims").parts if not p.check]
    if not isinstance(described, list) or not all(isinstance(x, str) for x in described):
        raise ConfigError(f"{where}.descriptive", described, "a list of \"claim/part\" registered with no verdict")
    for x in described:
        if x not in parts:
            raise ConfigError(f"{where}.descriptive", x, f"a part of the stage's claims; valid: {', '.join(parts)}")
    return Stage(name, str(d["registration"]), list(claims), {str(k): list(v) for k, v in settle.items()},
                 float(d.get("estimate_core_hours", 0.0)), d.get("full_grid_core_hours"), str(d.get("why", "")),
                 scale, first, looks, list(described), qs)


def load_plan(path: str | Path) -> Plan:
    """Read and check a campaign plan; a wrong value is a ConfigError naming it."""
    path = Path(path)
    try:
        d = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such campaign plan; write one (docs/evidence/campaign/plan.toml shows the form)") \
            from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UserError(f"{path}: cannot read it as a TOML campaign plan ({e})") from None
    _unknown("plan", d, PLAN_KEYS)
    stages = [_stage(i, s) for i, s in enumerate(d.get("stage", []))]
    if not stages:
        raise ConfigError("plan.stage", None, "list at least one [[stage]]")
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ConfigError("plan.stage.name", names, "stage names must be distinct (each is a folder)")
    tol = d.get("tolerances", {})
    if not isinstance(tol, dict) or not all(isinstance(v, (int, float)) and v > 0 for v in tol.values()):
        raise ConfigError("plan.tolerances", tol, "a table of \"claim/part\" = tolerance > 0")
    for k in ("first_seed", "workers"):
        if not isinstance(d.get(k, 1), int) or d.get(k, 1) < (0 if k == "first_seed" else 1):
            raise ConfigError(f"plan.{k}", d.get(k), "an integer" + (" >= 0" if k == "first_seed" else " >= 1"))
    budget = d.get("budget_core_hours", 16.0)
    if not isinstance(budget, (int, float)) or budget <= 0:
        raise ConfigError("plan.budget_core_hours", budget, "core-hours > 0, e.g. 16 (8 hours of 2 cores)")
    if "first_seed" not in d:
        raise ConfigError("plan.first_seed", None, "required: the first of the seeds no earlier run has seen")
    level = d.get("design_level")
    if level is not None and (not isinstance(level, (int, float)) or isinstance(level, bool) or not 0 < level <= 0.05):
        raise ConfigError("plan.design_level", level, "a level in (0, 0.05]: what the catalogue's Holm asks of a "
                          "part, e.g. 2.5e-4 (0.05 / 200 p-values)")
    return Plan(path, str(d.get("name", path.parent.name)), str(d.get("scale", "cpu")), int(d["first_seed"]),
                float(budget), int(d.get("workers", 2)), stages, {str(k): float(v) for k, v in tol.items()},
                str(d.get("description", "")), None if level is None else float(level))


__all__ = ["PLAN_KEYS", "STAGE_KEYS", "Plan", "Stage", "load_plan"]
