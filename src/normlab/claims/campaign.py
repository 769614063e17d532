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
    [stage.sequential]         # optional: seeds in looks, added only where a part is open
    looks = [4, 6, 8]          # (claims/sequential_stage.py); alpha: what a part must pass to stop
    alpha = 2.5e-4

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
import time
from pathlib import Path
from typing import Any, Callable

from normlab.claims import sequential_stage
from normlab.claims.campaign_plan import Plan, Stage
from normlab.claims.folder import CLAIMS_JSON, CLAIMS_MD, FIGURES, HISTORY, INDEX
from normlab.core.errors import UserError
from normlab.core.fsutil import append_jsonl, read_jsonl

RECORD = "campaign.jsonl"     # every launch of every stage: start, end or stopped (this module writes it)
PAGE = "campaign.md"          # the plan, each stage's cost and verdicts (claims/campaign_page.py writes it)
PUBLISHED = (CLAIMS_JSON, CLAIMS_MD, INDEX, FIGURES, HISTORY)  # what a finished stage publishes
START, END, STOPPED = "start", "end", "stopped"

def registration_doc(plan: Plan, file: str) -> dict[str, Any]:
    """The registration document of the stages that name ``file``: their claims (with designs,
    every training part required to have one), the studies' stages, the tolerances of those
    claims and the plan's first seed."""
    from normlab.claims.registration import build
    from normlab.claims.registration_doc import QUICK_SEEDS

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
    seq = {s.sequential for s in stages}
    if len(seq) > 1:
        raise UserError(f"{plan.path}: the stages registered in {file} differ in their sequential looks; give each "
                        "its own registration file")
    sp = seq.pop()
    quick = {s.quick_seeds for s in stages}
    if len(quick) > 1:
        raise UserError(f"{plan.path}: the stages registered in {file} differ in their quick_seeds; give each its "
                        "own registration file")
    qs = quick.pop()
    # the designs ask the level of the decision: the plan's (the catalogue's Holm), or in a sequential
    # stage its last look's share of the stage's alpha (a floor on the power over all its looks)
    level = plan.design_level if sp is None else sp.weights()[-1] * sp.alpha
    return build(scales.pop(), claims, first_seed=firsts.pop(), every_design=True, stages=settle, tolerances=tol,
                 seeds=None if sp is None else sp.looks[-1],
                 sequential=None if sp is None else sequential_stage.spec(sp), design_level=level,
                 descriptive=sorted({x for s in stages for x in s.descriptive}),
                 quick_seeds=QUICK_SEEDS if qs is None else qs, plan_quick=qs is not None)


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
    def run_at(counts: dict[str, int] | None = None) -> None:
        run_claims(ClaimsRun(quick=False, out=out / s.name, only=list(s.claims), scale=plan.scale_of(s),
                             workers=plan.workers, registration=plan.registration_path(s), progress=not quiet,
                             stages=dict(s.settle), seed_counts=counts or {}))

    t0, c0 = time.time(), _cpu_s()
    append_jsonl(plan.folder / RECORD, {"event": START, "stage": s.name, "at": t0, "out": str(out / s.name)})
    try:
        if s.sequential is None:
            run_at()
        else:
            from normlab.claims.claim import CLAIMS

            sequential_stage.run_looks(out / s.name, s.sequential,
                                       {c: list(CLAIMS.get(c, "claims").studies) for c in s.claims}, run_at)
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


__all__ = ["PAGE", "RECORD", "ended", "publish_stage", "records", "registration_doc", "run_campaign", "run_stage",
           "used_core_hours"]
