"""PLAN_DIR/campaign.md: the campaign's plan, each stage's CPU time against the budget, and the
verdicts of each finished stage with the horizon each part settled at (the only writer of it;
it reads the plan, campaign.jsonl and the stages' published claims.json, and measures nothing)."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from normlab.claims import sequential_stage
from normlab.claims.campaign import END, PAGE, START, STOPPED, records, used_core_hours
from normlab.claims.campaign_plan import Plan, Stage
from normlab.claims.decide_cost import COST_JSON, read_cost
from normlab.claims.folder import CLAIMS_JSON
from normlab.core.fsutil import atomic_write_text


def _stage_state(plan: Plan, s: Stage) -> str:
    events = [r["event"] for r in records(plan) if r["stage"] == s.name]
    if END in events:
        return "ended"
    if events and events[-1] == START:
        return "running (or killed without a record)"
    return "stopped, resumes" if STOPPED in events else "planned"


def _wall_h(plan: Plan, s: Stage) -> float:
    return sum(float(r.get("wall_s", 0.0)) for r in records(plan)
               if r["stage"] == s.name and r["event"] in (END, STOPPED)) / 3600.0


def _unrecorded(plan: Plan) -> list[str]:
    """Launches whose process was killed before it wrote its end (the machine's session ended):
    their CPU time is lost; their wall time is bounded by the next launch of the same stage. Stages
    may run side by side, so a launch is paired with its own stage's next record, not the file's."""
    rows, out = records(plan), []
    for i, r in enumerate(rows):
        if r["event"] != START:
            continue
        after = next((x for x in rows[i + 1:] if x["stage"] == r["stage"]), None)
        if after is None or after["event"] != START:
            continue  # ended, stopped, or (its stage's last line) still running
        wall = (float(after["at"]) - float(r["at"])) / 3600.0
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(r["at"])))
        out.append(f"- `{r['stage']}`, launched {when}: killed without a record; at most {wall:.2f} h of wall "
                   f"time (to its next launch), at most {wall * plan.workers:.2f} core-hours on {plan.workers} "
                   "workers, not counted in the CPU column")
    return out


def _settled(p: dict[str, Any]) -> str:
    seq = sequential_stage.text(p)  # a group-sequential stage: where its seeds stopped
    return _horizon(p) + (f"; {seq}" if seq else "")


def _horizon(p: dict[str, Any]) -> str:
    if p.get("settled_at") is None:
        return "read at its study's fixed horizon (not staged)"
    drift = p.get("drift")
    lr = p.get("lr_drift")
    said = [f"effect drift {drift:+.3g}" if isinstance(drift, (int, float)) else "",
            f"critical lrs moved {lr:.2f} decades" if isinstance(lr, (int, float)) else ""]
    what = "; ".join(x for x in said if x) or "no drift read"
    status = p.get("settle_status", "")
    return f"step {p['settled_at']} ({status}; {what} over the last stage)"


def _verdicts(plan: Plan, s: Stage) -> list[str]:
    path = plan.folder / s.name / CLAIMS_JSON
    if not path.exists():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    lines = [f"Verdicts of stage `{s.name}` (Holm over its run; the README's headline adjusts over the whole "
             "catalogue):", "", "| claim | part | verdict | effect | settled at |", "|---|---|---|---|---|"]
    for r in data["claims"]:
        for p in r["parts"]:
            eff = (p.get("effect") or {}).get("text") or p.get("effect_text") or ""
            lines.append(f"| `{r['id']}` | {p['id']} | {p.get('verdict', '')} | {str(eff).replace('|', '/')} | "
                         f"{_settled(p)} |")
        lines.append(f"| `{r['id']}` | **claim** | **{r.get('verdict_holm', r['verdict'])}** | | |")
    return lines + [""]


def _decided(plan: Plan) -> list[str]:
    """Issue 40's read-out over the stages published so far: the share of their parts decided after
    one Holm over the whole catalogue (every confirmatory run under the plan's evidence folder),
    and for each part that is not, the limit that stopped it (``claims/decided.py``)."""
    from normlab.claims.decided import readout
    from normlab.claims.family import catalogue_family

    root = plan.folder.parent
    runs = [f"{plan.folder.relative_to(root).as_posix()}/{s.name}" for s in plan.stages
            if (plan.folder / s.name / CLAIMS_JSON).exists()]
    if not runs:
        return []
    fam = catalogue_family(root)
    rows = readout(fam, runs)
    return _table(plan, fam, rows) + latest_open(fam) + _changed(plan, fam)


def latest_open(fam: Any) -> list[str]:
    """The decisive parts not decided at their latest registration, whichever run holds it, each
    with the limit that stopped it: the per-part reading's rest (``Family.latest``)."""
    from normlab.claims.decided import readout

    latest = {(fp.run, fp.claim, fp.part) for fp in fam.latest()}
    rest = [r for r in readout(fam, fam.runs) if (r.run, r.claim, r.part) in latest and not r.decided]
    if not rest:
        return []
    lines = [f"Not decided at their latest registration ({len(rest)} parts, whichever run registered them last), "
             "and what stopped each:", "", "| run | claim | part | limit | why |", "|---|---|---|---|---|"]
    lines += [f"| {'run 1' if r.run == '.' else r.run} | `{r.claim}` | {r.part} | {r.limit} | {r.text} |"
              for r in sorted(rest, key=lambda r: (r.run, r.claim, r.part))]
    return lines + [""]


def _changed(plan: Plan, fam: Any) -> list[str]:
    """The claims whose verdict after the catalogue's Holm the campaign changed against the
    earlier runs, and what differs between the readings (``claims/changed.py``)."""
    from normlab.claims.changed import changes

    found = changes(fam, plan.folder.relative_to(plan.folder.parent).as_posix())
    if not found:
        return []
    lines = ["## Verdicts that changed against the earlier runs", "",
             f"{len(found)} claims read by both an earlier run and a campaign stage end with another verdict after "
             "the catalogue's Holm; what differs between the readings, part by part (the horizon read at, seeds, "
             "a rule or quantity rewritten in issue 40, parts added or dropped):", "",
             "| claim | earlier | campaign | what differs |", "|---|---|---|---|"]
    for c in found:
        def said(rows: list[tuple[str, str]]) -> str:
            return "; ".join(f"{'run 1' if r == '.' else r.rsplit('/', 1)[-1]}: {v}" for r, v in rows)
        lines.append(f"| `{c.claim}` | {said(c.earlier)} | {said(c.campaign)} | {'; '.join(c.why)} |")
    return lines + [""]


def _table(plan: Plan, fam: Any, rows: list[Any]) -> list[str]:
    from normlab.claims.decided import share

    lines = ["## Decided after the catalogue's adjustment", "",
             f"**{share(rows)}** (one Holm over the catalogue's {fam.size} p-values; the target is 80%).", "",
             f"Per part: {fam.ended()} (a part registered again on fresh seeds ends at its new "
             "reading; the earlier ones stay in the family).", ""]
    rest = [r for r in rows if not r.decided]
    cost = read_cost(plan.folder)
    priced = {(p["run"], p["claim"], p["part"]): p for p in (cost or {}).get("parts", [])}
    if cost is not None:
        lines += _cost_line(plan, cost, len(rows), sum(r.decided for r in rows))
    if rest:
        lines += ["| stage | claim | part | verdict before adjustment | limit | why | core-h to decide on fresh seeds "
                  "(at least) |", "|---|---|---|---|---|---|---|"]
        for r in rest:
            published = fam.records.get((r.run, r.claim, r.part), {}).get("verdict", "")
            hours = (priced.get((r.run, r.claim, r.part)) or {}).get("fresh_core_hours")
            cost = "-" if hours is None else f"{hours:.2f}"
            lines.append(f"| {r.run.rsplit('/', 1)[-1]} | `{r.claim}` | {r.part} | {published} | {r.limit} | "
                         f"{r.text} | {cost} |")
    return lines + [""]


def _cost_line(plan: Plan, cost: dict[str, Any], n: int, decided: int) -> list[str]:
    """What deciding the undecided parts costs at least, beside the budget left, and why new stages
    cannot lift the share to the target (``claims/decide_cost.py``)."""
    floor, fresh, short = cost.get("to_target_core_hours"), cost.get("to_target_fresh_core_hours"), cost.get("short")
    target = float(cost.get("target", 0.8))
    left = plan.budget_core_hours - _projected(plan)
    stale = (cost.get("parts_total"), cost.get("decided")) != (n, decided)
    if floor is None or fresh is None or not short:
        head = f"`{COST_JSON}`: {short} more parts needed; their costs are not all measured."
    else:
        d, total = int(cost["decided"]), int(cost["parts_total"])
        # a stage on fresh seeds reads parts of its own: x new parts, all decided, give (d + x) / (total + x)
        added = max(0, math.ceil((target * total - d) / (1 - target) - 1e-9))
        head = (f"**Reaching {100 * target:.0f}% needs {short} more of these parts decided; the cheapest {short} would "
                f"take at least {fresh:.2f} core-hours on fresh seeds ({left:.2f} left in the budget after the stages "
                f"planned), but a stage on fresh seeds reads parts of its own while these stay as read: with all of "
                f"its parts decided, the share reaches {100 * target:.0f}% only after {added} of them.** Adding seeds "
                f"to the parts already read keeps the count and would take at least {floor:.2f}, but is not a valid "
                "test: each part was read at its full level, so its alpha is spent. (`" + COST_JSON + "`: each part "
                "priced from its own runs' measured step times, assuming its effect holds; the last column.)")
    if stale:
        head += (f" (Priced when {cost.get('decided')} of {cost.get('parts_total')} parts were decided; "
                 "`normlab campaign cost` prices the current read-out.)")
    return [head, ""]


def _projected(plan: Plan) -> float:
    """What the budget will have paid at the end: CPU used so far plus the estimates of what has not ended."""
    return used_core_hours(plan) + sum(max(0.0, s.estimate_core_hours - used_core_hours(plan, s.name))
                                       for s in plan.stages if _stage_state(plan, s) != "ended")


def page(plan: Plan) -> str:
    """campaign.md's text."""
    used = used_core_hours(plan)
    planned = sum(s.estimate_core_hours for s in plan.stages)
    projected = _projected(plan)
    full = [s.full_grid_core_hours for s in plan.stages]
    ended = [s for s in plan.stages if _stage_state(plan, s) == "ended"]
    saving = (f" A full grid (every run of the same studies at its longest stage) would cost "
              f"{sum(f for f in full if f is not None):.1f} core-hours." if all(f is not None for f in full) else "")
    out = [f"# Campaign `{plan.name}`: what it confirms, and what it cost", "",
           f"**{len(ended)} of {len(plan.stages)} stages ended; {used:.2f} of {plan.budget_core_hours:g} core-hours "
           f"used** (planned: {planned:.2f} core-hours; projected at the end: {projected:.2f}, the CPU used plus "
           f"the estimates of the stages not ended).{saving}", "",
           plan.description or "", "",
           f"Plan: `{plan.path.name}` (scale {plan.scale}; seeds from {plan.first_seed}, unseen by every earlier run; "
           f"{plan.workers} workers). Each stage is one registered `normlab claims` run; its registration is "
           "committed before the stage starts, and the stage resumes from its stores when the command is started "
           "again (`normlab campaign run PLAN`).", "",
           "| stage | claims | staged studies | estimate (core-h) | full grid (core-h) | status | CPU used (core-h) "
           "| wall (h) |", "|---|---|---|---|---|---|---|---|"]
    for s in plan.stages:
        settle = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in s.settle.items()) or "none"
        fg = f"{s.full_grid_core_hours:.2f}" if s.full_grid_core_hours is not None else "-"
        at = f" (scale {s.scale})" if s.scale else ""
        out.append(f"| {s.name}{at} | {', '.join(f'`{c}`' for c in s.claims)} | {settle} | {s.estimate_core_hours:.2f} | "
                   f"{fg} | {_stage_state(plan, s)} | {used_core_hours(plan, s.name):.2f} | {_wall_h(plan, s):.2f} |")
    names = {s.name for s in plan.stages}
    gone = list(dict.fromkeys(r["stage"] for r in records(plan) if r["stage"] not in names))
    for g in gone:  # launched, then taken out of the plan (its CPU time still counts)
        out.append(f"| {g} | (abandoned: no longer in the plan) | | | | abandoned | {used_core_hours(plan, g):.2f} | |")
    lost = _unrecorded(plan)
    if lost:
        out += ["", "Launches whose CPU time was not recorded:", *lost]
    out += [""]
    for s in plan.stages:
        if s.why:
            out += [f"- **{s.name}**: {s.why}"]
        if s.descriptive:  # fixed before the data, so a reader sees them before any verdict
            out += [f"  Registered as descriptive (measured, no verdict, no p-value): "
                    f"{', '.join(f'`{x}`' for x in s.descriptive)}."]
    out += [""]
    out += _decided(plan)
    for s in ended:
        out += _verdicts(plan, s)
    return "\n".join(out).replace("\n\n\n", "\n\n").rstrip() + "\n"


def write_page(plan: Plan) -> None:
    atomic_write_text(plan.folder / PAGE, page(plan))


__all__ = ["latest_open", "page", "write_page"]
