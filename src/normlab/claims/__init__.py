"""``normlab claims``: every claim of REFERENCE.md sections 4-5 as an object with a verdict.

``run_claims(quick=True, out=DIR)`` measures (one probe grid at initialisation plus exact
checks, see ``measure.py``), decides each registered claim (``quick.py``; training claims in
``training.py``) and writes ``DIR/claims.json``, ``DIR/index.html`` and ``DIR/figures/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run_claims(quick: bool = True, out: str | Path = "claims", only: list[str] | None = None,
               seeds: int = 5, depths: list[int] | None = None, d_model: int = 128,
               scale: str = "cpu", workers: int | None = None) -> list[dict[str, Any]]:
    """Decide the claims and write the outputs; returns the claim records (claims.json).

    Quick claims share one probe grid (measured only when one of them is chosen); training
    claims (``quick=False``) run their study at ``scale`` into ``out/stores/<study>``."""
    from normlab.claims import quick as _quick  # noqa: F401  (registers the quick claims)
    from normlab.claims import training as _training  # noqa: F401
    from normlab.claims import training_diag as _training_diag  # noqa: F401
    from normlab.claims.catalogue import CLAIMS
    from normlab.claims.measure import deepnorm_constants, gpt2_parity, measure, rms_formulas, save_figures
    from normlab.claims.output import write_outputs
    from normlab.claims.studies import StudyContext
    from normlab.errors import UserError
    from normlab.study.presets import SCALES

    if seeds < 2:
        raise UserError(f"--seeds={seeds}: need at least 2 seeds for a spread")
    if scale not in SCALES:
        raise UserError(f"--scale={scale}: choose one of {', '.join(SCALES)}")
    chosen = [CLAIMS.get(i) for i in only] if only else [c for _, c in CLAIMS.items()]
    chosen = [c for c in chosen if c.quick or not quick]
    out = Path(out)
    probe: dict[str, Any] = {}
    q = None
    if any(c.quick for c in chosen):
        q = measure(seeds=seeds, depths=depths, d_model=d_model)
        q.extra["rms"] = rms_formulas()
        q.extra["deepnorm"] = deepnorm_constants(q.probe["depths"])
        q.extra["gpt2"] = gpt2_parity()
        save_figures(q, out)
        probe = q.probe
    ctx = StudyContext(out, scale=scale, workers=workers)
    records = [c.record(c.decide(q if c.quick else ctx)) for c in chosen]
    if not quick:
        probe = {**probe, "training_scale": scale,
                 "stores": {n: str(ctx.store_dir(n)) for n in ctx._done}}
    write_outputs(records, out, probe)
    return records


__all__ = ["run_claims"]
