"""Whether each decided part's rule was registered before its data (``claims/registration.py``
writes and reads the registration; this module marks the records and words the page's line).

Each part of claims.json gets ``registered``:

- ``"before-data"``: the registered rule hash is the rule used, the claim's studies are the
  registered ones, and the registration's commit time precedes (by a second at least: git
  counts whole seconds) the first trial start of every study the claim reads (a quick claim:
  the start of the run that measured it; a registered run measures the quick claims afresh,
  never from OUT/cache);
- ``"post-hoc"``: a rule, the claim's scoping (``scoping_hash``) or the decision code
  (``claims/decision.py``) was registered but changed since, or registered after the data; the
  part also gets ``registered_verdict``, the verdict of the registered rule on the same effect
  (None when the registration has no such part), and ``registered_rule_text``;
- ``"not-registered"``: no registration was given, it names no commit, or lacks the claim.

``registered_note`` says why in words. A registered part also gets ``registered_code``:
``"same"`` (the measuring code, ``claims/measuring_code.py``, is the registered one),
``"changed"`` (it differs: refused, or post-hoc with ``--allow-post-hoc``) or
``"not registered"`` (a registration of format 1 or 2, written before measuring code was
registered: its parts are marked as before, and the note and the page say so).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from normlab.claims.folder import CLAIMS_JSON
from normlab.claims.measuring_code import CHANGED
from normlab.claims.registration import part_hash
from normlab.claims.rules import Direction, Outside, Rule, Within
from normlab.stats.effects import Effect

BEFORE, POST_HOC, NOT_REGISTERED = "before-data", "post-hoc", "not-registered"
MARK = "‡"  # a post-hoc part on the page and in claims.md


def rule_from_spec(spec: dict[str, Any]) -> Rule:
    """The rule a registered spec (``Rule.spec()``) describes."""
    if spec.get("kind") == "direction":
        return Direction(int(spec["sign"]), float(spec.get("ref", 0.0)))
    if spec.get("kind") == "within":
        return Within(float(spec["lo"]), float(spec["hi"]))
    if spec.get("kind") == "outside":
        return Outside(float(spec["lo"]), float(spec["hi"]))
    raise ValueError(f"unknown rule kind in a registration: {spec.get('kind')!r}; valid: direction, within, outside")


def effect_from_dict(d: dict[str, Any]) -> Effect:
    """An Effect back from claims.json's ``effect`` (lists back to tuples)."""
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    return Effect(**fields)


def when(t: float | None) -> str:
    return "unknown time" if t is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _data_times(c: Any, studies: dict[str, Any], started_at: float) -> dict[str, float | None]:
    """When the claim's data began: each study's first trial start; a quick claim's: the run's start."""
    if c.quick:
        return {"this run's measurements": started_at}
    return {f"study {n}": (studies.get(n) or {}).get("first_start") for n in c.studies}


def mark(records: list[dict[str, Any]], claims: dict[str, Any], reg: Any, studies: dict[str, Any],
         started_at: float) -> dict[str, Any] | None:
    """Mark every part of ``records`` (``claims``: id -> Claim); ``reg`` a loaded Registration or
    None; ``studies`` meta["studies"]. Returns claims.json's ``meta.registration``."""
    for r in records:
        c = claims[r["id"]]
        entry = reg.doc["claims"].get(c.id) if reg is not None and reg.commit is not None else None
        if entry is None:
            why = ("no registration was given to this run" if reg is None else reg.unverified if reg.commit is None
                   else "the registration does not name this claim")
            for p in [*r["parts"], *r.get("checks", [])]:
                p.update(registered=NOT_REGISTERED, registered_note=why)
            continue
        # git times are whole seconds (rounded down): a commit in the same second as the data is not before it
        late = [f"{what} began at {when(t)}" if t is not None else f"{what}: no start time recorded"
                for what, t in _data_times(c, studies, started_at).items() if t is None or reg.committed_at + 1 > t]
        changed = reg.changed.get(c.id) or ("" if entry["rule_hash"] == r["rule_hash"] else "rule changed") or (
            "" if entry.get("scoping_hash") in (None, r.get("scoping_hash", entry.get("scoping_hash"))) else "scoping changed")
        registered = {p["id"]: p for p in entry["parts"]}
        code = "not registered" if "measuring_code" not in entry else "changed" if CHANGED in changed else "same"
        unhashed = f"; its measuring code was not registered (registration format {reg.doc.get('version', 1)})" \
            if code == "not registered" else ""
        for p in [*r["parts"], *r.get("checks", [])]:  # a check is registered as a part is
            p["registered_code"] = code
            if not late and not changed:
                p.update(registered=BEFORE, registered_note=f"registered in {reg.commit[:7]} at "
                                                            f"{when(reg.committed_at)}, before the data{unhashed}")
                continue
            why = [f"{changed} since the registration"] if changed else []
            why += [unhashed[2:]] if unhashed else []
            if late:
                why.append(f"registered at {when(reg.committed_at)}, not before the data ({'; '.join(late)})")
            rp = registered.get(p["id"])
            p.update(registered=POST_HOC, registered_note="; ".join(why),
                     registered_verdict=None if rp is None else rule_from_spec(rp["rule"]).verdict(
                         effect_from_dict(p["effect"])),
                     registered_rule_text=None if rp is None else rp["rule_text"])
    return None if reg is None else reg.meta()


def counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """Parts per ``registered`` value (claims.json written before registration existed: none)."""
    out = {BEFORE: 0, POST_HOC: 0, NOT_REGISTERED: 0}
    for r in records:
        for p in r["parts"]:
            out[p.get("registered", NOT_REGISTERED)] += 1
    return out


