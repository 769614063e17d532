"""The evidence page's regime table per claim, its section of implementation checks
(``claims/regime.py``, ``Part(check=True)``: rows for :class:`normlab.report.html.Page` tables),
and its sentences on regimes and on confirmatory vs exploratory runs (``claims/ledger.py``)."""

from __future__ import annotations

from typing import Any

from normlab.report.html import esc


def regime_rows(r: dict[str, Any]) -> list[list[str]]:
    """One row per factor of the claim's regime: the source's setting, the lab's, and whether it
    departs (a factor that matters, outside the source's range)."""
    reg = r.get("regime") or {}
    rows = []
    for f in reg.get("factors", []):
        mark = "departs" if f["departs"] else ("inside" if f["matters"] else "does not matter")
        scope = f" (parts {', '.join(f['parts'])})" if f.get("parts") else ""
        rows.append([esc(f["factor"]) + esc(scope), esc(f["source"]), esc(f["lab"]), f"<b>{mark}</b>" if f["departs"]
                     else mark, esc(f.get("why", ""))])
    return rows


def regime_sentence(records: list[dict[str, Any]]) -> str:
    """How many verdicts speak for their sources, and how many only for the lab's settings."""
    stated = [r for r in records if r.get("regime")]
    scoped = [r["id"] for r in stated if r.get("departures")]
    if not stated:
        return "These records carry no regimes (decided before regimes were recorded)."
    return (f"{len(stated) - len(scoped)} of {len(stated)} claims were decided inside their source's regime on every "
            f"factor the source says matters; {len(scoped)} depart on at least one such factor, and their verdicts "
            "are worded as what was measured at the lab's settings, never as the source being contradicted"
            + (f" ({', '.join(scoped)})." if scoped else "."))


def check_rows(records: list[dict[str, Any]]) -> list[list[str]]:
    """Checks of the implementation: true by construction, shown apart from the verdicts, each with
    its registration mark (``claims/registered.py``: checks are registered like parts)."""
    rows = []
    for r in records:
        for c in r.get("checks", []):
            ok = c.get("rule_verdict", c["verdict"]) == "supported"
            rows.append([esc(f"{r['id']}/{c['id']}"), esc(c["asserts"]), esc(c["rule_text"]), esc(c["effect_text"]),
                         "passes" if ok else "<b>FAILS</b>", esc(c.get("registered", "not-registered"))])
    return rows


def mode_sentence(meta: dict[str, Any]) -> str:
    """The page's line on confirmatory vs exploratory (claims/ledger.py)."""
    mode = meta.get("mode")
    if mode == "confirmatory":
        return ("Confirmatory: every seed was registered before the data and none had been trained or decided on "
                "before (the stores, caches and histories consulted: claims/ledger.py).")
    if mode == "exploratory":
        return ("Exploratory: this run was not checked for unseen registered seeds (no registration, or "
                "--exploratory), so its seeds may be ones earlier runs had seen; a confirmatory run confirms it.")
    return ("Exploratory: this run predates the check for unseen seeds (claims/ledger.py), so nothing here shows "
            "that its seeds were unseen by earlier runs.")
