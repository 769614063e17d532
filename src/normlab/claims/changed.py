"""Which verdicts the campaign changed against the lab's earlier runs, and what differs between
the two readings (issue 40: the closing note lists every verdict that changed and why).

Both sides are read after the catalogue's one Holm (``claims/family.py``), so a change is never
an artefact of one side having been adjusted over a smaller family. For each claim published
both by a run outside the campaign and by a campaign stage, whose verdicts differ, the facts that
differ between the latest earlier reading and each stage's, part by part: parts added or
dropped, a rule or a quantity rewritten, the horizon read at (a fixed step then, where the
outcome settled now), the seeds, and a part's own verdict; where no part's verdict moved, the
change is the adjustment's. Nothing here judges which reading is right: the page states both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from normlab.claims.family import Family
from normlab.claims.rules import DESCRIPTIVE


@dataclass(frozen=True)
class Change:
    """One claim whose verdict the campaign changed: each earlier and each campaign reading as
    (run, verdict after the catalogue's Holm), and what differs, as short clauses."""

    claim: str
    earlier: list[tuple[str, str]]
    campaign: list[tuple[str, str]]
    why: list[str]


def _horizon(rec: dict[str, Any]) -> str:
    if rec.get("settled_at") is not None:
        return f"{rec.get('settle_status', 'settled')} at step {rec['settled_at']}"
    return f"step {rec['horizon']}" if rec.get("horizon") is not None else "its fixed horizon"


def _seeds(rec: dict[str, Any]) -> str:
    e = rec.get("effect") or {}
    ns = [str(e[k]) for k in ("n_a", "n_b") if e.get(k)]
    return "/".join(ns)


def _parts(fam: Family, run: str, claim: str) -> dict[str, dict[str, Any]]:
    return {p: rec for (r, c, p), rec in fam.records.items() if r == run and c == claim}


def _settings(fam: Family, run: str, claim: str) -> dict[str, str]:
    """The lab's setting of each regime factor the claim says matters, as the run read it."""
    regime = (fam.claim_records.get((run, claim)) or {}).get("regime")
    factors = regime.get("factors") or [] if isinstance(regime, dict) else []  # (older runs: a list, none)
    return {str(f["factor"]): str(f.get("lab")) for f in factors if isinstance(f, dict) and f.get("matters")}


def _why(fam: Family, before: str, after: str, claim: str) -> list[str]:
    """What differs between the readings of ``claim`` in runs ``before`` and ``after``."""
    old, new = _parts(fam, before, claim), _parts(fam, after, claim)
    was, now = _settings(fam, before, claim), _settings(fam, after, claim)
    out: list[str] = [f"{k}: {was[k]} -> {now[k]}" for k in sorted(set(was) & set(now)) if was[k] != now[k]]
    out += [f"{k}: {now[k]} (not in the earlier regime)" for k in sorted(set(now) - set(was)) if was]
    out += [f"{k}: {was[k]} (no longer in the regime)" for k in sorted(set(was) - set(now)) if now]
    said = [(fam.claim_records.get((r, claim)) or {}).get("settings") for r in (before, after)]
    if not (was and now) and said[0] != said[1] and said[1]:  # no regime to compare: the settings as stated
        out.append(f"settings now: {said[1]}")
    if set(old) - set(new):
        out.append(f"dropped {', '.join(sorted(set(old) - set(new)))}")
    if set(new) - set(old):
        out.append(f"added {', '.join(sorted(set(new) - set(old)))}")
    after_parts = {fp.part: fp for fp in fam.parts if fp.run == after and fp.claim == claim}
    before_parts = {fp.part: fp for fp in fam.parts if fp.run == before and fp.claim == claim}
    moved = False
    for pid in sorted(set(old) & set(new)):
        a, b = old[pid], new[pid]
        bits = []
        if a.get("rule") != b.get("rule"):
            bits.append("rule rewritten")
        if a.get("quantity") != b.get("quantity"):
            bits.append("quantity rewritten")
        if _horizon(a) != _horizon(b):
            bits.append(f"{_horizon(a)} -> {_horizon(b)}")
        if _seeds(a) != _seeds(b):
            bits.append(f"seeds {_seeds(a) or '-'} -> {_seeds(b) or '-'}")
        va, vb = before_parts[pid].verdict_after, after_parts[pid].verdict_after
        if vb == DESCRIPTIVE:  # measured with no verdict: the claim rests on its other parts
            out.append(f"{pid}: registered as descriptive (was {va}), so the claim rests on its other parts")
            continue
        if vb != after_parts[pid].verdict:
            bits.append(f"{after_parts[pid].verdict} before the catalogue's Holm")
        if va != vb:
            moved = True
            out.append(f"{pid}: {va} -> {vb}" + (f" ({', '.join(bits)})" if bits else ""))
    if not moved and not out:
        out.append("no part's verdict moved: the claim's combination of its parts after the catalogue's Holm")
    return out


def changes(fam: Family, campaign: str) -> list[Change]:
    """Every claim whose verdict after the catalogue's Holm differs between the runs published
    before the campaign's first stage (outside the folder ``campaign``, e.g. "campaign") and the
    campaign's stages under it. A claim the campaign registered as descriptive has no verdict to
    change, and a descriptive part no verdict that moved."""
    inside = f"{campaign.rstrip('/')}/"
    began = min((w for r, w in fam.written.items() if r.startswith(inside) and w), default="")
    verdicts: dict[str, list[tuple[str, str]]] = {}
    for c in fam.claims:
        verdicts.setdefault(c["id"], []).append((c["run"], c["verdict_holm"]))
    out = []
    for claim, rows in verdicts.items():
        earlier = [r for r in rows if not r[0].startswith(inside) and (not began or fam.written.get(r[0], "") < began)]
        now = [r for r in rows if r[0].startswith(inside) and r[1] != DESCRIPTIVE]
        if not earlier or not now:
            continue
        last, was = max(earlier, key=lambda r: fam.written.get(r[0], ""))  # the latest reading before the campaign
        if {v for _, v in now} == {was}:
            continue
        why = [f"{run.rsplit('/', 1)[-1]}: {w}" for run, _ in now for w in _why(fam, last, run, claim)]
        out.append(Change(claim, earlier, now, why))
    return out


__all__ = ["Change", "changes"]
