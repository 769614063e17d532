"""What became of a trial: it trains, it stalls at the unigram loss, or it diverges; and the
stability map of a study: the outcomes of its seeds per (placement, lr, depth, warm-up) cell.

A finished trial (completed or diverged) is, in this order:

* ``diverged``: the run says so (status diverged, or a ``diverged_at_step``), its best or
  final validation loss is not finite, or its final validation loss is above ln V (worse
  than predicting every symbol alike: it blew up without reaching NaN);
* ``stalls``: its best validation loss is not below the unigram cross-entropy of the data
  minus ``STALL_MARGIN``: it learned how often each symbol occurs and nothing of their order;
* ``trains``: otherwise.

The reference losses come from the data (``normlab.data.unigram.DataCE``), never typed in.
An outcome has a horizon (``Outcome.step``): the step it was judged at, the last step the run
trained (where it stopped, for a diverged run). ``normlab study status``, the study page, the
stability map and the claims all judge a trial here (``judge`` / ``classify``), so they agree.
Trials are read through the store's records (``Store.trials()``: status and summary.json);
a trial's own RunConfig (``RunDir.config``) is read only for an axis the study does not vary.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, NamedTuple

from normlab.core.errors import UserError
from normlab.data.unigram import DataCE, data_ce
from normlab.run.dir import RunDir
from normlab.study.store import TrialRecord

OUTCOMES = ("trains", "stalls", "diverged")

# A run "trains" once its best validation loss is this far below the unigram cross-entropy.
# Why 0.15 nats, measured on Tiny Shakespeare (docs/studies.md, stability maps): the bigram
# model of the training split scores 2.48 on the validation split, 0.87 below the unigram's
# 3.347, so 0.15 is about a sixth of what one symbol of context buys. A stalled run sits
# within ~0.015 of the unigram value (Post-LN, 24 blocks, lr 1e-3, no warm-up: 3.361; the
# deep-stability study's stuck runs: 3.358); the fixed validation windows of the cpu scale
# score 3.353 under the unigram itself, and other sets of as many windows spread by 0.017
# (sd), so 0.15 is ~9 of those spreads above the noise. Every run that trained in 200 steps
# ended 0.7-0.85 below the unigram (best val 2.51-2.63: post and pre at depth 6 and 24).
STALL_MARGIN = 0.15

AXES = {"placement": "model.placement", "lr": "optim.lr", "depth": "model.n_layer", "warmup": "optim.warmup_steps"}
FINAL = ("completed", "diverged")  # a failed trial raised: no outcome of training, counted as missing


class CellKey(NamedTuple):
    """One cell of a stability map (a plain tuple: ``cells[("post", 1e-3, 6, 0)]`` works)."""

    placement: str
    lr: float | None
    depth: int | None
    warmup: int | None


@dataclass
class Cell:
    """The seeds of one cell: their outcomes, best validation losses and trial ids (aligned)."""

    trial_ids: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)
    best_vals: list[float] = field(default_factory=list)  # nan where a run has none
    missing: int = 0  # trials of the cell with no outcome yet (pending, running, interrupted, failed)

    @property
    def n(self) -> int:
        """Seeds with an outcome."""
        return len(self.outcomes)

    @property
    def counts(self) -> dict[str, int]:
        """Seeds per outcome, every outcome present (in ``OUTCOMES`` order)."""
        return {o: self.outcomes.count(o) for o in OUTCOMES}

    def share(self, outcome: str) -> float:
        return self.outcomes.count(outcome) / self.n if self.n else 0.0

    def mean_best(self) -> float | None:
        """Mean best validation loss over the seeds that did not diverge (None: none did not)."""
        vals = [v for v, o in zip(self.best_vals, self.outcomes) if o != "diverged" and math.isfinite(v)]
        return statistics.fmean(vals) if vals else None


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def classify(trial: TrialRecord, ce: DataCE, margin: float = STALL_MARGIN) -> str | None:
    """The outcome of one trial (``OUTCOMES``), or None when it has none (not finished, or failed)."""
    if trial.status not in FINAL:
        return None
    s = trial.summary or {}
    if trial.status == "diverged" or s.get("status") == "diverged" or s.get("diverged_at_step") is not None:
        return "diverged"
    best, final = _number(s.get("best_val_loss")), _number(s.get("final_val_loss"))
    if best is None and final is None:
        return None  # never validated: nothing to judge it by
    if any(v is not None and not math.isfinite(v) for v in (best, final)):
        return "diverged"
    if final is not None and final > ce.uniform:
        return "diverged"
    best = best if best is not None else final
    assert best is not None
    return "stalls" if best >= ce.unigram - margin else "trains"


@dataclass(frozen=True)
class Outcome:
    """A trial's outcome (``OUTCOMES``) and its horizon: the step it was judged at (the last
    step it trained; where it stopped, for a diverged run; None when its summary has no step)."""

    kind: str
    step: int | None


def judge(trial: TrialRecord, ce: DataCE, margin: float = STALL_MARGIN) -> Outcome | None:
    """``classify`` with the step the outcome holds at (None when the trial has no outcome)."""
    kind = classify(trial, ce, margin)
    if kind is None:
        return None
    s = trial.summary or {}
    step = _number(s.get("diverged_at_step")) if kind == "diverged" else None
    step = step if step is not None else _number(s.get("steps"))
    return Outcome(kind, None if step is None else int(step))


def trial_ces(trials: Iterable[TrialRecord]) -> dict[str, DataCE]:
    """The reference losses of the data each finished trial's own run trained on
    (``RunDir.config().data``), by trial id; one corpus count per data setting. A trial
    without its run's config.json is left out (nothing says what it trained on)."""

    ces: dict[str, DataCE] = {}
    out: dict[str, DataCE] = {}
    for t in trials:
        run = RunDir(t.run_dir)
        if t.status not in FINAL or not run.is_run():
            continue
        data = run.config().data
        ce = ces.get(repr(data))
        if ce is None:
            ce = ces[repr(data)] = data_ce(data)
        out[t.id] = ce
    return out


