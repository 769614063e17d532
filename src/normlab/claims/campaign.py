"""A confirmatory campaign: the catalogue's training claims confirmed in registered stages, longer
than one sitting, resumed from its stores whenever the command is started again (issue 40).

The plan is a TOML file, committed before any of its data (``docs/evidence/campaign/plan.toml``)::

    name = "campaign-1"
    scale = "cpu"
    first_seed = 7000          # every study's seeds start here: seeds no earlier run has seen
    budget_core_hours = 16     # 8 hours of 2 cores
    workers = 2
    [tolerances]               # the settling rule's effect tolerance, "claim/part" or "claim"
    "hybridnorm-depth/trains" = 0.15
    [[stage]]
    name = "depth"             # its outputs: OUT/depth; published: PLAN_DIR/depth
    registration = "registration/campaign-1a.json"   # relative to the plan's folder
    claims = ["hybridnorm-depth", "deepnorm-depth"]
    estimate_core_hours = 1.5  # from the cost table (campaign.md says how it was measured)
    full_grid_core_hours = 4.0 # the same studies, every run at the longest stage
    why = "..."
    [stage.settle]             # study -> nested horizons (claims/settling.py)
    "new-methods" = [200, 400, 1000]

``normlab campaign register PLAN --stage NAME`` writes the registration file a stage names (every
stage naming that file: their claims, the studies' stages, the tolerances and the first seed),
which is committed before the stage runs. ``normlab campaign run PLAN`` runs each stage not yet
ended, in order: one registered ``normlab claims`` run into OUT/STAGE (it resumes from OUT/STAGE's
stores and cache), its CPU time measured, then its claims.json, claims.md, index.html and figures
copied to PLAN_DIR/STAGE and campaign.md rewritten (by the command: ``claims/campaign_page.py``). Each launch
appends to PLAN_DIR/campaign.jsonl (this module is its only writer): ``start``, then ``end`` or
``stopped`` with the wall and CPU seconds of the launch. A stage whose registration's measuring
code differs from this checkout's is refused before it starts, naming the commit to run from.
"""

from __future__ import annotations

import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from normlab.claims.folder import CLAIMS_JSON, CLAIMS_MD, FIGURES, HISTORY, INDEX
from normlab.core.errors import ConfigError, UserError
from normlab.core.fsutil import append_jsonl, read_jsonl

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

RECORD = "campaign.jsonl"     # every launch of every stage: start, end or stopped (this module writes it)
PAGE = "campaign.md"          # the plan, each stage's cost and verdicts (claims/campaign_page.py writes it)
PUBLISHED = (CLAIMS_JSON, CLAIMS_MD, INDEX, FIGURES, HISTORY)  # what a finished stage publishes
START, END, STOPPED = "start", "end", "stopped"
PLAN_KEYS = {"name", "scale", "first_seed", "budget_core_hours", "workers", "tolerances", "stage", "description"}
STAGE_KEYS = {"name", "registration", "claims", "settle", "estimate_core_hours", "full_grid_core_hours", "why", "scale",
              "first_seed"}


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
    return Stage(name, str(d["registration"]), list(claims), {str(k): list(v) for k, v in settle.items()},
                 float(d.get("estimate_core_hours", 0.0)), d.get("full_grid_core_hours"), str(d.get("why", "")),
                 scale, first)


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
    return Plan(path, str(d.get("name", path.parent.name)), str(d.get("scale", "cpu")), int(d["first_seed"]),
                float(budget), int(d.get("workers", 2)), stages, {str(k): float(v) for k, v in tol.items()},
                str(d.get("description", "")))


def registration_doc(plan: Plan, file: str) -> dict[str, Any]:
    """The registration document of the stages that name ``file``: their claims (with designs,
    every training part required to have one), the studies' stages, the tolerances of those
    claims and the plan's first seed."""
    from normlab.claims.registration import build

    stages = [s for s in plan.stages if s.registration == file]
    scales = {plan.scale_of(s) for s in stages}
    if len(scales) > 1:
        raise UserError(f"{plan.path}: the stages registered in {file} have scales {', '.join(sorted(scales))}; "
                        "give each scale its own registration file")
    firsts = {plan.first_seed_of(s) for s in stages}
    if len(firsts) > 1:
        raise UserError(f"{plan.path}: the stages registered in {file} start their seeds at "
                        f"{', '.join(map(str, sorted(firsts)))}; give each its own registration file")
    claims = list(dict.fromkeys(c for s in stages for c in s.claims))
    settle: dict[str, list[int]] = {}
    for s in stages:
        for study, hs in s.settle.items():
            if settle.setdefault(study, hs) != hs:
                raise UserError(f"{plan.path}: study {study} is staged {settle[study]} in one stage and {hs} in "
                                f"another of the same registration; give it one set of stages")
    tol = {k: v for k, v in plan.tolerances.items() if k.split("/")[0] in claims}
    return build(scales.pop(), claims, first_seed=firsts.pop(), every_design=True, stages=settle, tolerances=tol)


