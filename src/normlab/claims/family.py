"""One multiplicity family for the whole catalogue: Holm over every confirmatory part the lab
publishes, whichever run decided it.

Each confirmatory run adjusts its own parts (``claims/holm.py``), so splitting the catalogue into
runs makes a part easier to pass: a family of 3 registered for one claim halves what its p must
beat against a family of 104 (issue 40). :func:`catalogue_family` reads every ``claims.json``
under a folder (``docs/evidence``: one per published run), keeps the confirmatory ones
(``meta.mode``), and recomputes Holm over every part with a p-value, all runs together: the
family is every part with a p-value, as within a run (choosing it by outcome would undo the
adjustment). Per part it gives the catalogue-adjusted p and the verdict after adjustment (a
decisive part whose adjusted p is not below 0.05 counts as inconclusive); per claim, its verdict
after adjustment by the very derivation a run uses (``holm.holm_verdicts``: parts inside the
regime, scoped when none is). Nothing is written: the published files stay as their runs wrote
them.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.claims.folder import CLAIMS_JSON
from normlab.claims.holm import holm_verdicts
from normlab.claims.rules import DESCRIPTIVE
from normlab.claims.tables import section as between
from normlab.core.errors import UserError
from normlab.stats.effects import holm

ALPHA = 0.05
INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class FamilyPart:
    """One part in the catalogue's family: where it was published, its p, its verdict, whether it
    survived its own run's Holm (``run_ok``, as published) and the catalogue's (``ok``)."""

    run: str
    claim: str
    part: str
    p: float | None
    verdict: str
    run_p_holm: float | None
    run_ok: bool | None
    p_holm: float | None
    ok: bool | None

    @property
    def verdict_after(self) -> str:
        """The part's verdict after the catalogue's adjustment."""
        return INCONCLUSIVE if self.ok is False else self.verdict


@dataclass
class Family:
    """The catalogue's family: the runs in it, the files left out (and why), every part, and per
    claim of each run its verdict after its run's Holm and after the catalogue's."""

    runs: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    parts: list[FamilyPart] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    records: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # (run, claim, part) -> as published
    claim_records: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (run, claim) -> without parts
    written: dict[str, str] = field(default_factory=dict)  # run -> its meta.written_at (ISO 8601: sorts by time)

    @property
    def size(self) -> int:
        """Parts with a p-value: the family Holm adjusts over."""
        return sum(p.p is not None for p in self.parts)

    def survived_run(self) -> list[FamilyPart]:
        """Decisive parts that survive their own run's Holm (as published)."""
        return [p for p in self.parts if p.run_ok is True]

    def fail_catalogue(self) -> list[FamilyPart]:
        """Of those, the parts that do not survive one Holm over the catalogue."""
        return [p for p in self.survived_run() if p.ok is False]

    def latest(self) -> list[FamilyPart]:
        """Each part of the catalogue (claim/part) at its latest confirmatory registration: the parts
        of each claim in the run written last that measured it (``meta.written_at``; a run lists
        every part of a claim it measures). A part registered again on fresh seeds (campaign 2 after
        campaign 1) ends at its new reading, decisive or descriptive, and a part the claim's newest
        reading no longer has was retired from the claim (renamed or replaced: frontier-placement's
        L18-w50). The earlier readings stay in the family and in the table."""
        newest: dict[str, str] = {}
        for fp in sorted(self.parts, key=lambda fp: (self.written.get(fp.run, ""), fp.run)):
            newest[fp.claim] = fp.run
        return [fp for fp in self.parts if fp.run == newest[fp.claim]]

    def ended(self) -> str:
        """One line: how many of the catalogue's parts end decided at their latest registration."""
        last = self.latest()
        decisive = [fp for fp in last if fp.verdict != DESCRIPTIVE]
        done = sum(fp.verdict_after != INCONCLUSIVE for fp in decisive)
        share = f" ({100 * done / len(decisive):.0f}%)" if decisive else ""
        return (f"each of the catalogue's {len(last)} parts at its latest registration: {done} of the {len(decisive)} "
                f"registered as decisive there end decided{share}; descriptive there: {len(last) - len(decisive)}")

    def changed_claims(self) -> list[dict[str, Any]]:
        return [c for c in self.claims if c["verdict_holm"] != c["verdict_holm_run"]]

    def text(self) -> str:
        fails = self.fail_catalogue()
        head = (f"{self.size} p-values over {len(self.runs)} confirmatory runs; of the {len(self.survived_run())} "
                f"decisive parts that survive their run's Holm, {len(fails)} fail under one Holm over the catalogue")
        lines = [f"- {p.run}: {p.claim}/{p.part}: p {p.p:.3g}, adjusted {p.run_p_holm:.2g} in its run, "
                 f"{p.p_holm:.2g} in the catalogue" for p in fails if p.p is not None and p.p_holm is not None
                 and p.run_p_holm is not None]
        return "\n".join([head, *lines])


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UserError(f"{path}: cannot read it as a claims.json ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("meta"), dict) or not isinstance(data.get("claims"), list):
        raise UserError(f"{path}: not a claims.json (no meta and claims); remove it or pass another folder")
    return data


def catalogue_family(root: str | Path) -> Family:
    """Holm over every part with a p-value of every confirmatory claims.json under ``root``."""
    root = Path(root)
    files = sorted(root.rglob(CLAIMS_JSON))
    if not files:
        raise UserError(f"{root}: no claims.json under it")
    fam = Family()
    records: list[tuple[str, list[dict[str, Any]]]] = []
    for f in files:
        rel = f.parent.relative_to(root).as_posix() or "."
        data = _read(f)
        mode = data["meta"].get("mode")
        if mode != "confirmatory":
            fam.skipped[rel] = f"meta.mode is {mode!r}, not 'confirmatory'"
            continue
        fam.runs.append(rel)
        fam.written[rel] = str(data["meta"].get("written_at") or "")
        records.append((rel, copy.deepcopy(data["claims"])))
    parts = [(rel, r, p) for rel, recs in records for r in recs for p in r["parts"]]
    adj = holm([p.get("p") for _, _, p in parts])
    for (rel, r, p), a in zip(parts, adj):
        fam.records[(rel, r["id"], p["id"])] = copy.deepcopy(p)
        ok = None if a is None or p["verdict"] == INCONCLUSIVE else a < ALPHA
        fam.parts.append(FamilyPart(rel, r["id"], p["id"], p.get("p"), p["verdict"], p.get("p_holm"), p.get("holm_ok"),
                                    a, ok))
        p["p_holm"], p["holm_ok"] = a, ok  # on the copies: what holm_verdicts reads
    for rel, recs in records:
        for r in recs:
            fam.claim_records[(rel, r["id"])] = {k: copy.deepcopy(v) for k, v in r.items() if k != "parts"}
        before = {r["id"]: r.get("verdict_holm", r["verdict"]) for r in recs}
        holm_verdicts(recs)
        fam.claims += [{"run": rel, "id": r["id"], "verdict": r["verdict"], "verdict_holm_run": before[r["id"]],
                        "verdict_holm": r["verdict_holm"], "holm_note": r["holm_note"]} for r in recs]
    return fam


# README.md's headline table sits between these markers (``python -m normlab.claims.family`` writes
# it; tests/claims/test_catalogue_family.py holds the README to it).
START, END = "<!-- catalogue-family:start -->", "<!-- catalogue-family:end -->"
_RUNS = {".": "1", "confirm-2a": "2a", "confirm-2b": "2b", "confirm-liu": "liu", "confirm-ln": "ln",
         "confirm-seed": "seed"}  # the run names the README uses (docs/evidence/README.md)


def headline(fam: Family) -> str:
    """The README's headline table: every claim of every confirmatory run with its verdict after
    one Holm over the catalogue, beside its verdict after its own run's Holm (as published)."""
    lines = [f"Adjusted over the whole catalogue: {fam.text().splitlines()[0]}; {fam.ended()}.", "",
             "| claim | run | verdict (Holm over the catalogue) | verdict (Holm over its run, as published) | why it changed |",
             "|---|---|---|---|---|"]
    for c in fam.claims:
        changed = c["verdict_holm"] != c["verdict_holm_run"]
        why = c["holm_note"].replace("|", "\\|") if changed else ""
        lines.append(f"| `{c['id']}` | {_RUNS.get(c['run'], c['run'])} | {'**' if changed else ''}{c['verdict_holm']}"
                     f"{'**' if changed else ''}{_resting(fam, c)} | {c['verdict_holm_run']} | {why} |")
    return "\n".join(lines)


def _resting(fam: Family, c: dict[str, Any]) -> str:
    """Where some of a claim's parts were registered as descriptive, its verdict rests on the
    others alone: say on how many, so that a claim is never read as decided on parts that were not
    (warmup-post "supported" on its Pre-LN control while its Post-LN parts are descriptive)."""
    mine = [fp for fp in fam.parts if (fp.run, fp.claim) == (c["run"], c["id"])]
    shown = sum(fp.verdict == DESCRIPTIVE for fp in mine)
    if not shown or shown == len(mine):
        return ""
    return f" (on {len(mine) - shown} of its {len(mine)} parts; {shown} descriptive)"


def section(page: str) -> str:
    """The text between the headline's markers of ``page`` (README.md)."""
    return between(page, START, END, "README.md")


__all__ = ["END", "START", "Family", "FamilyPart", "catalogue_family", "headline", "section"]


if __name__ == "__main__":  # python -m normlab.claims.family [ROOT]: the table to paste between the markers
    import sys

    print(headline(catalogue_family(sys.argv[1] if len(sys.argv) > 1 else "docs/evidence")))

