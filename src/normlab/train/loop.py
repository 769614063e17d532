"""The optimisation loop: one ``Trainer.run`` from a start state to completed, diverged or interrupted.

Host syncs (``.item()``) happen only on log/eval/checkpoint steps: the per-step loss is
accumulated on the device and divergence is tracked there too (the first bad step is
remembered in a tensor), so a GPU never waits for the host between ordinary steps.
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from normlab.config import RunConfig
from normlab.data.batches import train_batch
from normlab.train import checkpoint
from normlab.train.env import Dist
from normlab.train.schedules import lr_at


@dataclass
class LoopState:
    """Everything besides tensors needed to continue a run exactly (saved in state.json)."""

    step: int = 0                 # optimizer steps completed
    best_val: float | None = None
    last_val: float | None = None
    wall_time: float = 0.0        # seconds of training across sessions
    train_time: float = 0.0       # seconds inside optimizer steps (for tokens/s)
    loss_sum: float = 0.0         # sum of step losses since the last metrics line
    loss_n: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class _AbandonStep(BaseException):
    """Raised by the signal handler inside forward/backward (a BaseException: no ``except
    Exception`` in between may swallow it)."""


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None  # JSON has no NaN/inf; null means "not finite"


class Trainer:
    def __init__(self, cfg: RunConfig, model: nn.Module, optimizer: torch.optim.Optimizer,
                 corpus: Any, val: list[tuple[torch.Tensor, torch.Tensor]], run_dir: Path,
                 device: torch.device, dist: Dist, loggers: list[Any], quiet: bool) -> None:
        self.cfg, self.model, self.opt, self.corpus = cfg, model, optimizer, corpus
        self.val, self.run_dir, self.device, self.dist = val, run_dir, device, dist
        self.loggers, self.quiet = loggers, quiet
        self.fwd: nn.Module = model
        if dist.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.fwd = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        if cfg.train.compile:
            self.fwd = torch.compile(self.fwd)
        self.autocast = (torch.autocast(device.type, dtype=torch.bfloat16) if cfg.train.dtype == "bfloat16"
                         else contextlib.nullcontext())
        self.interrupted = False
        self._abortable = False  # inside forward/backward: a signal may abandon the step
        self.first_nonfinite: dict[str, Any] | None = None  # set by _localise on divergence
        self.diag = None
        if cfg.train.diag_every > 0 and dist.main:
            from normlab.diagnostics.training import TrainingDiagnostics

            self.diag = TrainingDiagnostics(model, run_dir, (val[0][0].to(device), val[0][1].to(device)),
                                            every=cfg.train.diag_every)

    # -- pieces ------------------------------------------------------------------------------
    def _batch(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        t = self.cfg.train
        rows = t.batch_size // t.grad_accum              # global micro-batch
        per = rows // self.dist.world                   # this rank's rows
        sl = slice(self.dist.rank * per, (self.dist.rank + 1) * per)
        x, y = train_batch(self.corpus.train, self.cfg.model.context, rows, self.cfg.seed, step, micro, sl)
        nb = self.device.type == "cuda"
        return x.to(self.device, non_blocking=nb), y.to(self.device, non_blocking=nb)

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(objective, cross-entropy, mean log Z or None): z-loss = coeff * mean((log Z)^2) (PaLM)."""
        with self.autocast:
            logits, ce = self.fwd(x, y)
        z = self.cfg.optim.z_loss
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

    def _reduce(self, t: torch.Tensor, op: str = "mean") -> torch.Tensor:
        if not self.dist.enabled:
            return t
        import torch.distributed as td

        t = t.clone()
        td.all_reduce(t, op=td.ReduceOp.MIN if op == "min" else td.ReduceOp.SUM)
        return t / self.dist.world if op == "mean" else t

    def _save(self, name: str, st: LoopState, with_optimizer: bool = True) -> None:
        if self.dist.main:
            meta = {"loop": vars(st), "tokenizer": self.corpus.tokenizer.state()}
            checkpoint.save(self.run_dir / "checkpoints" / name, self.model, meta,
                            self.opt if with_optimizer else None)

    def _on_signal(self, signum: int, frame: Any) -> None:
        """Ctrl-C or SIGTERM: checkpoint the last completed step and stop.

        During forward/backward nothing but gradients has changed yet, so the step is
        abandoned at once (a long step would otherwise delay the stop by its whole length);
        during the optimizer update and the bookkeeping the step finishes first.
        """
        self.interrupted = True
        if self._abortable:
            self._abortable = False
            raise _AbandonStep

    # -- the loop ----------------------------------------------------------------------------
    def run(self, st: LoopState) -> tuple[str, LoopState, int | None]:
        """Train from ``st`` to the end; returns (status, final state, diverged_at_step)."""
        old = {}
        with contextlib.suppress(ValueError):  # not the main thread: no Ctrl-C handling
            for sig in (signal.SIGINT, signal.SIGTERM):
                old[sig] = signal.signal(sig, self._on_signal)
        try:
            return self._run(st)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
            if self.diag is not None:
                self.diag.close()

    def _forward_backward(self, s: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """All micro-batches of step ``s`` (0-based): gradients accumulated, returns (mean CE, log Z)."""
        t = self.cfg.train
        step_loss = torch.zeros((), device=self.device)
        log_z = None
        for m in range(t.grad_accum):
            x, y = self._batch(s, m)
            sync_ctx = (self.fwd.no_sync() if self.dist.enabled and m < t.grad_accum - 1
                        and hasattr(self.fwd, "no_sync") else contextlib.nullcontext())
            with sync_ctx:
                obj, ce, log_z = self._loss(x, y)
                (obj / t.grad_accum).backward()
            step_loss += ce.detach().float() / t.grad_accum
        return step_loss, log_z

    def _localise(self, bad_step: int) -> dict[str, Any] | None:
        """Where the first non-finite value of step ``bad_step`` appeared (diverged path only).

        Normal steps pay nothing for this: the weights of step ``bad_step - 1`` are rebuilt
        by replaying from the latest checkpoint (always older than the bad step, since a
        checkpoint is written only after a divergence check) or from the seeded init, and
        only the bad step is run with capture hooks. Batches and dropout are keyed by step
        and restored RNG, so the replay sees what the run saw.
        """
        from normlab.diagnostics.training import first_nonfinite
        from normlab.model.transformer import TransformerLM

        ckpt = checkpoint.find(self.run_dir / "checkpoints" / "latest")
        start = checkpoint.read_state(ckpt)["loop"]["step"] if ckpt is not None else 0
        if ckpt is not None and start < bad_step:
            checkpoint.load(ckpt, self.model, self.opt)
        else:  # the seeded init of run_training, then a fresh optimizer
            start = 0
            torch.manual_seed(self.cfg.seed)
            self.model.load_state_dict(TransformerLM(self.cfg.model).state_dict())
            self.opt.state.clear()
        o, t = self.cfg.optim, self.cfg.train
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.model.train()
        for s in range(start, bad_step):
            lr = lr_at(o.schedule, s, o.lr, o.warmup_steps, t.steps, o.min_lr)
            for g in self.opt.param_groups:
                g["lr"] = lr
            if s < bad_step - 1:
                self._forward_backward(s)
                torch.nn.utils.clip_grad_norm_(params, o.grad_clip if o.grad_clip > 0 else math.inf)
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
                self.model.after_step()
        return first_nonfinite(self.model, lambda: self._forward_backward(bad_step - 1), step=bad_step)

    def _run(self, st: LoopState) -> tuple[str, LoopState, int | None]:
        from normlab.train.progress import Progress

        cfg, t, o = self.cfg, self.cfg.train, self.cfg.optim
        tokens_per_step = t.batch_size * cfg.model.context
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = o.grad_clip if o.grad_clip > 0 else math.inf
        dev = self.device
        loss_acc = torch.tensor(st.loss_sum, dtype=torch.float32, device=dev)
        first_bad = torch.tensor(-1, dtype=torch.int64, device=dev)
        bar = Progress(t.steps, st.step, self.run_dir, t.log_every, enabled=not self.quiet and self.dist.main)
        t_wall, steps_since, train_since = time.perf_counter(), 0, 0.0
        status, diverged_at = "completed", None
        self.model.train()
        for s in range(st.step, t.steps):
            s1 = s + 1
            t0 = time.perf_counter()
            lr = lr_at(o.schedule, s, o.lr, o.warmup_steps, t.steps, o.min_lr)
            for g in self.opt.param_groups:
                g["lr"] = lr
            diag_on = self.diag is not None and self.diag.active(s1)
            if diag_on:
                self.diag.before_forward(s1)
            # Dropout draws from the global generators: keep their state so that an abandoned
            # step leaves the checkpoint exactly as a completed step s would have.
            rng = checkpoint.rng_state() if cfg.model.dropout > 0 else None
            try:
                self._abortable = not self.dist.enabled  # DDP ranks must not abandon a collective alone
                step_loss, log_z = self._forward_backward(s)
                self._abortable = False
            except _AbandonStep:  # the weights are those of step s: checkpoint them and stop
                self.opt.zero_grad(set_to_none=True)
                if rng is not None:
                    checkpoint.set_rng_state(rng)
                st.wall_time += time.perf_counter() - t_wall
                st.train_time += train_since
                t_wall, train_since = time.perf_counter(), 0.0
                st.loss_sum = float(loss_acc)
                self._save("latest", st)
                status = "interrupted"
                break
            grad_norm = torch.nn.utils.clip_grad_norm_(params, clip)
            if diag_on:
                self.diag.after_backward(s1)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            self.model.after_step()
            loss_acc += step_loss
            # A non-finite gradient with a finite loss is divergence at this step too (the
            # update has just poisoned the weights); checked on the device, no host sync.
            bad = ~torch.isfinite(step_loss) | ~torch.isfinite(grad_norm) | (step_loss > t.diverge_loss)
            first_bad = torch.where(bad & (first_bad < 0), torch.full_like(first_bad, s1), first_bad)
            st.step, st.loss_n = s1, st.loss_n + 1
            steps_since += 1
            train_since += time.perf_counter() - t0
            bar.step()
            is_eval = (t.eval_every > 0 and s1 % t.eval_every == 0) or s1 == t.steps
            is_log = s1 % t.log_every == 0 or is_eval
            is_ckpt = (t.checkpoint_every > 0 and s1 % t.checkpoint_every == 0) or s1 == t.steps
            if not (is_log or is_ckpt or self.interrupted or diag_on):
                continue
            # A sync point: read the device-side accumulators.
            if self.dist.enabled:
                loss_acc = self._reduce(loss_acc)
                fb = self._reduce(torch.where(first_bad < 0, torch.full_like(first_bad, 2**62), first_bad), "min")
                first_bad = torch.where(fb >= 2**62, torch.full_like(fb, -1), fb)
            if int(first_bad) >= 0:
                status, diverged_at = "diverged", int(first_bad)
                self._log(s1, tokens_per_step, {"train/loss": _finite(float(loss_acc) / st.loss_n), "lr": lr,
                                                "grad_norm": _finite(float(grad_norm)), "diverged": True})
                if self.diag is not None and not self.dist.enabled:
                    self.first_nonfinite = self._localise(diverged_at)
                break
            if diag_on:
                self.diag.after_step(s1, {"train/loss": float(step_loss), "lr": lr, "grad_norm": float(grad_norm)})
            if is_log:
                metrics: dict[str, Any] = {
                    "train/loss": float(loss_acc) / st.loss_n, "lr": lr, "grad_norm": _finite(float(grad_norm)),
                    "time/step_s": train_since / steps_since,
                    "tokens_per_s": tokens_per_step * steps_since / max(train_since, 1e-9)}
                if log_z is not None:
                    metrics["train/log_z"] = float(log_z)
                if is_eval:
                    te = time.perf_counter()
                    val = self.evaluate()
                    metrics["val/loss"], metrics["time/eval_s"] = val, time.perf_counter() - te
                    st.last_val = val
                    if st.best_val is None or val < st.best_val:
                        st.best_val = val
                        self._save("best", st, with_optimizer=False)
                st.train_time += train_since
                steps_since, train_since = 0, 0.0
                self._log(s1, tokens_per_step, metrics)
                bar.logged(s1, metrics)
                loss_acc.zero_()
                st.loss_n = 0
            st.loss_sum = float(loss_acc)
            now = time.perf_counter()
            st.wall_time, t_wall = st.wall_time + now - t_wall, now
            if is_ckpt or self.interrupted:
                self._save("latest", st)
            if self.interrupted:
                status = "interrupted"
                break
        bar.close()
        st.wall_time += time.perf_counter() - t_wall
        st.train_time += train_since
        return status, st, diverged_at

    def _log(self, step: int, tokens_per_step: int, metrics: dict[str, Any]) -> None:
        if not self.dist.main:
            return
        row = {"tokens": step * tokens_per_step, **metrics}
        for lg in self.loggers:
            lg.log(row, step)
