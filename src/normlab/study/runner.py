"""Run a study end to end: validate the spec, create/reopen the store, hand it to an executor."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from normlab.core import stopping
from normlab.core.errors import ConfigError, UserError
from normlab.core.progress import Progress as Display
from normlab.study.executors import EXECUTORS, default_workers
from normlab.study.extend import extend_stalled
from normlab.study.outcome import OUTCOMES, horizon_text, rule_text, trial_ces, trial_outcomes
from normlab.study.results import format_results, results
from normlab.study.spec import StudySpec, spec_from_dict
from normlab.study.store import Store
from normlab.study.worker import WorkerOptions

if TYPE_CHECKING:
    from normlab.core.progress import Progress as Display


def open_store(spec: StudySpec | None, store_root: str | Path) -> Store:
    """The store for ``spec`` (validated, created if needed); ``spec=None`` reopens an existing
    store with the spec it was created with (``normlab study run --store DIR``)."""
    root = Path(store_root)
    if spec is None:
        if not Store.is_made(root):
            raise UserError(f"--store {root}: no study there yet; name a study file or preset to start one")
        spec = spec_from_dict(Store(root).spec)
    trials = spec.trials()  # builds and validates every trial's RunConfig before anything runs
    return Store.create(root, spec.to_json_data(), trials, spec.runs_dir)


def run_study(spec: StudySpec | None, store_root: str | Path, *, executor: str = "local",
              workers: int | None = None, threads: int = 1, address: str | None = None,
              lease_s: float = 60.0, heartbeat_s: float | None = None, poll_s: float = 1.0,
              progress: bool | None = None, batch: int | None = None,
              display: "Display | None" = None, retry_failed: bool = False, options: Any = None) -> Store:
    """Run every unfinished trial of the study in ``store_root``; returns the store.

    Safe to rerun after any crash, and to run twice at once on the same store: trials are
    claimed in SQLite transactions (see :mod:`normlab.study.store`). ``progress``: finished
    trials, the running ones and an ETA on stderr (a bar on a terminal, plain lines
    otherwise; False: nothing); ``display``: feed this :class:`normlab.core.progress.Progress`
    instead (one display over several studies), which the caller closes. ``batch``: train up to
    this many compatible fresh trials as one batched computation in a local worker or a Slurm
    job (``normlab.train.batched``); None picks 8 when a GPU is present and 1 on CPU, where
    batching measured 1.0x and one trial per core is faster (docs/performance.md), and lets
    the slurm executor size its packs (``normlab.study.slurm_script.pack_size``). ``options``:
    the executor's own section (``SlurmConfig`` for slurm; None: its defaults). A spec with
    ``extend_stalled_to`` then resumes its stalled trials to that horizon (``normlab.study.extend``).
    ``retry_failed``: put the store's failed trials back to pending first (``Store.requeue_failed``).
    SIGINT or SIGTERM: the trials stop at their checkpoints, then this raises KeyboardInterrupt
    (``normlab.core.stopping.received()`` names the signal).
    """

    chosen = EXECUTORS.get(executor)
    if options is not None and (chosen.options is None or not isinstance(options, chosen.options)):
        raise UserError(f"--executor {executor} takes no {type(options).__name__} options "
                        "(the --slurm options are for --executor slurm)")
    if threads < 1:
        raise ConfigError("--threads-per-run", threads, "must be >= 1")
    if workers is not None and workers < 1:
        raise ConfigError("--workers", workers, "must be >= 1")
    if lease_s <= 0:
        raise ConfigError("--lease", lease_s, "must be > 0 seconds, e.g. 60")
    if batch is not None and batch < 1:
        raise ConfigError("--batch", batch, "must be >= 1 (1 = no trial batching)")
    if batch is not None and batch > 1 and not chosen.batches:
        raise ConfigError("--batch", batch, f"--executor {executor} trains one trial per task; use "
                          "--executor local or slurm to batch trials, or --batch 1")
    # SIGTERM stops a study as Ctrl-C does, so that both end in the line naming the command
    # that resumes (the executors pass the signal on to their trials).
    with stopping.handling(stopping.interrupt):
        if batch is None:
            import torch

            batch = 0 if chosen.sizes_packs else 8 if chosen.batches and torch.cuda.is_available() else 1
        store = open_store(spec, store_root)
        if retry_failed:
            store.requeue_failed()
        resolved = store.spec
        beat = heartbeat_s if heartbeat_s is not None else max(0.2, min(5.0, lease_s / 6))
        opts = WorkerOptions(threads=threads, lease_s=lease_s, heartbeat_s=beat, poll_s=poll_s,
                             retries=int(resolved.get("retries", 1)), trial=str(resolved.get("trial", "train")),
                             batch=batch)
        store.close()
        with _display(progress, display, "normlab") as shown:
            with StorePoller(store.root, shown, plan=display is None):
                chosen.run(store.root, opts, workers=workers or default_workers(threads), address=address,
                           options=options)
            if stopping.received() is not None:  # the trials stopped at their checkpoints
                raise KeyboardInterrupt
            if resolved.get("extend_stalled_to") is not None:  # on this machine, whatever the executor
                extend_stalled(store.root, int(resolved["extend_stalled_to"]),
                               workers=workers or default_workers(threads), threads=threads, display=shown)
    return Store(store.root)


@contextlib.contextmanager
def _display(progress: bool | None, display: "Display | None", label: str) -> Iterator["Display"]:
    """The caller's display, or one of our own on stderr (closed here, with its final line)."""
    if display is not None:
        yield display
        return

    own = Display(label, enabled=progress is not False)
    try:
        yield own
    finally:
        own.close()


