"""What the training claims decide on: study stores, and the per-trial quantities of their rules.

``StudyContext.trials(name)`` runs the study preset ``name`` at the context's scale into
``OUT/stores/<name>`` (:func:`normlab.study.runner.run_study`; the store caches every finished
trial by config hash, so a rerun trains only what is missing) and returns its trial records.
With ``train=False`` it reads the stores as they are and trains nothing (re-deciding after a
rule change, or on a machine without the time).

Per-trial quantities (one value per seed, None when the trial has not finished):

- :func:`gain`: min(best val loss, ln V) - ln V, in nats, V the vocabulary size: progress
  below a uniform prediction (the loss a small-init model starts at); a diverged run counts
  as 0 (no progress). "Trains" means a gain below -1 nat.
- :func:`first_eval`: val loss at the first evaluation after step 0 ("converges faster").
- :func:`clip_fraction`: share of logged steps whose pre-clip gradient norm exceeds 1.0.
- :func:`last_diag` / :func:`series_mean`: the in-training diagnostics of a run.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from normlab.claims.cache import key
from normlab.claims.claim import Measured
from normlab.claims.registration import study_spec
from normlab.core.errors import UserError
from normlab.data.unigram import data_ce
from normlab.diagnostics.analyze import analyze_run
from normlab.diagnostics.sensitivity import run_point
from normlab.run.dir import RunDir
from normlab.stats.effects import welch
from normlab.study.executors import default_workers
from normlab.study.horizons import horizon_cells
from normlab.study.outcome import classify
from normlab.study.runner import run_study
from normlab.study.store import FINAL, Store


@dataclass
class StudyContext:
    """Runs (or reads) and caches the studies of the full claims check."""

    out: Path
    scale: str = "cpu"
    workers: int | None = None
    train: bool = True
    display: Any = None  # a normlab.core.progress.Progress shared by every study of the run
    _done: dict[str, list[Any]] = field(default_factory=dict)
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)  # first start, last finish
    _ce: dict[str, Any] = field(default_factory=dict)  # reference losses per data setting
    seeds: dict[str, list[int]] = field(default_factory=dict)  # a registration's seeds per study (else the preset's)
    stages: dict[str, list[int]] = field(default_factory=dict)  # nested horizons per study (claims/settling.py)

    def spec(self, name: str) -> Any:
        """Study preset ``name`` at this scale, with the registered seeds where a registration names
        them, and the stages ``stages`` gives it (they supersede the preset's extend_stalled_to)."""
        return study_spec(name, self.scale, self.seeds.get(name), self.stages.get(name))

    def store_dir(self, name: str) -> Path:
        return Path(self.out) / "stores" / name

    def plan(self, names: list[str]) -> None:
        """Put every trial of the studies ``names`` on the display (one total for the run) and
        say how many the stores already hold."""

        total = done = 0
        for name in names:
            ids = {t.id for t in self.spec(name).trials()}
            total += len(ids)
            if Store.is_made(self.store_dir(name)):
                store = Store(self.store_dir(name))
                done += sum(t.id in ids and t.status in FINAL for t in store.trials())
                store.close()
        if self.display is not None:
            self.display.add("trial", total, done)
            self.display.note(f"{len(names)} stud{'y' if len(names) == 1 else 'ies'} at scale {self.scale}: {done}/{total} trials already "
                              f"in {Path(self.out) / 'stores'}, {total - done} to train")

    def trials(self, name: str) -> list[Any]:
        """The trial records of study ``name`` at this scale, training whatever is missing."""
        if name not in self._done:
            if self.train:  # a claims run needs every trial: ones that failed before are tried again
                store = run_study(self.spec(name), self.store_dir(name),
                                  workers=self.workers or default_workers(1), progress=self.display is not None,
                                  display=self.display, retry_failed=True)
            elif Store.is_made(self.store_dir(name)):
                store = Store(self.store_dir(name))
            else:
                raise UserError(f"{self.store_dir(name)}: no store for study {name!r}; run `normlab claims` "
                                "without --no-train to train it")
            self._done[name] = store.trials()
            failed = [t for t in self._done[name] if t.status == "failed"]
            if failed:  # a verdict on part of a study would be read as one on all of it
                store.close()
                total = len(self._done.pop(name))  # nothing half-read is served to a later claim
                first = (failed[0].error or "?").strip().splitlines()[0]
                again = "rerun the same command (failed trials are tried again)" if self.train else \
                    "rerun without --no-train (failed trials are tried again)"
                raise UserError(f"{self.store_dir(name)}: {len(failed)} of {total} trials of "
                                f"study {name!r} failed, so no claim on it is decided; first error: {first}. "
                                f"Fix the cause, then {again}")
            span = store.span()
            if span is not None:
                self.spans[name] = span
            store.close()
        return self._done[name]

    def record(self, c: Any, cache: Any) -> dict[str, Any]:
        """Claim ``c``'s record: from the cache when its studies' trials are what it was decided
        on (same ids, statuses and summaries), else decided now and cached."""
        import hashlib
        import json

        stores = {n: hashlib.sha256(json.dumps([(t.id, t.status, t.summary) for t in self.trials(n)],
                                               sort_keys=True, default=str).encode()).hexdigest()
                  for n in c.studies}
        k = key(claim=c.id, rule=c.rule_hash(self.scale), code=c.code_hash(), scale=self.scale, stores=stores)
        got = cache.get("claims", self.cache_name(c.id), k)
        if got is None:
            if self.display is not None:
                self.display.item(f"deciding {c.id}")
            got = cache.put("claims", self.cache_name(c.id), k, c.decide(self))
        for p in [*got["parts"], *got.get("checks", [])]:  # read off the trials, so a cached record gets it too
            # a part read at another horizon (a critical lr at the long one) names it in its numbers
            p["horizon"] = (p.get("numbers") or {}).get("horizon") or self.horizon(p.get("trials", []))
        return got

    def cache_name(self, claim: str) -> str:
        """The name claim ``claim``'s record is cached under (a horizon context adds its step)."""
        return claim

    def horizon(self, ids: list[str]) -> int | list[int] | None:
        """The step the trials ``ids`` were judged at: their length as the store records it (the
        study's train.steps; diverged runs, which stopped early, are left out). A list when the
        trials had different lengths; None when none finished."""
        by_id = {t.id: t for ts in self._done.values() for t in ts}
        steps = sorted({int(s) for i in ids if (t := by_id.get(i)) is not None and t.status == "completed"
                        and isinstance(s := (t.summary or {}).get("steps"), int)})
        return None if not steps else steps[0] if len(steps) == 1 else steps

    def map_outcomes(self, names: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
        """Each map study's cells (of ``names``, those this context read) with their seeds'
        outcomes at each horizon and the step at which each seed left the plateau."""
        out = {}
        for name in names:
            trials = self._done.get(name, [])
            if not any(t.status == "completed" for t in trials):
                continue
            cells = horizon_cells(trials, self.reference(name))
            out[name] = [{"placement": k.placement, "lr": k.lr, "depth": k.depth, "warmup": k.warmup, **c.record()}
                         for k, c in cells.items()]
        return out

    def analysis(self, t: Any, checkpoint: str = "latest") -> dict[str, Any]:
        """``normlab analyze`` of trial ``t``'s checkpoint, written to ``OUT/analysis/<study>/<id>``
        (never into the run directory: deciding a claim leaves its study store as it was)."""

        study = Path(t.run_dir).parent.parent.name  # STORE/runs/<id>: the store is named after its study
        return analyze_run(t.run_dir, checkpoint=checkpoint, out=Path(self.out) / "analysis" / study / t.id)

    def studies_read(self) -> list[str]:
        """The studies whose trials this context has served, in the order first asked for."""
        return list(self._done)

    def data_ce(self, t: Any) -> Any:
        """The reference losses (unigram cross-entropy, ln V) of the data trial ``t`` trained on,
        computed from the corpus (``normlab.data.unigram``), cached per data setting."""

        data = RunDir(t.run_dir).config().data
        key = repr(data)
        if key not in self._ce:
            self._ce[key] = data_ce(data)
        return self._ce[key]

    def outcome(self, t: Any) -> str | None:
        """'trains', 'stalls' or 'diverged' (``normlab.study.outcome``); None if unfinished."""

        # a failed or unfinished trial may have no config to read the data from
        return classify(t, self.data_ce(t)) if t.status in ("completed", "diverged") else None

    def reference(self, study: str = "stability-map") -> Any:
        """The reference losses (unigram cross-entropy, ln V) of the data study ``study`` trained on."""
        return self.data_ce(next(t for t in self.trials(study) if t.status == "completed"))

    def describe(self, name: str) -> str:
        t = self.trials(name)
        seeds = len({r.params.get("seed") for r in t})
        return f"study '{name}' at scale {self.scale}: {len(t)} trials, {seeds} seed(s)"


# Axes added to a study after some of its stores were made: a trial without the key ran at this value.
_ABSENT = {"model.impl": "normlab"}


def where(trials: list[Any], params: dict[str, Any]) -> list[Any]:
    """Trials whose params match the dotted keys of ``params``."""
    return [t for t in trials if all(t.params.get(k, _ABSENT.get(k)) == v for k, v in params.items())]


def values(trials: list[Any], fn: Callable[[Any], float | None]) -> tuple[list[float], list[str]]:
    """fn of each trial (None dropped) and the ids of the trials that gave a value."""
    vals, ids = [], []
    for t in trials:
        v = fn(t)
        if v is not None and math.isfinite(v):
            vals.append(float(v))
            ids.append(t.id)
    return vals, ids


def init_loss(t: Any) -> float | None:
    """The run's loss at init as Wortsman et al. use it (step-0 val loss, else ln V)."""

    if not RunDir(t.run_dir).is_run():
        return None
    return float(run_point(t.run_dir)["init_loss"])


def uniform_loss(t: Any) -> float | None:
    """ln V, the loss of a uniform prediction over the run's vocabulary."""

    run = RunDir(t.run_dir)
    return math.log(run.config().model.vocab_size) if run.is_run() else None


def gain(t: Any) -> float | None:
    """min(best val loss, ln V) - ln V; diverged -> 0; unfinished -> None."""
    if t.status == "diverged":
        return 0.0
    best = (t.summary or {}).get("best_val_loss") if t.status == "completed" else None
    ref = uniform_loss(t) if best is not None else None
    if best is None or ref is None or not math.isfinite(best):
        return None
    return min(float(best), ref) - ref


def final_capped(t: Any) -> float | None:
    """min(final val loss, loss at init) as Wortsman et al. count it; diverged -> loss at init."""
    init = init_loss(t)
    if init is None or t.status not in ("completed", "diverged"):
        return None
    final = (t.summary or {}).get("final_val_loss") if t.status == "completed" else None
    return min(float(final), init) if final is not None and math.isfinite(final) else init


def first_eval(t: Any) -> float | None:
    """Validation loss at the first eval after step 0."""

    if t.status != "completed":
        return None
    vals = [r["val/loss"] for r in RunDir(t.run_dir).metrics() if "val/loss" in r and r.get("step", 0) > 0]
    return float(vals[0]) if vals and vals[0] is not None and math.isfinite(vals[0]) else None


def grad_norms(t: Any) -> list[float] | None:
    """The logged pre-clip gradient norms of a completed trial (steps > 0); None if unfinished."""

    if t.status != "completed":
        return None
    return [r["grad_norm"] for r in RunDir(t.run_dir).metrics() if r.get("grad_norm") is not None and r.get("step", 0) > 0]


def spike_ratio(t: Any) -> float | None:
    """log10 of the largest logged pre-clip gradient norm over its median (steps > 0): an
    explosion is a spike far above the run's typical norm."""
    g = grad_norms(t)
    med = statistics.median(g) if g else 0.0
    return math.log10(max(g) / med) if g and med > 0 else None


def spike_score(t: Any) -> float | None:
    """OLMo-core's SpikeScore at the run's last diagnostics line: spike steps / steps, a spike a
    loss or gradient norm 6 sigma above the trailing 128 steps (``normlab.diagnostics.spikes``);
    None before the window has passed (a run shorter than 128 steps)."""
    if t.status != "completed":
        return None
    v = (last_diag(t.run_dir) or {}).get("spike_score")
    return None if v is None else float(v)


def clip_fraction(t: Any, clip: float = 1.0) -> float | None:
    """Share of the logged training steps (step > 0) whose pre-clip gradient norm exceeds ``clip``."""
    g = grad_norms(t)
    return sum(x > clip for x in g) / len(g) if g else None


def last_diag(run_dir: Path) -> dict[str, Any] | None:
    """The last line of RUN/diagnostics.jsonl, and the first one as ``first`` (None if absent)."""

    recs = RunDir(run_dir).diagnostics()
    return {**recs[-1], "first": recs[0]} if recs else None


def series_mean(run_dir: Path, key: str, frac: float = 0.25, file: str = "metrics",
                last: bool = True) -> float | None:
    """Mean of a JSONL series of the run (``file``: metrics or diagnostics) over its last
    ``frac`` of lines (``last=False``: its first ``frac``); None without values."""

    run = RunDir(run_dir)
    vals = [r[key] for r in (run.diagnostics() if file == "diagnostics" else run.metrics()) if r.get(key) is not None]
    if not vals:
        return None
    k = max(1, int(len(vals) * frac))
    return float(statistics.fmean(vals[-k:] if last else vals[:k]))


def welch_cells(ctx: StudyContext, study: str, a: dict[str, Any], b: dict[str, Any], fn: Callable[[Any], float | None] = gain,
                labels: tuple[str, str] = ("a", "b")) -> Measured:
    """fn over the seeds of cell ``a`` minus cell ``b`` of ``study`` (Welch); the per-seed values
    under ``labels`` in the numbers."""
    va, ia = values(where(ctx.trials(study), a), fn)
    vb, ib = values(where(ctx.trials(study), b), fn)
    return Measured(welch(va, vb), ia + ib, {labels[0]: va, labels[1]: vb})