def summary(records: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The page's one sentence on pre-registration: only what the records show."""
    n = counts(records)
    total = sum(n.values())
    reg = meta.get("registration")
    if not reg or n[NOT_REGISTERED] == total:
        return (f"Not pre-registered: this run was given no committed registration, so nothing here shows that "
                f"the {total} parts' rules were fixed before the data (rules and verdict history: rule hashes "
                "and history.jsonl; how to pre-register: docs/theory.md, Pre-registration).")
    at = f"commit {reg['commit'][:7]} at {when(reg['committed_at'])}"
    kinds = {bool(r.get("quick")) for r in records}
    first = {frozenset({True}): "before this run measured them", frozenset({False}): "before each study's first trial"
             }.get(frozenset(kinds), "before each study's first trial (the quick claims: before this run measured them)")
    unhashed = sum(p.get("registered_code") == "not registered" for r in records for p in r["parts"])
    code = (f" The registration predates measuring-code hashes: the code that computed the quantities of "
            f"{unhashed} of these parts was not registered." if unhashed else "")
    if n[BEFORE] == total:
        return f"All {total} parts' rules were registered in {at}, {first}.{code}"
    return (f"Pre-registration ({at}): {n[BEFORE]} of {total} parts' rules were registered {first}; "
            f"{n[POST_HOC]} are post-hoc (marked {MARK}: the rule or the measuring code changed after registration, "
            f"or was registered after the data; the registered rule's verdict is given beside); "
            f"{n[NOT_REGISTERED]} not registered.{code}")


def tag(p: dict[str, Any]) -> str:
    """' ‡ (registered rule: VERDICT)' for a post-hoc part, else ''."""
    if p.get("registered") != POST_HOC:
        return ""
    v = p.get("registered_verdict")
    return f" {MARK} (post-hoc; registered rule: {v or 'no such part'})"


def verify(out: str | Path, repo: str | Path | None = None) -> list[str]:
    """Check OUT/claims.json's marks against git alone, as a reader would by hand: every part is
    marked; a post-hoc part has its registered verdict; for every before-data part the recorded
    commit exists in ``repo``'s history (default: the repository holding OUT), the file at that
    commit hashes to the recorded sha256 and registers the claim's rule hash and the part's
    hash, and the commit time precedes the data of every study the claim reads (a quick claim:
    the run's start). Returns the problems found (none: the marks hold)."""
    import hashlib
    import json
    import subprocess

    data = json.loads((Path(out) / CLAIMS_JSON).read_text(encoding="utf-8"))
    meta, records = data["meta"], data["claims"]
    parts = [(r, p) for r in records for p in [*r["parts"], *r.get("checks", [])]]
    problems = [f"{r['id']}/{p['id']}: registered={p.get('registered')!r}, not one of {BEFORE}, {POST_HOC}, "
                f"{NOT_REGISTERED}" for r, p in parts if p.get("registered") not in (BEFORE, POST_HOC, NOT_REGISTERED)]
    problems += [f"{r['id']}/{p['id']}: post-hoc without registered_verdict" for r, p in parts
                 if p.get("registered") == POST_HOC and "registered_verdict" not in p]
    claimed = [(r, p) for r, p in parts if p.get("registered") == BEFORE]
    reg = meta.get("registration")
    if not claimed:
        return problems
    if not reg:
        return [*problems, f"{len(claimed)} parts marked {BEFORE} but meta.registration is null"]

    def git(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["git", "-C", str(repo or Path(out)), *args], capture_output=True, timeout=30)

    commit = str(reg["commit"])
    if git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        return [*problems, f"registration commit {commit} is not in this repository's history"]
    content = git("show", f"{commit}:{reg['file']}")
    if content.returncode != 0 or hashlib.sha256(content.stdout).hexdigest() != reg["sha256"]:
        return [*problems, f"{reg['file']} at {commit[:7]} does not hash to the recorded sha256"]
    ct = int(git("show", "-s", "--format=%ct", commit).stdout.decode().strip())
    if ct != reg["committed_at"]:
        problems.append(f"commit {commit[:7]} has commit time {ct}, claims.json says {reg['committed_at']}")
    doc = json.loads(content.stdout.decode("utf-8"))
    for r, p in claimed:
        e = doc["claims"].get(r["id"])
        where = f"{r['id']}/{p['id']}"
        if e is None or e["rule_hash"] != r["rule_hash"]:
            problems.append(f"{where}: the registration at {commit[:7]} does not hold rule hash {r['rule_hash']}")
            continue
        if e.get("scoping_hash") and e["scoping_hash"] != r.get("scoping_hash"):
            problems.append(f"{where}: scoped by {r.get('scoping_hash')}, registered {e['scoping_hash']}")
        if doc.get("decision_code") and doc["decision_code"] != meta.get("decision_code"):
            problems.append(f"{where}: decided by code {meta.get('decision_code')}, registered {doc['decision_code']}")
        if e.get("measuring_code") and e["measuring_code"].get("hash") != r.get("measuring_code"):
            problems.append(f"{where}: measured by code {r.get('measuring_code')}, registered "
                            f"{e['measuring_code'].get('hash')}")
        spec = {k: p[k] for k in ("id", "asserts", "quantity", "rule", "rule_text", "why")}
        if p.get("check"):
            spec["check"] = True  # Part.spec of a check says so, and its hash covers it
        if part_hash(spec) not in {q["part_hash"] for q in e["parts"]}:
            problems.append(f"{where}: its rule is not the registered one")
        times = {"the run's start": meta.get("started_at")} if e["quick"] else \
            {f"study {n}": (meta.get("studies", {}).get(n) or {}).get("first_start") for n in e["studies"]}
        problems += [f"{where}: registered at {when(ct)}, not before {what} ({when(t)})"
                     for what, t in times.items() if t is None or ct + 1 > t]
    return problems