def found_text(store: Store) -> str:
    """What a (re)opened store holds, said before anything runs: 'resuming: 12/16 trials done ...'."""
    counts = store.counts()
    total = sum(counts.values())
    done = sum(counts.get(k, 0) for k in ("completed", "diverged", "failed"))
    name = store.spec.get("name")
    if not done and not counts.get("interrupted") and not counts.get("running"):
        return f"study {name!r} in {store.root}: {total} trials to run"
    how = ", ".join(f"{k} {counts[k]}" for k in ("completed", "diverged", "failed") if counts.get(k))
    text = f"resuming study {name!r} in {store.root}: {done}/{total} trials done" + (f" ({how})" if how else "")
    again = counts.get("interrupted", 0) + counts.get("running", 0)
    if again:
        text += f"; {again} started before will resume from their checkpoints"
    return text + ("" if done < total else "; nothing to run")


class StorePoller:
    """Feeds a display the store's finished trials and the running ones, from its own thread.

    It reads the database (the source of truth), so it works the same for every executor
    and for trials that other processes run on the same store. ``plan``: add the store's
    trials to the display (False when the caller planned them, as ``normlab claims`` does
    for all its studies at once).
    """

    def __init__(self, root: Path, display: "Display", plan: bool = True, every_s: float = 2.0) -> None:
        self.root, self.display, self.plan, self.every_s = root, display, plan, every_s
        self._stop: Any = None

    def __enter__(self) -> "StorePoller":
        import threading

        store = Store(self.root)
        try:
            self.display.note(found_text(store))
            self.done = _final(store.counts())
            if self.plan:
                self.display.add("trial", len(store.trials()), self.done)
            self.display.start("trial")
        finally:
            store.close()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="normlab-study-progress")
        self._thread.start()
        return self

    def _loop(self) -> None:
        store = Store(self.root)  # this thread's own connection
        try:
            while True:
                self._update(store)
                if self._stop.wait(self.every_s):
                    self._update(store)
                    return
        finally:
            store.close()

    def _update(self, store: Store) -> None:
        try:
            done = _final(store.counts())
            running = store.running()
        except Exception:  # a busy database must not end the run; the next poll reads it
            return
        if running:
            first = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in running[0][1].items())
            more = f" (+{len(running) - 1} more)" if len(running) > 1 else ""
            self.display.item(f"{self.root.name}: {first}{more}")
        self.display.advance("trial", done - self.done)
        self.done = max(self.done, done)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _final(counts: dict[str, int]) -> int:
    return sum(counts.get(k, 0) for k in ("completed", "diverged", "failed"))


def status_text(store: Store) -> str:
    """``normlab study status``: counts by status, the results table, failed trials' errors."""

    spec: dict[str, Any] = store.spec
    trials = store.trials()
    counts = store.counts()
    order = ["completed", "diverged", "failed", "running", "interrupted", "pending"]
    parts = [f"{k} {counts[k]}" for k in order if counts.get(k)]
    lines = [f"study {spec.get('name')!r} in {store.root}: {len(trials)} trials: " + ", ".join(parts)]
    missing = [t.id for t in trials if t.status in ("completed", "diverged") and not t.run_dir.is_dir()]
    if missing:
        lines.append(f"warning: {len(missing)} finished trials lack their run directory: {', '.join(missing[:5])}")
    metric = str(spec.get("metric", "best_val_loss"))
    rows = results(trials, list(spec.get("scientific", [])), list(spec.get("nuisance", [])), metric)
    lines += ["", format_results(rows, metric), *outcome_lines(trials)]
    failed = [t for t in trials if t.status == "failed"]
    if failed:
        lines += ["", "failed trials:"]
        for t in failed:
            first = (t.error or "").strip().splitlines()[0] if t.error else "?"
            lines.append(f"  {t.id} {t.params}: {first}")
        lines.append("fix the cause, then `normlab study run --store DIR --retry-failed` runs them again")
    return "\n".join(lines)


def outcome_lines(trials: list[Any]) -> list[str]:
    """Each finished trial's outcome by the lab's one rule (``normlab.study.outcome``: trains,
    stalls at the unigram loss, diverged), with the step it was judged at and the rule's
    numbers; the trials that did not train are listed. Empty when no trial has an outcome."""

    try:
        ces = trial_ces(trials)
    except UserError as e:  # the data a run trained on is gone: say so, the table above stands
        return ["", f"outcomes: not judged ({e})"]
    got = trial_outcomes(trials, ces)
    if not got:
        return []
    counts = ", ".join(f"{k} {sum(o.kind == k for o in got.values())}" for k in OUTCOMES)
    lines = ["", f"outcomes {horizon_text(got.values())}: {counts}"]
    refs = set(ces.values())
    if len(refs) == 1:
        lines.append(f"  rule: {rule_text(refs.pop())}")
    for t in trials:
        o = got.get(t.id)
        if o is not None and o.kind != "trains":
            best = (t.summary or {}).get("best_val_loss")
            val = f"best val loss {best:.4f}" if isinstance(best, (int, float)) else "no val loss"
            lines.append(f"  {o.kind} at step {o.step}: {t.id} {_params(t.params)} ({val})")
    return lines


def _params(params: dict[str, Any]) -> str:
    return " ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in params.items())
