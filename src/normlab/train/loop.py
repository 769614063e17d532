"""The optimisation loop: one ``Trainer.run`` from a start state to completed, diverged or interrupted.

``Trainer._run`` only delegates: ``_train_step`` (forward/backward, clip, update), then on
the sync steps that ``normlab.train.cadence`` names, the window of accumulators is read
back (``normlab.train.window``: host syncs happen only there), logged, validated and
checkpointed; a signal stops a step part-way at its stop points (``normlab.train.stop_points``).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import torch

from normlab.diagnostics.training import TrainingDiagnostics
from normlab.train.batches import Batches
from normlab.train.checkpointer import Checkpointer
from normlab.train.env import Dist
from normlab.train.job import LoopConfig, LoopState
from normlab.train.lifecycle import diverged_row, validated, window_row
from normlab.train.metrics import Metrics
from normlab.train.muon import is_muon_group
from normlab.train.progress import Progress
from normlab.train.replay import localise
from normlab.train.step import optimizer_step
from normlab.train.stop_points import StopPoints
from normlab.train.window import Window


@dataclass
class _Step:
    """One completed step, as the bookkeeping after it needs it (device tensors)."""

    lr: float
    loss: torch.Tensor             # mean cross-entropy over the micro-batches
    grad_norm: torch.Tensor        # global, before clipping
    log_z: torch.Tensor | None     # mean log Z of the last micro-batch (z-loss on)
    diag: bool                     # in-training diagnostics ran their hooks on this step


@dataclass(frozen=True)
class Parts:
    """The components a Trainer runs, each built by the composition root (``train/run.py``) from
    its own section: the model and its optimizer, the batches, the fixed validation batches, the
    checkpointer and the metrics (each holding the RunDir), the in-training diagnostics (None
    when off), the process's place in DDP and its device, and ``reinit``, which puts the seeded
    initial weights back into the model (the divergence replay starts there without a checkpoint)."""

    model: Any  # TransformerLM or another model.impl with its forward contract (normlab.model.impls)
    optimizer: torch.optim.Optimizer
    batches: Batches
    val: list[tuple[torch.Tensor, torch.Tensor]]
    checkpointer: Checkpointer
    metrics: Metrics
    diagnostics: TrainingDiagnostics | None
    dist: Dist
    device: torch.device
    reinit: Any  # Callable[[], None]
    label: str = ""  # what the progress lines call the run (its directory)


class Trainer:
    def __init__(self, loop: LoopConfig, parts: Parts, quiet: bool) -> None:
        """The loop ``loop`` over the components ``parts``; nothing else of the run's config."""
        self.loop, self.parts, self.quiet = loop, parts, quiet
        self.model, self.opt, self.device, self.dist = parts.model, parts.optimizer, parts.device, parts.dist
        self.batches, self.val, self.ckpt, self.metrics = parts.batches, parts.val, parts.checkpointer, parts.metrics
        self.diag = parts.diagnostics
        self.fwd: Any = self.model  # or its DDP / torch.compile wrapper
        if self.dist.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.fwd = DDP(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if loop.train.compile:
            self.fwd = torch.compile(self.fwd)
        self.autocast = (torch.autocast(self.device.type, dtype=torch.bfloat16) if loop.train.dtype == "bfloat16"
                         else contextlib.nullcontext())
        self.first_nonfinite: dict[str, Any] | None = None  # set by replay.localise on divergence
        self.cadence = loop.cadence
        self.params = [p for p in self.model.parameters() if p.requires_grad]  # clipping's order
        self.clip = loop.clip
        self.stops = StopPoints(self.model, self.params, ddp=self.dist.enabled, compiled=loop.train.compile)

    # -- pieces ------------------------------------------------------------------------------
    def _batch(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.batches.get(step, micro)
        nb = self.device.type == "cuda"
        return x.to(self.device, non_blocking=nb), y.to(self.device, non_blocking=nb)

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(objective, cross-entropy, mean log Z or None): z-loss = coeff * mean((log Z)^2) (PaLM)."""
        with self.autocast:
            logits, ce = self.fwd(x, y)
        z = self.loop.optim.z_loss
        if z <= 0:
            return ce, ce, None
        log_z = torch.logsumexp(logits.float(), dim=-1)   # (B, T)
        return ce + z * log_z.pow(2).mean(), ce, log_z.detach().mean()

    @torch.no_grad()
    def evaluate(self) -> float:
        self.model.eval()
        total = torch.zeros((), device=self.device)
        for x, y in self.val:
            with self.autocast:
                _, loss = self.model(x.to(self.device), y.to(self.device))
            total += loss.float()
        self.model.train()
        return float(total) / len(self.val)

    def _save(self, name: str, st: LoopState, with_optimizer: bool = True) -> None:
        if self.dist.main:
            if self.diag is not None:  # its spike window travels with the checkpoint (a stale one is refused)
                st.extra["diagnostics"] = self.diag.state(st.step)
            self.ckpt.save(name, self.model, st, self.opt if with_optimizer else None)

    def _save_step(self, step: int, st: LoopState) -> None:
        """The weights of checkpoint step ``step`` when the run keeps a series."""
        name = self.ckpt.series_name(step)
        if name is not None:
            self._save(name, st, with_optimizer=False)

    # -- the loop ----------------------------------------------------------------------------
    def run(self, st: LoopState) -> tuple[str, LoopState, int | None]:
        """Train from ``st`` to the end; returns (status, final state, diverged_at_step)."""
        if self.diag is not None:
            self.diag.load_state(st.extra.get("diagnostics"), st.step)
        try:
            with self.stops.armed():
                return self._run(st)
        finally:
            if self.diag is not None:
                self.diag.close()

    def forward_backward(self, s: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """All micro-batches of step ``s`` (0-based): gradients accumulated, returns (mean CE, log Z)."""
        t = self.loop.train
        step_loss = torch.zeros((), device=self.device)
        log_z = None
        for m in range(t.grad_accum):
            self.stops.point()
            x, y = self._batch(s, m)
            sync_ctx = (self.fwd.no_sync() if self.dist.enabled and m < t.grad_accum - 1
                        and hasattr(self.fwd, "no_sync") else contextlib.nullcontext())
            with sync_ctx:
                obj, ce, log_z = self._loss(x, y)
                (obj / t.grad_accum).backward()
            step_loss += ce.detach().float() / t.grad_accum
        return step_loss, log_z

    def _run(self, st: LoopState) -> tuple[str, LoopState, int | None]:
        """The loop body only delegates: train a step, then, on the steps the cadence
        names, read the accumulators back, log, validate and checkpoint."""

        t = self.loop.train
        w = Window(torch.tensor(st.loss_sum, dtype=torch.float32, device=self.device),
                   torch.tensor(-1, dtype=torch.int64, device=self.device))
        bar = Progress(t.steps, st.step, self.parts.label, t.log_every, enabled=not self.quiet and self.dist.main)
        w.t_wall = time.perf_counter()
        status, diverged_at = "completed", None
        self.model.train()
        if st.step == 0:  # the model at initialisation: a kept series starts where training does
            self._save_step(0, st)
        for s in range(st.step, t.steps):
            s1 = s + 1
            plan = self.cadence.what(s1)
            t0 = time.perf_counter()
            out = self._train_step(s, plan.diag and self.diag is not None, w)
            if out is None:  # abandoned by a signal: the weights are those of step s
                self._stop_abandoned(st, w)
                status = "interrupted"
                break
            st.step, st.loss_n = s1, st.loss_n + 1
            w.steps += 1
            w.train_s += time.perf_counter() - t0
            bar.step()
            if not (plan.sync or self.stops.interrupted):
                continue
            w.sync(self.dist)
            if int(w.first_bad) >= 0:
                status, diverged_at = "diverged", int(w.first_bad)
                self._report_divergence(st, w, out, diverged_at)
                break
            if out.diag and self.diag is not None:
                self.diag.after_step(s1, {"train/loss": float(out.loss), "lr": out.lr,
                                          "grad_norm": float(out.grad_norm)})
            if plan.log:
                self._log_window(st, w, out, plan.eval, bar)
            st.loss_sum = float(w.loss)
            now = time.perf_counter()
            st.wall_time, w.t_wall = st.wall_time + now - w.t_wall, now
            if plan.ckpt or self.stops.interrupted:
                self._save("latest", st)
            if plan.ckpt:  # weights only, when the series is kept: a series to inspect
                self._save_step(s1, st)
            if self.stops.interrupted and s1 < t.steps:  # a signal during the last step: the run is complete
                status = "interrupted"
                break
        bar.close()
        st.wall_time += time.perf_counter() - w.t_wall
        st.train_time += w.train_s
        return status, st, diverged_at

    def _train_step(self, s: int, diag_on: bool, w: Window) -> _Step | None:
        """Step ``s`` (0-based): lr, forward/backward, clip, update; None when a signal
        abandoned it during forward/backward (gradients dropped, dropout RNG restored)."""
        s1 = s + 1
        lr = self.set_lr(s)
        if diag_on and self.diag is not None:
            self.diag.before_forward(s1)
        done = self.stops.attempt(lambda: self.forward_backward(s), self.opt, self.loop.stochastic)
        if done is None:
            return None
        loss, log_z = done
        if diag_on and self.diag is not None:  # the gradients as backward left them, before clipping (its contract)
            self.diag.after_backward(s1)
        grad_norm = optimizer_step(self.model, self.opt, self.params, self.clip)
        w.add(s1, loss, grad_norm, self.loop.train.diverge_loss)
        if self.diag is not None:  # every step: the spike window (no host sync)
            self.diag.record(loss, grad_norm)
        return _Step(lr, loss, grad_norm, log_z, diag_on)

    def set_lr(self, s: int) -> float:
        """Every group's lr at step ``s``, Muon's from optim.muon_lr, times a group's ``lr_scale`` (model.param);
        returns AdamW's (the one logged)."""
        lr = self.loop.lr(s)
        muon = self.loop.muon_lr(s) if self.loop.optim.name == "muon" else lr
        for g in self.opt.param_groups:
            base = muon if is_muon_group(g) else lr
            # A parametrisation's group (train/optim.py) runs at its factor of the schedule's lr.
            g["lr"] = base * g["lr_scale"] if "lr_scale" in g else base
        return lr

    def _stop_abandoned(self, st: LoopState, w: Window) -> None:
        """Checkpoint the last completed step after an abandoned one."""
        st.wall_time += time.perf_counter() - w.t_wall
        st.train_time += w.train_s
        w.t_wall, w.train_s = time.perf_counter(), 0.0
        st.loss_sum = float(w.loss)
        self._save("latest", st)

    def _report_divergence(self, st: LoopState, w: Window, out: _Step, at: int) -> None:
        """The last metrics line (``diverged``), and with diagnostics on, where it began."""
        self._log(st.step, diverged_row(float(w.loss), st.loss_n, out.lr, float(out.grad_norm)))
        if self.diag is not None and not self.dist.enabled:
            self.first_nonfinite = localise(self, at)

    def _log_window(self, st: LoopState, w: Window, out: _Step, is_eval: bool, bar: Any) -> None:
        """One metrics line for the steps since the last one (with validation on eval steps)."""
        tokens_per_step = self.batches.tokens_per_step
        metrics = window_row(float(w.loss), st.loss_n, out.lr, float(out.grad_norm), w.steps, w.train_s,
                             tokens_per_step)
        if out.log_z is not None:
            metrics["train/log_z"] = float(out.log_z)
        if is_eval:
            metrics.update(self._validate(st))
        st.train_time += w.train_s
        w.steps, w.train_s = 0, 0.0
        self._log(st.step, metrics)
        bar.logged(st.step, metrics)
        w.loss.zero_()
        st.loss_n = 0

    def _validate(self, st: LoopState) -> dict[str, float]:
        """Validation loss; a new best is checkpointed as ``best`` (weights only)."""
        te = time.perf_counter()
        val = self.evaluate()
        out = {"val/loss": val, "time/eval_s": time.perf_counter() - te}
        if validated(st, val):
            self._save("best", st, with_optimizer=False)
        return out

    def _log(self, step: int, metrics: dict[str, Any]) -> None:
        if self.dist.main:
            self.metrics.log(step, metrics)