def records(plan: Plan) -> list[dict[str, Any]]:
    """PLAN_DIR/campaign.jsonl's lines (none before the first launch)."""
    path = plan.folder / RECORD
    return read_jsonl(path) if path.exists() else []


def ended(plan: Plan) -> set[str]:
    return {r["stage"] for r in records(plan) if r.get("event") == END}


def used_core_hours(plan: Plan, stage: str | None = None) -> float:
    """CPU hours of the launches recorded (of one stage, or of all)."""
    return sum(float(r.get("cpu_s", 0.0)) for r in records(plan)
               if r.get("event") in (END, STOPPED) and stage in (None, r["stage"])) / 3600.0


def _cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (the training workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def publish_stage(plan: Plan, s: Stage, out: Path) -> Path:
    """Copy a finished stage's outputs from OUT/STAGE to PLAN_DIR/STAGE (replacing an earlier copy)."""
    src, dst = out / s.name, plan.folder / s.name
    if not (src / CLAIMS_JSON).exists():
        raise UserError(f"{src}: no {CLAIMS_JSON}; the stage has not finished there (run it again)")
    tmp = plan.folder / f".{s.name}.publishing"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in PUBLISHED:
        if (src / name).is_dir():
            shutil.copytree(src / name, tmp / name)
        elif (src / name).exists():
            shutil.copy2(src / name, tmp / name)
    if dst.exists():
        shutil.rmtree(dst)
    tmp.rename(dst)  # a reader sees the old copy or the new, never half of one
    return dst


def run_stage(plan: Plan, s: Stage, out: Path, quiet: bool = False, over_budget: bool = False) -> None:
    """One stage: budget check, its registered claims run (resuming OUT/STAGE), the record."""
    from normlab.claims import run_claims
    from normlab.claims.options import ClaimsRun

    reg = plan.registration_path(s)
    if not reg.exists():
        raise UserError(f"stage {s.name}: its registration {reg} is not written yet; write it (normlab campaign "
                        f"register {plan.path} --stage {s.name}), commit it, and run again")
    used = used_core_hours(plan)
    left = plan.budget_core_hours - used
    if not over_budget and s.estimate_core_hours - used_core_hours(plan, s.name) > left:
        raise UserError(f"stage {s.name}: its estimate ({s.estimate_core_hours:.2f} core-h) exceeds what is left of "
                        f"the budget ({left:.2f} of {plan.budget_core_hours:g} core-h); pass --over-budget to run it")
    run = ClaimsRun(quick=False, out=out / s.name, only=list(s.claims), scale=plan.scale_of(s), workers=plan.workers,
                    registration=plan.registration_path(s), progress=not quiet, stages=dict(s.settle))
    t0, c0 = time.time(), _cpu_s()
    append_jsonl(plan.folder / RECORD, {"event": START, "stage": s.name, "at": t0, "out": str(out / s.name)})
    try:
        run_claims(run)
    except BaseException as e:
        append_jsonl(plan.folder / RECORD, {"event": STOPPED, "stage": s.name, "at": time.time(),
                                            "wall_s": round(time.time() - t0, 1), "cpu_s": round(_cpu_s() - c0, 1),
                                            "why": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"})
        raise
    publish_stage(plan, s, out)
    append_jsonl(plan.folder / RECORD, {"event": END, "stage": s.name, "at": time.time(),
                                        "wall_s": round(time.time() - t0, 1), "cpu_s": round(_cpu_s() - c0, 1)})


def run_campaign(plan: Plan, out: Path, only: list[str] | None = None, quiet: bool = False,
                 over_budget: bool = False, after: Callable[[Plan], None] | None = None) -> list[str]:
    """Run every stage not yet ended (or those named), in the plan's order; returns the stages run.
    ``after(plan)`` is called after each stage, and after a stage that stopped (the command
    rewrites campaign.md there: ``claims/campaign_page.py``)."""
    done, ran = ended(plan), []
    todo = [plan.stage(n) for n in only] if only else [s for s in plan.stages if s.name not in done]
    for s in todo:
        if s.name in done:
            continue
        try:
            run_stage(plan, s, out, quiet, over_budget)
        finally:
            if after is not None:
                after(plan)
        ran.append(s.name)
    return ran


__all__ = ["PAGE", "RECORD", "Plan", "Stage", "ended", "load_plan", "publish_stage", "records", "registration_doc",
           "run_campaign", "run_stage", "used_core_hours"]
