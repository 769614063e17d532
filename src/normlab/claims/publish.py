"""Step 4 of a claims run: the run's record (``meta``: the probe's settings, the studies' spans
and training runs, the registration marks, the stability-map pages) and the outputs,
``OUT/claims.json``, ``claims.md``, ``index.html``, ``figures/`` and ``history.jsonl``
(``claims/output.py``, after the Holm adjustment over every part)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from normlab.claims import registered
from normlab.claims.decision import decision_code_hash
from normlab.claims.folder import PROBE
from normlab.claims.measuring_code import measuring_hash
from normlab.claims.output import write_outputs
from normlab.claims.plan import ClaimsPlan
from normlab.claims.studies import StudyContext
from normlab.report import build_report
from normlab.report.kinds import STABILITY_STUDIES
from normlab.study.store import Store


def publish(p: ClaimsPlan, records: list[dict[str, Any]], started: float, launch: str | None = None) -> None:
    """Write the outputs of ``records`` (in ``p.claims``' order); ``started``: the run's start
    (time.time()), the date of the quick claims' data for the registration marks; ``launch``:
    the launch id of history.jsonl (``claims/history.py``). Each record gets the combined hash
    of its claim's measuring code (``claims/measuring_code.py``)."""
    run, ctx = p.run, p.ctx
    meta: dict[str, Any] = {"scale": None if run.quick else run.scale, "quick_only": run.quick, "mode": p.mode,
                            "decision_code": decision_code_hash(), "headline_verdict": "verdict_holm"}
    if launch is not None:
        meta["launch"] = launch
    by_id = {c.id: c for c in p.claims}
    for r in records:
        r["measuring_code"] = measuring_hash(by_id[r["id"]])
    seeds: dict[str, list[int]] = {}
    if p.quick is not None:
        meta["probe"] = p.quick.q.probe
        seeds[PROBE] = p.quick.q.seed_list
    for n in ctx.studies_read():  # what this run decided on: the ledger of a later run reads it (claims/ledger.py)
        seeds[n] = sorted({int(t.params["seed"]) for t in ctx.trials(n) if "seed" in t.params})
    meta["seeds"] = seeds
    meta["seconds"] = round(time.time() - started, 1)
    meta["cached_claims"] = sorted(h.split("/", 1)[1] for h in p.store.hits if h.startswith("claims/"))
    if ctx.spans:
        meta["studies"] = {n: {"first_start": s, "last_finish": f, "wall_s": round(f - s, 1), "trials": len(ctx.trials(n))}
                           for n, (s, f) in ctx.spans.items()}
        meta["training_runs"] = training_runs(ctx.spans)
        meta["training_wall_s"] = round(sum(r["wall_s"] for r in meta["training_runs"]), 1)
    meta["started_at"] = round(started, 3)
    meta["registration"] = registered.mark(records, by_id, p.registration,
                                           meta.get("studies", {}), started)
    meta["maps"] = map_pages(ctx, run.out)
    meta["map_outcomes"] = ctx.map_outcomes(STABILITY_STUDIES)  # every cell at each horizon
    write_outputs(records, run.out, meta, p.quick.q if p.quick is not None and p.figures else None, run.embed)


def map_pages(ctx: StudyContext, out: Path) -> list[str]:
    """The stability-map page of every map study the claims read (``OUT/maps/<study>/``),
    so that the evidence links the phase diagrams its depth and warm-up verdicts come from."""

    pages = []
    for name in STABILITY_STUDIES:
        store = ctx.store_dir(name)
        if name in ctx.studies_read() and Store.has_db(store):
            page = build_report(store, out=out / "maps" / name)
            pages.append(str(page.relative_to(out)))
    return pages


def training_runs(spans: dict[str, tuple[float, float]], gap: float = 600.0) -> list[dict[str, Any]]:
    """The stores' training as separate runs: studies whose spans overlap (or follow within
    ``gap`` seconds) form one run, with its wall time from first start to last finish. A claims
    run resumed in another session (a long study trained on its own first, say) is then
    reported as the runs it was, not as one span with the days between them."""
    runs: list[dict[str, Any]] = []
    for name, (start, end) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        if runs and start <= runs[-1]["last_finish"] + gap:
            r = runs[-1]
            r["studies"].append(name)
            r["last_finish"] = max(r["last_finish"], end)
        else:
            runs.append({"studies": [name], "first_start": start, "last_finish": end})
    for r in runs:
        r["wall_s"] = round(r["last_finish"] - r["first_start"], 1)
    return runs
