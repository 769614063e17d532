"""``normlab claims``: every claim of the literature and the seed documents as an object with
parts, rules fixed in advance, effects with 95% intervals over seeds, and verdicts.

``run_claims(quick=True, out=DIR)`` measures (one probe grid at initialisation plus the
extra checks of ``measure_more.py``), decides each claim (``claim.Claim.decide``) and
writes ``DIR/claims.json``, ``DIR/index.html``, ``DIR/figures/`` and appends to
``DIR/history.jsonl``. ``quick=False`` also runs (or, with ``train=False``, reads) the study
stores of the training claims under ``DIR/stores/``. How a verdict is reached:
docs/theory.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable


def run_claims(quick: bool = True, out: str | Path = "claims", only: list[str] | None = None,
               seeds: int = 5, depths: list[int] | None = None, d_model: int = 128,
               scale: str = "cpu", workers: int | None = None, train: bool = True,
               progress: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Decide the claims and write the outputs; returns the claim records (claims.json)."""
    from normlab.claims.catalogue import all_claims
    from normlab.claims.output import write_outputs
    from normlab.claims.studies import StudyContext
    from normlab.errors import UserError
    from normlab.study.presets import SCALES

    t0 = time.time()
    say = progress or (lambda msg: None)
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
    out = Path(out)
    meta: dict[str, Any] = {"scale": None if quick else scale, "quick_only": quick}
    q = None
    if any(c.quick for c in chosen):
        q = _quick_data(seeds, depths, d_model, say)
        meta["probe"] = q.probe
    ctx = StudyContext(out, scale=scale, workers=workers, train=train, progress=progress is not None)
    if not quick:
        needed = _studies(chosen)
        for i, name in enumerate(needed, 1):
            say(f"[{i}/{len(needed)}] study {name} ({'training what is missing' if train else 'reading the store'})")
            ctx.trials(name)
    records = []
    for c in chosen:
        say(f"deciding {c.id}")
        records.append(c.decide(q if c.quick else ctx))
    meta["seconds"] = round(time.time() - t0, 1)
    if ctx.spans:
        meta["studies"] = {n: {"first_start": s, "last_finish": f, "wall_s": round(f - s, 1), "trials": len(ctx.trials(n))}
                           for n, (s, f) in ctx.spans.items()}
        meta["training_wall_s"] = round(max(f for _, f in ctx.spans.values()) - min(s for s, _ in ctx.spans.values()), 1)
    write_outputs(records, out, meta, q)
    return records


def _quick_data(seeds: int, depths: list[int] | None, d_model: int, say: Callable[[str], None]) -> Any:
    from normlab.claims.measure import measure
    from normlab.claims.measure_more import measure_extras

    say("probe grid at init: post, pre, deepnorm x depths x seeds")
    q = measure(seeds=seeds, depths=depths, d_model=d_model)
    say("extra measurements: identity coefficients, one-step change, exact checks")
    q.extra.update(measure_extras(seeds, q.depths, q.ref_depth(), progress=say))
    return q


def _studies(chosen: list[Any]) -> list[str]:
    """The studies the chosen training claims read, each once, in the claims' order."""
    return list(dict.fromkeys(n for c in chosen if not c.quick for n in c.studies))


__all__ = ["run_claims"]
