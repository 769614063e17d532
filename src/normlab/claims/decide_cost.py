"""What deciding the undecided parts would cost, in core-hours measured on the campaign's own runs
(issue 40: at least 80% of the registered parts decided; the rest naming their limit).

``claims/decided.py`` names each undecided part's limit; this module prices it from what the
part's own trials cost, read from their run folders (seconds per step = a run's wall time over
its steps, one thread a run, so a core-second a second). Per part, a **lower bound**:

* **seeds**: the seeds a side it lacks (``seeds_needed`` minus the seeds it has) times its
  trials per seed, each trained to the part's horizon. The count assumes the effect holds and
  pools the new seeds with the old; both make it a floor. Pooling is also not a valid test
  here: the first look already spent the part's alpha (its run was read at the full level), so
  a valid route is a fresh-seed stage registered with a group-sequential rule, priced apart
  (``fresh_core_hours``: all ``seeds_needed`` seeds a side new; still a floor, since the family
  it joins grows and a sequential design's largest look exceeds a fixed one's);
* **cost**: the same, with at least ``AFFORDABLE + 1`` seeds a side where no count was found;
* **horizon**: every trial of the part trained one more stage as long as the one it was read
  at (1000 -> 2000 steps), whether or not that settles it.

``cost_doc`` sorts the undecided parts by that floor and sums the cheapest until the share
decided reaches the target: the least the target costs beyond what has run, set beside the
budget the plan has left. ``normlab campaign cost PLAN --out OUT`` writes it to
PLAN_DIR/``COST_JSON`` (this module owns the name); the campaign page only reads it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

from normlab.claims.decided import AFFORDABLE, Readout
from normlab.core.errors import UserError

COST_JSON = "decide-cost.json"
TARGET = 0.8  # issue 40: the share of registered parts decided after the catalogue's adjustment


def step_seconds(stores: Iterable[Path]) -> dict[str, float]:
    """Trial id -> seconds a training step took (its run's wall time over its steps), for every
    finished run in the study stores ``stores`` (a store not made yet is skipped)."""
    from normlab.run.dir import RunDir
    from normlab.study.store import Store, peek

    out: dict[str, float] = {}
    for path in stores:
        if not Store.is_made(path):
            continue
        _, trials = peek(path)
        for t in trials:
            s = RunDir(t.run_dir).summary() or {}
            steps, wall = s.get("steps"), s.get("wall_time_s")
            if isinstance(steps, int) and steps > 0 and isinstance(wall, (int, float)) and wall > 0:
                out[t.id] = float(wall) / steps
    return out


def part_cost(row: Readout, rec: dict[str, Any], step_s: dict[str, float]) -> dict[str, Any]:
    """The floor on what deciding one undecided part costs (core-hours; None: its trials' costs
    were not found), and how it was counted."""
    trials = list(rec.get("trials") or [])
    effect = rec.get("effect") or {}
    n = max(int(effect.get("n_a") or 0), int(effect.get("n_b") or 0))
    per_step = [step_s[t] for t in trials if t in step_s]
    horizon = int(rec.get("horizon") or 0)
    base = {"run": row.run, "claim": row.claim, "part": row.part, "limit": row.limit, "core_hours": None}
    if not per_step or not trials or not n or not horizon:
        return {**base, "how": "its trials' costs are not in the stores read"}
    s = sum(per_step) / len(per_step)
    if row.limit == "horizon":
        hours = len(trials) * horizon * s / 3600.0
        return {**base, "core_hours": hours, "fresh_core_hours": hours,
                "how": f"{len(trials)} trials x {horizon} more steps x {s:.3f} s a step"}
    need = row.seeds_needed if row.seeds_needed is not None else AFFORDABLE + 1
    more = max(need - n, 0)
    per_seed = len(trials) / n
    seed_h = per_seed * horizon * s / 3600.0  # one more seed a side, every trial of it to the horizon
    return {**base, "core_hours": more * seed_h, "fresh_core_hours": need * seed_h,
            "how": f"{'at least ' if row.seeds_needed is None else ''}{more} more seeds a side ({need} fresh) x "
                   f"{per_seed:g} trials x {horizon} steps x {s:.3f} s a step"}


def cost_doc(rows: list[Readout], records: dict[tuple[str, str, str], dict[str, Any]],
             step_s: dict[str, float]) -> dict[str, Any]:
    """Every undecided part's floor, cheapest first, and what reaching ``TARGET`` costs at least."""
    parts = [part_cost(r, records.get((r.run, r.claim, r.part), {}), step_s) for r in rows if not r.decided]
    parts.sort(key=lambda p: (p["core_hours"] is None, p["core_hours"] or 0.0))
    decided = sum(r.decided for r in rows)
    short = max(0, math.ceil(TARGET * len(rows) - 1e-9) - decided)
    priced = [p for p in parts if p["core_hours"] is not None]

    def floor(key: str) -> float | None:
        cheapest = sorted(p[key] for p in priced)[:short]
        return sum(cheapest) if len(cheapest) == short else None

    return {"target": TARGET, "parts_total": len(rows), "decided": decided, "short": short,
            "to_target_core_hours": floor("core_hours"), "to_target_fresh_core_hours": floor("fresh_core_hours"),
            "parts": parts}


def measure(plan: Any, out: Path) -> dict[str, Any]:
    """The read-out over the plan's published stages, priced from their stores under OUT/STAGE
    (the folders ``normlab campaign run --out OUT`` trained in)."""
    from normlab.claims.decided import readout
    from normlab.claims.family import catalogue_family
    from normlab.claims.folder import CLAIMS_JSON
    from normlab.claims.studies import StudyContext

    root = plan.folder.parent
    stages = [s for s in plan.stages if (plan.folder / s.name / CLAIMS_JSON).exists()]
    if not stages:
        raise UserError(f"{plan.folder}: no stage has published a claims.json yet; nothing to price")
    stores: list[Path] = []
    for s in stages:
        reg = plan.registration_path(s)
        try:
            studies = json.loads(reg.read_text(encoding="utf-8")).get("studies") or {}
        except (OSError, ValueError) as e:
            raise UserError(f"{reg}: cannot read stage {s.name}'s registration ({e})") from None
        ctx = StudyContext(out=out / s.name, train=False)
        stores += [ctx.store_dir(name) for name in studies]
    if not any(p.exists() for p in stores):
        raise UserError(f"{out}: no study store of the plan's stages under it; pass the --out the campaign ran with")
    fam = catalogue_family(root)
    rows = readout(fam, [f"{plan.folder.relative_to(root).as_posix()}/{s.name}" for s in stages])
    return cost_doc(rows, fam.records, step_seconds(stores))


def write_cost(folder: Path, doc: dict[str, Any]) -> Path:
    from normlab.core.fsutil import atomic_write_json

    path = folder / COST_JSON
    atomic_write_json(path, doc)
    return path


def read_cost(folder: Path) -> dict[str, Any] | None:
    """PLAN_DIR/COST_JSON as written (None: not measured yet)."""
    path = folder / COST_JSON
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read it ({e}); delete it and run `normlab campaign cost` again") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("parts"), list):
        raise UserError(f"{path}: not a cost read-out; delete it and run `normlab campaign cost` again")
    return doc


__all__ = ["COST_JSON", "TARGET", "cost_doc", "measure", "part_cost", "read_cost", "step_seconds", "write_cost"]
