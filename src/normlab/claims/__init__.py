"""``normlab claims``: every claim of the literature and the seed documents as an object with
parts, rules declared with the claim (and, with ``registration``, checked against a committed
pre-registration), effects with 95% intervals over seeds, and verdicts.

``run_claims(quick=True, out=DIR)`` measures what the chosen quick claims declare they need
(probe cells at initialisation and the extra checks of ``measure_beyond_grid.py``; the whole grid
when every quick claim is chosen, for the page's context figures), decides each claim
(``claim.Claim.decide``) and writes ``DIR/claims.json``, ``DIR/index.html``, ``DIR/figures/``
and appends to ``DIR/history.jsonl``. ``quick=False`` also runs (or, with ``train=False``,
reads) the study stores of the training claims under ``DIR/stores/``. Every decided claim
and probe cell is kept in ``DIR/cache/`` (``claims/cache.py``), so an interrupted run
resumes where it stopped. How a verdict is reached: docs/theory.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from normlab.claims import registered
from normlab.claims.cache import Cache
from normlab.claims.catalogue import all_claims
from normlab.claims.measure import FIGURE_NEEDS
from normlab.claims.output import write_outputs
from normlab.claims.quickrun import QuickRun
from normlab.claims.registration import load, require_match
from normlab.claims.studies import StudyContext
from normlab.core.errors import UserError
from normlab.core.progress import Progress
from normlab.report import build_report
from normlab.report.kinds import STABILITY_STUDIES
from normlab.study.presets import SCALES


def run_claims(quick: bool = True, out: str | Path = "claims", only: list[str] | None = None,
               seeds: int = 5, depths: list[int] | None = None, d_model: int = 128,
               scale: str = "cpu", workers: int | None = None, train: bool = True,
               progress: Any = False, cache: bool = True, registration: str | Path | None = None,
               allow_post_hoc: bool = False, embed: bool = True) -> list[dict[str, Any]]:
    """Decide the claims and write the outputs; returns the claim records (claims.json).

    ``progress``: True for finished/total, the current item and an ETA on stderr (a bar on a
    terminal, plain lines otherwise), or a :class:`normlab.core.progress.Progress` to feed (the
    caller closes it). ``cache=False``: measure everything and neither read nor write
    ``OUT/cache``. ``registration``: a committed ``normlab claims register`` file; checked
    against the current rules before anything is measured (``allow_post_hoc``: decide changed
    claims anyway, marked post-hoc), and each part is marked before-data, post-hoc or
    not-registered (``claims/registered.py``). ``embed=False``: the page links its figures
    (OUT/figures/) instead of embedding them, for a page published in a repository."""

    t0 = time.time()
    if seeds < 3:
        raise UserError(f"--seeds={seeds}: need at least 3 seeds (fewer is inconclusive by rule)")
    reg = all_claims()
    extra = sorted({s for _, c in reg.items() for s in c.experiments})  # scales only some claims have
    if scale not in (*SCALES, *extra):
        raise UserError(f"--scale={scale}: choose one of {', '.join((*SCALES, *extra))}")
    chosen = [reg.get(i, "--only") for i in only] if only else [c for _, c in reg.items()]
    chosen = [c for c in chosen if c.quick or not quick]
    if scale not in SCALES:
        have = sorted(i for i, c in reg.items() if scale in c.experiments)
        lacking = [c.id for c in chosen if scale not in c.experiments]
        if quick or lacking:
            raise UserError(f"--scale={scale}: only claims {', '.join(have)} have this scale; "
                            f"run `normlab claims --scale {scale} {' '.join('--only ' + i for i in have)}`")
    if not chosen:
        raise UserError("--only: every named claim needs training; drop --quick to run them")

    reg_file = None
    if registration is not None:  # before anything is measured or trained
        reg_file = load(registration)
        require_match(reg_file, chosen, scale, quick, allow_post_hoc)
    out = Path(out)
    display = progress if isinstance(progress, Progress) else Progress("claims", enabled=bool(progress))
    store = Cache(out / "cache" if cache else None)
    meta: dict[str, Any] = {"scale": None if quick else scale, "quick_only": quick}
    ctx = StudyContext(out, scale=scale, workers=workers, train=train, display=display)
    try:
        # a registered run measures the quick claims now (their data must not predate the registration)
        records, qr = _decide(chosen, reg, quick, seeds, depths, d_model, store, ctx, display,
                              Cache(None) if reg_file is not None else store)
    finally:
        if display is not progress:
            display.close()
    if qr is not None:
        meta["probe"] = qr.q.probe
    meta["seconds"] = round(time.time() - t0, 1)
    meta["cached_claims"] = sorted(h.split("/", 1)[1] for h in store.hits if h.startswith("claims/"))
    if ctx.spans:
        meta["studies"] = {n: {"first_start": s, "last_finish": f, "wall_s": round(f - s, 1), "trials": len(ctx.trials(n))}
                           for n, (s, f) in ctx.spans.items()}
        meta["training_runs"] = training_runs(ctx.spans)
        meta["training_wall_s"] = round(sum(r["wall_s"] for r in meta["training_runs"]), 1)
    meta["started_at"] = round(t0, 3)
    meta["registration"] = registered.mark(records, {c.id: c for c in chosen}, reg_file, meta.get("studies", {}), t0)
    full_grid = qr is not None and {c.id for c in chosen if c.quick} == {i for i, c in reg.items() if c.quick}
    meta["maps"] = _map_pages(ctx, out)
    write_outputs(records, out, meta, qr.q if full_grid else None, embed)
    return records


def _decide(chosen: list[Any], reg: Any, quick: bool, seeds: int, depths: list[int] | None, d_model: int,
            store: Any, ctx: Any, display: Any, quick_store: Any = None) -> tuple[list[dict[str, Any]], Any]:
    """Plan everything on the display first (one total), then the quick claims, the studies,
    the training claims; returns the records in the order of ``chosen`` and the QuickRun.
    ``quick_store``: the cache of the quick measurements (default ``store``)."""

    fast = [c for c in chosen if c.quick]
    slow = [c for c in chosen if not c.quick]
    qr = QuickRun(seeds, depths, d_model, store if quick_store is None else quick_store, display) if fast else None
    # the context figures of the page need the whole grid: only when every quick claim is decided
    figures = [FIGURE_NEEDS] if {c.id for c in fast} == {i for i, c in reg.items() if c.quick} else []
    if qr is not None:
        qr.plan(fast, figures)
    needed = _studies(slow)
    if needed and ctx.train:
        ctx.plan(needed)
    got: dict[str, dict[str, Any]] = {}
    for c in fast:
        got[c.id] = qr.record(c)  # type: ignore[union-attr]
    if figures:
        qr.ensure(figures[0])  # type: ignore[union-attr]
    for i, name in enumerate(needed, 1):
        display.item(f"study {name} [{i}/{len(needed)}]")
        ctx.trials(name)
    for c in slow:
        got[c.id] = ctx.record(c, store)
    return [got[c.id] for c in chosen], qr


def _map_pages(ctx: Any, out: Path) -> list[str]:
    """The stability-map page of every map study the claims read (``OUT/maps/<study>/``),
    so that the evidence links the phase diagrams its depth and warm-up verdicts come from."""

    pages = []
    for name in STABILITY_STUDIES:
        store = ctx.store_dir(name)
        if name in ctx.studies_read() and (store / "study.sqlite").is_file():
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


def _studies(chosen: list[Any]) -> list[str]:
    """The studies the chosen training claims read, each once, in the claims' order."""
    return list(dict.fromkeys(n for c in chosen if not c.quick for n in c.studies))


__all__ = ["run_claims"]
