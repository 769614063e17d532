"""A study context read at one stage: ``HorizonContext(ctx, H)``.

A staged study (``StudySpec.stages``) is read at a stage H through its runs' files up to step H
(``normlab.study.at_horizon``): each trial this context serves is its run as if it had stopped
at H, a view written under ``OUT/horizons/step-H/<study>/<id>``. Every claim's measure then runs
unchanged: ``gain`` reads the best validation loss by H, ``first_eval`` the first evaluation,
``outcome`` the outcome at H, the diagnostics their last line up to H, and the critical lrs are
fitted at H (the study's spec is served with ``train.steps = H``, which is the horizon
``training_frontier.horizon`` reads).

What cannot be read at a horizon refuses, in one line naming the claim (:class:`NotAtHorizon`,
which ``claims/settling.py`` prefixes with the claim): a study without stages (its runs stop at
train.steps, or follow a schedule that a longer run does not share), a stage the study does not
have, and a checkpoint's analysis (``ctx.analysis``: a run keeps the checkpoint of its last step
only, so a layer-deletion measurement at H would read another step's weights).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

from normlab.claims.studies import StudyContext
from normlab.core.errors import UserError
from normlab.study.at_horizon import read_at

HORIZONS = "horizons"  # OUT/horizons/step-H/<study>/<trial id>: the runs read at H


class NotAtHorizon(UserError):
    """A quantity that cannot be read at a stage's horizon (the message says why)."""


class HorizonContext(StudyContext):
    """``base`` with its staged studies read at step ``horizon``; it trains nothing (the
    settling engine resumes the runs before it reads them)."""

    def __init__(self, base: StudyContext, horizon: int) -> None:
        super().__init__(out=base.out, scale=base.scale, workers=base.workers, train=False, display=base.display,
                         seeds=base.seeds, stages=base.stages)
        self.base = base
        self.read_at = int(horizon)

    def root(self, name: str) -> Path:
        """Where the views of study ``name`` at this horizon are written."""
        return Path(self.out) / HORIZONS / f"step-{self.read_at}" / name

    def spec(self, name: str) -> Any:
        """The study as read here: its spec with ``train.steps`` at this horizon and no stages (a
        study read at H is a study trained for H steps)."""
        spec = self.base.spec(name)
        self._check_staged(name, spec)
        base = copy.deepcopy(spec.base)
        base.setdefault("train", {})["steps"] = self.read_at
        return dataclasses.replace(spec, base=base, stages=None, extend_stalled_to=None)

    def _check_staged(self, name: str, spec: Any) -> None:
        stages = getattr(spec, "stages", None)
        if not stages:
            raise NotAtHorizon(f"study {name!r} has no stages: its runs stop at train.steps, so it cannot be read at "
                               f"step {self.read_at}")
        if self.read_at not in stages:
            raise NotAtHorizon(f"study {name!r} is staged at steps {stages}, not at {self.read_at}")

    def trials(self, name: str) -> list[Any]:
        """The trials of study ``name``, each read at this horizon."""
        if name not in self._done:
            self._check_staged(name, self.base.spec(name))
            self._done[name] = [read_at(t, self.read_at, self.root(name)) for t in self.base.trials(name)]
            if name in self.base.spans:
                self.spans[name] = self.base.spans[name]
        return self._done[name]

    def data_ce(self, t: Any) -> Any:
        return self.base.data_ce(t)  # the data a run trained on does not change with the horizon

    def analysis(self, t: Any, checkpoint: str = "latest") -> dict[str, Any]:
        raise NotAtHorizon(f"it analyses a checkpoint (trial {t.id}), and a run keeps the checkpoint of its last "
                           f"step only: it cannot be read at step {self.read_at}")

    def cache_name(self, claim: str) -> str:
        return f"{claim}@step{self.read_at}"


__all__ = ["HORIZONS", "HorizonContext", "NotAtHorizon"]
