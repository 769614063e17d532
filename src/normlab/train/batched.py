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

The composition root (``normlab.train.run.run_batched``) checks the configs (``incompatibility``
in ``train/plan.py``), builds each trial's model, checkpointer and metrics from its sections and
hands the trials to :func:`train_trials`, the loop, which sees no config but the loop's own.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from normlab.core import stopping
from normlab.run.dir import RunDir
from normlab.run.train_config import OptimConfig
from normlab.train.batches import Batches
from normlab.train.cadence import StepPlan
from normlab.train.checkpointer import Checkpointer
from normlab.train.job import LoopConfig, LoopState
from normlab.train.lifecycle import Facts, diverged_row, validated, window_row
from normlab.train.metrics import Metrics
from normlab.train.stack import Stack
from normlab.train.step import lr_now
from normlab.train.window import Window


@dataclass
class Trial:
    """One trial of a batch: its model and components, each from its own section (the root
    builds them), and the host-side bookkeeping of its loop."""

    model: torch.nn.Module
    optim: OptimConfig          # its lr, schedule, AdamW hyper-parameters, clipping, z-loss
    diverge_loss: float         # train.diverge_loss: the one train field trials may differ in
    batches: Batches            # its own seed's batches
    run: RunDir
    checkpointer: Checkpointer
    metrics: Metrics
    facts: Facts
    st: LoopState = field(default_factory=LoopState)
    status: str = "completed"
    diverged_at: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)  # summary.json's content, set when the trial finishes


def _finish(tr: Trial, wall: float, error: str | None = None) -> dict[str, Any]:
    """The closing of a trial: every logger gets the summary and is closed, then RUN/summary.json
    is written (the solo loop does the same around its error handling)."""
    tr.st.wall_time = wall
    tr.summary = tr.facts.summary(tr.status, tr.st, tr.diverged_at, tr.model, error=error)
    tr.summary["batched"] = True
    tr.metrics.finish(tr.summary)
    tr.metrics.close()
    tr.run.write_summary(tr.summary)
    return tr.summary


def _micro_batches(trials: list[Trial], s: int) -> Callable[[int], list]:
    """Micro-batch m of step ``s`` (0-based) for each trial: its solo run's batches."""
    return lambda m: [tr.batches.get(s, m) for tr in trials]


def _report(tr: Trial, i: int, step: int, plan: StepPlan, w: Window, first_bad: int, lr: float, gnorm: float,
            vals: torch.Tensor | None, stack: Stack, wall: float) -> bool:
    """Trial ``i``'s metrics line, validation and checkpoints at a sync step, as the solo
    loop writes them; True when the trial diverged (its last line says so)."""
    tr.st.step, tr.st.loss_n = step, w.steps
    if first_bad >= 0:
        tr.status, tr.diverged_at = "diverged", first_bad
        tr.st.train_time += w.train_s
        tr.metrics.log(step, diverged_row(float(w.loss[i]), w.steps, lr, gnorm))
        return True
    opt = stack.export(i, tr.model, tr.optim, step) if (plan.ckpt or vals is not None) else None
    if plan.log:
        row = window_row(float(w.loss[i]), w.steps, lr, gnorm, w.steps, w.train_s, tr.batches.tokens_per_step)
        if vals is not None:
            v = float(vals[i])
            row["val/loss"] = v
            if validated(tr.st, v):
                tr.checkpointer.save("best", tr.model, tr.st)
        tr.st.train_time += w.train_s
        tr.metrics.log(step, row)
        tr.st.loss_n = 0
    tr.st.loss_sum = 0.0 if plan.log else float(w.loss[i])
    tr.st.wall_time = wall
    if plan.ckpt:
        tr.checkpointer.save("latest", tr.model, tr.st, opt)
        _save_series(tr, step)
    return False


def _save_series(tr: Trial, step: int) -> None:
    name = tr.checkpointer.series_name(step)  # weights only: a series to inspect
    if name is not None:
        tr.checkpointer.save(name, tr.model, tr.st)


@contextlib.contextmanager
def _stop_on_signal() -> Iterator[list[bool]]:
    """Ctrl-C or SIGTERM sets the flag; the loop then checkpoints every trial's last completed
    step and stops, each trial ``interrupted`` (resumable solo), as the solo loop does."""
    flag = [False]
    with stopping.handling(lambda signum: flag.__setitem__(0, True)):
        flag[0] = stopping.received() is not None  # a study worker's, while the trials were set up
        yield flag


def train_trials(trials: list[Trial], loop: LoopConfig, val: list[tuple[torch.Tensor, torch.Tensor]],
                 device: torch.device) -> list[dict]:
    """The batched loop over trials whose run directories are held and opened. A failure leaves
    every unfinished trial a ``failed`` summary naming the error, as a solo run's does."""
    everyone, t_start = list(trials), time.perf_counter()
    with _stop_on_signal() as stop:
        try:
            return _loop(trials, loop, val, device, stop, everyone, t_start)
        except BaseException as e:
            for tr in everyone:
                if not tr.summary:
                    tr.status = "failed"
                    with contextlib.suppress(OSError):  # the disk may be what failed: keep the first error
                        _finish(tr, time.perf_counter() - t_start, error=f"{type(e).__name__}: {e}")
            raise


def _loop(trials: list[Trial], loop: LoopConfig, val: list[tuple[torch.Tensor, torch.Tensor]], device: torch.device,
          stop: list[bool], everyone: list[Trial], t_start: float) -> list[dict]:

    t = loop.train
    stack = Stack(trials, device, bf16=t.dtype == "bfloat16")
    val = [(x.to(device), y.to(device)) for x, y in val]
    for tr in trials:  # the model at initialisation, as the solo loop keeps it
        _save_series(tr, 0)
    cadence = loop.cadence
    w = Window(torch.zeros(len(trials), device=device), torch.full((len(trials),), -1, dtype=torch.int64, device=device))
    for s in range(t.steps):
        s1 = s + 1
        t0 = time.perf_counter()
        lrs = [lr_now(tr.optim, s, t.steps) for tr in trials]
        step_loss = stack.forward_backward(_micro_batches(trials, s), t.grad_accum)
        gnorm = stack.step(lrs, s1)
        limit = torch.tensor([tr.diverge_loss for tr in trials], device=device)
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
                if _report(tr, i, s1, plan, w, bad[i], lrs[i], float(gnorm[i]), vals, stack,
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
