"""Step 2 of a claims run: the studies the chosen training claims read, trained into
``OUT/stores/<study>`` (each store keeps every finished trial, so a rerun trains only what is
missing), or, with ``--no-train``, read as they are. Quick claims need no training: they are
measured at initialisation as they are decided (``claims/decide.py``)."""

from __future__ import annotations

from normlab.claims.plan import ClaimsPlan


def train(p: ClaimsPlan) -> None:
    """Run (or read) every study of ``p.studies``, in the claims' order, one progress item each."""
    for i, name in enumerate(p.studies, 1):
        p.display.item(f"study {name} [{i}/{len(p.studies)}]")
        p.ctx.trials(name)