def trial_outcomes(trials: Iterable[TrialRecord], ces: dict[str, DataCE] | None = None) -> dict[str, Outcome]:
    """The outcome of every finished trial with a run directory, by trial id, each judged
    against its own data (``ces``: ``trial_ces(trials)`` when not given)."""
    trials = list(trials)
    ces = trial_ces(trials) if ces is None else ces
    out = {t.id: judge(t, ces[t.id]) for t in trials if t.id in ces}
    return {k: v for k, v in out.items() if v is not None}


def horizon_text(outcomes: Iterable[Outcome]) -> str:
    """'at step 200', or 'at steps 100-200' when trials trained different lengths; diverged
    trials are judged where they stopped, which the text says when there are any."""
    got = list(outcomes)
    steps = sorted({o.step for o in got if o.kind != "diverged" and o.step is not None})
    text = ("at step " + str(steps[0]) if len(steps) == 1 else f"at steps {steps[0]}-{steps[-1]} (each trial's last step)"
            if steps else "at the last step of each trial")
    return text + ("; diverged trials where they stopped" if any(o.kind == "diverged" for o in got) else "")


def rule_text(ce: DataCE, margin: float = STALL_MARGIN, fmt: Callable[[float], str] = "{:.4g}".format) -> str:
    """The rule in one sentence with the data's numbers, each written by ``fmt`` (the pages pass
    the report's formatter): what `study status`, the study page and the stability map state."""
    return (f"diverges = non-finite loss, a run stopped as diverged, or a final validation loss above ln V = "
            f"{fmt(ce.uniform)}; stalls = best validation loss not below the unigram cross-entropy {fmt(ce.unigram)} "
            f"minus {fmt(margin)} = {fmt(ce.unigram - margin)} nats/token; trains otherwise")


def cell_key(trial: TrialRecord) -> CellKey:
    """The trial's (placement, lr, depth, warm-up): its axis values, else its own RunConfig's."""
    vals = {name: trial.params.get(key) for name, key in AXES.items()}
    if any(v is None for v in vals.values()):
        run = RunDir(trial.run_dir)
        if run.is_run():
            cfg = run.config()
            own = {"placement": cfg.model.placement, "lr": cfg.optim.lr, "depth": cfg.model.n_layer,
                   "warmup": cfg.optim.warmup_steps}
            vals = {k: own[k] if v is None else v for k, v in vals.items()}
    lr, depth, warmup = (_number(vals[k]) for k in ("lr", "depth", "warmup"))
    return CellKey("?" if vals["placement"] is None else str(vals["placement"]), lr, None if depth is None else int(depth),
                   None if warmup is None else int(warmup))


def map_cells(trials: Iterable[TrialRecord], data_ce: DataCE,
              margin: float = STALL_MARGIN) -> dict[CellKey, Cell]:
    """The stability map: every (placement, lr, depth, warm-up) cell of ``trials`` with the
    outcome, best validation loss and id of each seed, in the trials' order."""
    cells: dict[CellKey, Cell] = {}
    for t in trials:
        cell = cells.setdefault(cell_key(t), Cell())
        outcome = classify(t, data_ce, margin)
        if outcome is None:
            cell.missing += 1
            continue
        best = _number((t.summary or {}).get("best_val_loss"))
        cell.trial_ids.append(t.id)
        cell.outcomes.append(outcome)
        cell.best_vals.append(best if best is not None else math.nan)
    return cells


def map_variants(trials: Iterable[TrialRecord]) -> dict[str, list[TrialRecord]]:
    """The trials grouped by the study's axes beyond a map cell's (width, parametrisation,
    optimiser, init, ...: every parameter but the cell's four and the seed that takes more than
    one value), each group labelled "d_model=256, param=mup"; one group "" when nothing else
    varies. A map drawn over several groups at once would pool different models in one cell."""
    trials = list(trials)
    cell = set(AXES.values()) | {"seed"}
    keys = sorted({k for t in trials for k in t.params if k not in cell})
    varying = [k for k in keys if len({repr(t.params.get(k)) for t in trials}) > 1]
    groups: dict[str, list[TrialRecord]] = {}
    for t in trials:
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={t.params.get(k)}" for k in varying)
        groups.setdefault(label, []).append(t)
    return groups


def study_data_ce(trials: Iterable[TrialRecord]) -> DataCE:
    """The reference losses of the data the trials trained on (their RunConfigs' ``data``); a
    map compares one corpus, so trials on several are refused."""

    seen: dict[str, Any] = {}  # repr of a DataConfig -> the DataConfig
    for t in trials:
        run = RunDir(t.run_dir)
        if run.is_run():
            data = run.config().data
            seen.setdefault(repr(data), data)
    if not seen:
        raise UserError("no trial has a run directory yet: the map needs the data a run trained on")
    if len(seen) > 1:
        raise UserError(f"the trials trained on {len(seen)} different data settings; a stability map "
                        "compares one corpus and split: map each study separately")
    return data_ce(next(iter(seen.values())))


__all__ = ["AXES", "OUTCOMES", "STALL_MARGIN", "Cell", "CellKey", "Outcome", "cell_key", "classify", "horizon_text",
           "judge", "map_cells", "map_variants", "rule_text", "study_data_ce", "trial_ces", "trial_outcomes"]
