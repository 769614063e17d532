"""``normlab claims``: every claim of the literature and the seed documents as an object with
parts, rules declared with the claim (and, with ``registration``, checked against a committed
pre-registration), effects with 95% intervals over seeds, and verdicts.

A run is four steps, one module each: ``plan`` (which claims, what data they need, the
registration checked), ``train`` (the studies the training claims read, into ``OUT/stores/``),
``decide`` (each claim by its rules, ``claim.Claim.decide``; a quick claim is measured at
initialisation on what it declares it needs as it is decided) and ``publish``
(``OUT/claims.json``, ``index.html``, ``figures/``, ``history.jsonl``). The quick claims need no
training and are decided first. Every launch that passes its plan appends a launch line to
``OUT/history.jsonl`` and, however it ends (completed, failed, interrupted), an end line
(``claims/history.py``). Every decided claim and probe cell is kept in ``OUT/cache/``
(``claims/cache.py``), so an interrupted run resumes where it stopped. The claims themselves
are defined in ``claims/catalogue/``. How a verdict is reached: docs/theory.md.
"""

from __future__ import annotations

import time
from typing import Any

# The steps by module: each module's entry has the module's own name, and a function imported
# here under that name would hide the submodule (``normlab.claims.plan`` would be the function).
from normlab.claims import decide as decide_step
from normlab.claims import history, measuring_code
from normlab.claims import plan as plan_step
from normlab.claims import publish as publish_step
from normlab.claims import train as train_step
from normlab.claims.claim import describe
from normlab.claims.options import ClaimsRun
from normlab.claims.output import provenance
from normlab.core import stopping


def run_claims(run: ClaimsRun | None = None, /, **options: Any) -> list[dict[str, Any]]:
    """Decide the claims and write the outputs; returns the claim records (claims.json).

    ``run``, or the options of :class:`ClaimsRun` by name (``quick``, ``out``, ``only``,
    ``seeds``, ``scale``, ``train``, ``cache``, ``registration``, ...). ``progress``: True for
    finished/total, the current item and an ETA on stderr, or a
    :class:`normlab.core.progress.Progress` to feed (the caller closes it)."""

    started = time.time()
    run = run if run is not None else ClaimsRun(**options)
    # SIGTERM stops a claims run as Ctrl-C does, so that both leave the end line of the launch
    with stopping.handling(stopping.interrupt):
        p = plan_step.plan(run)
        try:  # every launch is in history.jsonl, however it ends
            launch = history.Launch(run.out, provenance(), p, measuring_code.combined(
                measuring_code.section(p.claims)["modules"]), started)
        except BaseException:
            p.close()
            raise
        with launch:
            try:
                got = decide_step.decide(p, p.quick_claims)
                train_step.train(p)
                got.update(decide_step.decide(p, p.training_claims))
            finally:
                p.close()
            records = [got[c.id] for c in p.claims]
            if p.registration is not None:  # parts registered with no verdict are measured, never decided
                describe(records, p.registration.descriptive())
            publish_step.publish(p, records, started, launch.id)
    return records


__all__ = ["ClaimsRun", "run_claims"]
