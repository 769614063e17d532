"""Trial batching: K runs that share an architecture trained as one batched computation.

Each trial keeps its own weights, seed (init and data), learning rate, warm-up, schedule,
AdamW state, clipping, z-loss, divergence status and run directory. Their parameters are
stacked along a new leading dimension (K, ...) and the model is evaluated with
``torch.func.vmap`` over that dimension, so one batched matmul replaces K small ones and
the per-op overhead that bounds tiny models on CPU is paid once instead of K times.

The arithmetic per trial is the solo loop's (``normlab.train.loop.Trainer``): same init
(``torch.manual_seed(seed)`` then ``TransformerLM``), same batches (``train_batch``), the
same clipping and AdamW kernels on each trial's slices (``normlab.train.step``, decay on
matrices only, ``optim.param_groups``), the same eval/log/checkpoint steps
(``normlab.train.cadence``) and the same run-directory files. Loss curves agree with solo
runs to float32 rounding (tests/bench/test_batched.py).

Limits (``incompatibility`` names the first one met, ``run_batched`` refuses with it):
  * dropout must be 0: random masks inside vmap cannot reproduce a solo run's masks;
  * placements with per-step weight hooks (nGPT's ``after_step``) are refused;
  * train.diag_every must be 0 (diagnostic hooks see one model, not a stack);
  * model.impl must be the lab's (another implementation's parameters are not stacked);
  * the model, data and train sections must be equal (only train.diverge_loss may differ);
  * a killed batched run is not resumed as a batch: each trial resumes alone from its own
    solo-format checkpoint (``run_training(..., resume=True)``, what the study runner does);
  * train.compile is ignored: the vmapped step runs eagerly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import torch

from normlab.core import stopping
from normlab.core.errors import UserError
from normlab.core.schema import to_dict
from normlab.data.batches import train_batch, val_batches
from normlab.data.record import make_record
from normlab.model.build import build_model, lab_internals, resolve_model
from normlab.model.placement import Placement, Stream
from normlab.run.dir import RunDir
from normlab.run.init_from import load_init
from normlab.run.resolve import RunConfig
from normlab.train.cadence import Cadence, StepPlan
from normlab.train.env import Dist, environment, pick_device
from normlab.train.lifecycle import (
    diverged_row,
    finish,
    metrics_line,
    open_files,
    save,
    start_loggers,
    validated,
    window_row,
)
from normlab.train.loop import LoopState
from normlab.train.plan import prepare
from normlab.train.run import load_data, make_summary
from normlab.train.stack import Stack
from normlab.train.step import lr_now
from normlab.train.window import Window

if TYPE_CHECKING:
    from normlab.train.cadence import StepPlan
    from normlab.train.stack import Stack


def incompatibility(cfgs: list[RunConfig]) -> str | None:
    """Why ``cfgs`` cannot be trained as one batch, or None when they can."""

    if not cfgs:
        return "no trials given"
    first = cfgs[0]
    model, data = to_dict(first.model), to_dict(first.data)
    train = {k: v for k, v in to_dict(first.train).items() if k != "diverge_loss"}
    for i, c in enumerate(cfgs[1:], 1):
        if to_dict(c.model) != model:
            return f"trial {i}: model section differs from trial 0 (batched trials share an architecture)"
        if to_dict(c.data) != data:
            return f"trial {i}: data section differs from trial 0"
        if {k: v for k, v in to_dict(c.train).items() if k != "diverge_loss"} != train:
            return f"trial {i}: train section differs from trial 0 (only train.diverge_loss may differ)"
    if first.model.dropout > 0:
        return f"model.dropout={first.model.dropout}: dropout masks inside vmap cannot match solo runs; use 0"
    if first.train.diag_every > 0:
        return "train.diag_every > 0: in-training diagnostics need solo runs; set it to 0"
    if not lab_internals(first.model):
        return f"model.impl={first.model.impl!r}: batching stacks the lab model's parameters; run it solo"
    plan = resolve_model(first.model)
    stream_hook = type(plan.stream()).after_step is not Stream.after_step  # one stream per model
    for sub in {s.name: s for pair in plan.layout for s in pair}.values():
        if sub.cls.after_step is not Placement.after_step or stream_hook:
            return f"model.placement={sub.name!r} changes weights after each step (e.g. nGPT); run it solo"
    return None


def compatible(cfgs: list[RunConfig]) -> bool:
    """True when ``run_batched(cfgs, ...)`` accepts these configs (the study runner's test)."""
    return incompatibility(cfgs) is None


class _Trial:
    """Host-side bookkeeping of one trial: its config, run directory, loop state and loggers."""

    def __init__(self, cfg: RunConfig, run_dir: Path, model: torch.nn.Module, loggers: list[Any]) -> None:
        self.cfg, self.run_dir, self.model, self.loggers = cfg, run_dir, model, loggers
        self.st = LoopState()
        self.status, self.diverged_at = "completed", None  # type: str, int | None
        self.summary: dict[str, Any] = {}  # summary.json's content, set when the trial finishes


def _save(tr: _Trial, name: str, corpus: Any, opt: torch.optim.Optimizer | None) -> None:
    save(RunDir(tr.run_dir), name, tr.model, tr.st, corpus.tokenizer, opt, batched=True)


def _finish(tr: _Trial, wall: float, error: str | None = None) -> dict[str, Any]:
    tr.st.wall_time = wall
    tr.summary = make_summary(tr.status, tr.st, tr.diverged_at, tr.cfg, tr.model, error=error)
    tr.summary["batched"] = True
    finish(RunDir(tr.run_dir), tr.loggers, tr.summary)
    return tr.summary


def _prepare(cfgs: list[RunConfig], run_dirs: list[Path]) -> tuple[Any, list[_Trial], torch.device]:
    """Refuse bad input before any run directory is touched; then the corpus and the
    trials, each initialised as its solo run would be."""

    if len(cfgs) != len(run_dirs):
        raise UserError(f"run_batched: {len(cfgs)} configs but {len(run_dirs)} run directories")
    why = incompatibility(cfgs)
    if why:
        raise UserError(f"cannot batch these trials: {why}")
    if len(set(run_dirs)) != len(run_dirs):
        raise UserError("run_batched: two trials share one run directory")
    for d in run_dirs:
        if d.exists() and RunDir(d).holds_run():
            raise UserError(f"{d}: already holds a run; batched trials start fresh")
    # the solo run's pre-flight (names resolved once, loggers, batch split, compiler, budget,
    # path), then its corpus and vocabulary (init_from's kept) and its build, per trial
    plans = [prepare(c, d) for c, d in zip(cfgs, run_dirs)]
    data = load_data(plans[0])  # the model, data and train sections are the same for every trial
    device = pick_device(data.cfg.train.device)
    if data.cfg.train.threads > 0:
        torch.set_num_threads(data.cfg.train.threads)
    trials = []
    for p in plans:
        cfg = dataclasses.replace(p.cfg, model=data.cfg.model)
        torch.manual_seed(cfg.seed)  # the solo run's init, bit for bit
        model = build_model(cfg.model, p.model.for_config(cfg.model) if p.model is not None else None).to(device)
        if cfg.train.init_from:
            load_init(model, cfg)
        trials.append(_Trial(cfg, p.run_dir, model, []))
    corpus = data.corpus
    return corpus, trials, device


def _open_run_dirs(trials: list[_Trial], device: torch.device, corpus: Any) -> None:
    for tr in trials:
        env = environment(device, tr.cfg.seed, Dist())
        env["batched"] = {"trials": len(trials), "run_dirs": [str(t.run_dir) for t in trials]}
        run = RunDir(tr.run_dir)
        open_files(run, tr.cfg, env, data=make_record(tr.cfg.data, corpus))
        tr.loggers = start_loggers(run, tr.cfg)


def _micro_batches(corpus: Any, trials: list[_Trial], s: int) -> Callable[[int], list]:
    """Micro-batch m of step ``s`` (0-based) for each trial: its solo run's batches."""

    t, ctx = trials[0].cfg.train, trials[0].cfg.model.context
    rows = t.batch_size // t.grad_accum
    return lambda m: [train_batch(corpus.train, ctx, rows, tr.cfg.seed, s, m) for tr in trials]


def _report(tr: _Trial, i: int, step: int, plan: StepPlan, w: Window, first_bad: int, lr: float, gnorm: float,
            vals: torch.Tensor | None, stack: Stack, corpus: Any, wall: float) -> bool:
    """Trial ``i``'s metrics line, validation and checkpoints at a sync step, as the solo
    loop writes them; True when the trial diverged (its last line says so)."""
    tokens_per_step = tr.cfg.train.batch_size * tr.cfg.model.context
    tr.st.step, tr.st.loss_n = step, w.steps
    if first_bad >= 0:
        tr.status, tr.diverged_at = "diverged", first_bad
        tr.st.train_time += w.train_s
        metrics_line(tr.loggers, step, tokens_per_step, diverged_row(float(w.loss[i]), w.steps, lr, gnorm))
        return True
    opt = stack.export(i, tr.model, tr.cfg.optim, step) if (plan.ckpt or vals is not None) else None
    if plan.log:
        row = window_row(float(w.loss[i]), w.steps, lr, gnorm, w.steps, w.train_s, tokens_per_step)
        if vals is not None:
            v = float(vals[i])
            row["val/loss"] = v
            if validated(tr.st, v):
                _save(tr, "best", corpus, None)
        tr.st.train_time += w.train_s
        metrics_line(tr.loggers, step, tokens_per_step, row)
        tr.st.loss_n = 0
    tr.st.loss_sum = 0.0 if plan.log else float(w.loss[i])
    tr.st.wall_time = wall
    if plan.ckpt:
        _save(tr, "latest", corpus, opt)
        if tr.cfg.train.keep_checkpoints:  # weights only: a series to inspect

            _save(tr, RunDir.step_name(step), corpus, None)
    return False


def run_batched(cfgs: list[RunConfig], run_dirs: list[Path], quiet: bool = False) -> list[dict]:
    """Train ``cfgs[i]`` into ``run_dirs[i]`` as one batched computation; returns the summaries.

    Each run directory follows the solo contract (config.json, env.json, metrics.jsonl,
    summary.json, checkpoints/latest and best written by ``normlab.run.checkpoint``).
    Raises ``UserError`` naming the reason when ``compatible(cfgs)`` is False, or when a run
    directory is being written by another process.
    """

    corpus, trials, device = _prepare(cfgs, [Path(d) for d in run_dirs])
    with contextlib.ExitStack() as held:  # every trial's RUN is ours until its summary is written
        for tr in trials:
            held.enter_context(RunDir(tr.run_dir).writing("run_batched", fresh=True))
        return _train(corpus, trials, device)


@contextlib.contextmanager
def _stop_on_signal() -> Iterator[list[bool]]:
    """Ctrl-C or SIGTERM sets the flag; the loop then checkpoints every trial's last completed
    step and stops, each trial ``interrupted`` (resumable solo), as the solo loop does."""
    flag = [False]
    with stopping.handling(lambda signum: flag.__setitem__(0, True)):
        flag[0] = stopping.received() is not None  # a study worker's, while the trials were set up
        yield flag


def _train(corpus: Any, trials: list[_Trial], device: torch.device) -> list[dict]:
    """The batched loop over prepared trials whose run directories are held. A failure leaves
    every unfinished trial a ``failed`` summary naming the error, as a solo run's does."""
    everyone, t_start = list(trials), time.perf_counter()
    with _stop_on_signal() as stop:
        try:
            return _loop(corpus, trials, device, stop, everyone, t_start)
        except BaseException as e:
            for tr in everyone:
                if not tr.summary:
                    tr.status = "failed"
                    with contextlib.suppress(OSError):  # the disk may be what failed: keep the first error
                        _finish(tr, time.perf_counter() - t_start, error=f"{type(e).__name__}: {e}")
            raise


def _loop(corpus: Any, trials: list[_Trial], device: torch.device, stop: list[bool], everyone: list[_Trial],
          t_start: float) -> list[dict]:

    t, ctx = trials[0].cfg.train, trials[0].cfg.model.context
    stack = Stack(trials, device)
    val = [(x.to(device), y.to(device)) for x, y in val_batches(corpus.val, ctx, t.batch_size, t.eval_batches)]
    _open_run_dirs(trials, device, corpus)
    for tr in trials:
        if tr.cfg.train.keep_checkpoints:  # the model at initialisation, as the solo loop keeps it

            _save(tr, RunDir.step_name(0), corpus, None)
    cadence = Cadence.of(t)
    w = Window(torch.zeros(len(trials), device=device), torch.full((len(trials),), -1, dtype=torch.int64, device=device))
    for s in range(t.steps):
        s1 = s + 1
        t0 = time.perf_counter()
        lrs = [lr_now(tr.cfg.optim, s, t.steps) for tr in trials]
        step_loss = stack.forward_backward(_micro_batches(corpus, trials, s), t.grad_accum)
        gnorm = stack.step(lrs, s1)
        limit = torch.tensor([tr.cfg.train.diverge_loss for tr in trials], device=device)
        w.add(s1, step_loss, gnorm, limit)  # the solo loop's window and divergence rule, per trial
        w.steps += 1
        w.train_s += time.perf_counter() - t0
        plan = cadence.what(s1)
        if stop[0]:  # a signal: this step is the last, logged and checkpointed for a solo resume
            plan = StepPlan(eval=False, log=True, ckpt=True, diag=False)
        if not plan.sync:
            continue
        vals = stack.validate(val) if plan.eval else None
        bad = w.first_bad.tolist()  # read back at sync steps only, as in the solo loop
        done = [i for i, tr in enumerate(trials)
                if _report(tr, i, s1, plan, w, bad[i], lrs[i], float(gnorm[i]), vals, stack, corpus,
                           time.perf_counter() - t_start)]
        if plan.log:
            w.loss.zero_()
            w.steps, w.train_s = 0, 0.0
        if stop[0]:
            for i, tr in enumerate(trials):
                if i not in done:
                    tr.status = "interrupted"
            done = list(range(len(trials)))
        for i in done:
            _finish(trials[i], time.perf_counter() - t_start)
        if done:
            keep = [i for i in range(len(trials)) if i not in done]
            if not keep:
                trials = []
                break
            stack.keep(keep)
            trials, w.loss, w.first_bad = [trials[i] for i in keep], w.loss[keep], w.first_bad[keep]
    for tr in trials:
        _finish(tr, time.perf_counter() - t_start)
    return [tr.summary for tr in everyone]
