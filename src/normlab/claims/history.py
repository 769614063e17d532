"""OUT/history.jsonl, the run's lasting record: written only here, appended, never rewritten.

Three kinds of line, each one JSON object:

- ``launch`` (``"kind": "launch"``): a claims run began, after its plan and registration
  checks passed (a run refused before anything is measured is no launch): its ``launch`` id,
  time, git revision, mode, scale, the claims chosen, the registration (file, commit, document
  hash) and the combined hash of its measuring code (``claims/measuring_code.py``);
- a verdict (no ``kind``: the lines written before launches were recorded have none, and
  readers take such a line as a verdict): one per claim the run published, with its
  ``launch`` id (absent on older lines);
- ``end`` (``"kind": "end"``): how the launch ended: ``status`` completed, failed (with the
  ``error``, one line) or interrupted (with the signal), and its seconds.

So a launch that failed, was interrupted or whose output was discarded stays in the record,
next to the verdicts of the launches that completed. Readers: :func:`verdict_lines` (the
ledger of seen seeds reads verdicts only: a launch's seeds are in its stores).
"""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path
from typing import Any

from normlab.claims.folder import HISTORY
from normlab.core import stopping
from normlab.core.fsutil import append_jsonl, read_jsonl

LAUNCH, END = "launch", "end"
COMPLETED, FAILED, INTERRUPTED = "completed", "failed", "interrupted"


def is_verdict(line: dict[str, Any]) -> bool:
    """Whether a history line is a claim's verdict (not a launch's beginning or end)."""
    return line.get("kind", "verdict") == "verdict"


def verdict_lines(path: str | Path) -> list[dict[str, Any]]:
    """The verdict lines of a history.jsonl, in order ([] when there is none)."""
    return [h for h in read_jsonl(path) if is_verdict(h)]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def launch(out: Path, prov: dict[str, Any], plan: Any, measuring: str) -> str:
    """Append the launch line of the planned claims run ``plan`` to OUT/history.jsonl; returns
    its launch id. ``prov``: ``output.provenance()``; ``measuring``: the combined hash of the
    chosen claims' measuring code."""
    out.mkdir(parents=True, exist_ok=True)
    lid = uuid.uuid4().hex[:12]
    reg = plan.registration
    append_jsonl(out / HISTORY, {
        "kind": LAUNCH, "launch": lid, "written_at": _now(), "git_revision": prov.get("git_revision"),
        "normlab": prov.get("normlab"), "mode": plan.mode, "quick_only": plan.run.quick,
        "scale": None if plan.run.quick else plan.run.scale, "claims": [c.id for c in plan.claims],
        "registration": None if reg is None else {"file": reg.file or str(reg.path), "commit": reg.commit,
                                                  "document_hash": reg.doc.get("document_hash")},
        "measuring_code": measuring})
    return lid


def end(out: Path, lid: str, status: str, started: float, error: str | None = None) -> None:
    """Append the end line of launch ``lid``: ``status`` (completed, failed, interrupted), the
    error in one line (at most 500 characters) and the seconds since ``started``."""
    if status not in (COMPLETED, FAILED, INTERRUPTED):
        raise ValueError(f"history: unknown end status {status!r}; valid: {COMPLETED}, {FAILED}, {INTERRUPTED}")
    out.mkdir(parents=True, exist_ok=True)
    said = None if error is None else " ".join(error.split())[:500]
    append_jsonl(out / HISTORY, {"kind": END, "launch": lid, "written_at": _now(), "status": status,
                                 "error": said, "seconds": round(time.time() - started, 1)})


class Launch:
    """One launch of a claims run: its launch line is written when it is made (:func:`launch`),
    its end line when the ``with`` block it guards ends: completed, failed (the exception, in
    one line) or interrupted (the stop signal, else KeyboardInterrupt)."""

    def __init__(self, out: Path, prov: dict[str, Any], plan: Any, measuring: str, started: float) -> None:
        self.out, self.started = out, started
        self.id = launch(out, prov, plan, measuring)

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: Any) -> None:
        if kind is None:
            end(self.out, self.id, COMPLETED, self.started)
        elif issubclass(kind, KeyboardInterrupt):
            got = stopping.received()
            end(self.out, self.id, INTERRUPTED, self.started, signal.Signals(got).name if got else kind.__name__)
        else:
            end(self.out, self.id, FAILED, self.started, f"{kind.__name__}: {value}")


def update_history(records: list[dict[str, Any]], out: Path, prov: dict[str, Any]) -> None:
    """Append this run's verdicts to OUT/history.jsonl (never rewritten: every run stays, so a
    changed rule stands beside its old verdict), with the run's mode and launch id, the seeds
    each claim was decided on, its scoping hash, measuring code and the decision code; a claim
    whose rule hash differs from its last verdict line gets ``rule_changed`` with the old hash
    and verdict."""

    path = out / HISTORY
    last: dict[str, dict[str, Any]] = {}
    for h in verdict_lines(path):
        last[h["id"]] = h
    for r in records:
        prev = last.get(r["id"])
        if prev and prev["rule_hash"] != r["rule_hash"]:
            r["rule_changed"] = {"from_hash": prev["rule_hash"], "verdict_before": prev["verdict"],
                                 "at": prev["written_at"]}
        # the seeds this claim was decided on: a later confirmatory run's ledger reads them
        mine = ["probe"] if r.get("quick") else r.get("studies", [])
        seeds = {n: s for n, s in (prov.get("seeds") or {}).items() if n in mine}
        line = {"id": r["id"], "written_at": prov["written_at"], "git_revision": prov["git_revision"],
                "normlab": prov["normlab"], "mode": prov.get("mode", "exploratory"),
                "rule_hash": r["rule_hash"], "code_hash": r["code_hash"],
                "scoping_hash": r.get("scoping_hash"), "decision_code": prov.get("decision_code"),
                "verdict": r["verdict"], "verdict_holm": r.get("verdict_holm"), "seeds": seeds,
                "parts": {p["id"]: p["verdict"] for p in r["parts"]}}
        line.update({k: v for k, v in (("launch", prov.get("launch")), ("measuring_code", r.get("measuring_code")))
                     if v is not None})
        append_jsonl(path, line)
