"""Stopping the solo loop part-way through a step after Ctrl-C or SIGTERM (``StopPoints``).

The signal handler only marks the request; the step acts on it at its next stop point (between
micro-batches, before each block's forward, as the backward reaches each parameter), where the
step is abandoned. Until the update nothing but gradients has changed, so dropping them (and
putting dropout's RNG back) leaves exactly the state of the last completed step, and a long step
does not delay the stop. The Trainer (``normlab.train.loop``) asks for this in three places:
around the whole loop (:meth:`StopPoints.armed`), around forward/backward
(:meth:`StopPoints.attempt`) and between micro-batches (:meth:`StopPoints.point`). Kept here, in
one module, because it is the only code that raises inside forward/backward and the only code
that undoes part of a step: its rules stay side by side, and the loop reads as the loop.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, TypeVar

import torch

from normlab.core import stopping
from normlab.run import checkpoint

R = TypeVar("R")


class AbandonStep(BaseException):
    """Raised at a stop point inside forward/backward after a signal (a BaseException: no
    ``except Exception`` in between may swallow it)."""


class StopPoints:
    """The stop request of one training loop and where a step may act on it."""

    def __init__(self, model: Any, params: list[torch.Tensor], *, ddp: bool, compiled: bool) -> None:
        """The stop points of ``model`` (its blocks) and ``params`` (gradient hooks, in the loop's
        order); ``ddp``: a DDP rank must not leave a collective alone, so it never abandons a step;
        ``compiled``: torch.compile traces the model, so it gets no hooks."""
        self.interrupted = False
        self._abortable = False  # inside forward/backward: a signal may abandon the step
        self._model, self._params = model, params
        self._ddp, self._compiled = ddp, compiled

    def on_signal(self, signum: int) -> None:
        """Ctrl-C or SIGTERM: checkpoint the last completed step and stop. Only marked here: the
        step acts at its next stop point, so no exception starts inside the loop's own code."""
        self.interrupted = True

    def point(self, *_: Any) -> None:
        """Where forward/backward may abandon its step after a signal: between micro-batches,
        before each block's forward, as the backward reaches each parameter (gradient hooks).
        Nothing but gradients has changed before the update, so a long step does not delay
        the stop; from the update on, the step finishes first. On a CPU the backward runs in
        the main thread, where the handler runs at the next hook; on a GPU it runs in the
        device's thread, and the stop waits for its end."""
        if self.interrupted and self._abortable:
            self._abortable = False
            raise AbandonStep

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        """While the loop runs: the signal handler and the hooks of :meth:`point`."""
        with stopping.handling(self.on_signal), self._hooks():
            # a study worker that got the signal while this run was set up: stop at once
            self.interrupted = stopping.received() is not None
            yield

    @contextlib.contextmanager
    def _hooks(self) -> Iterator[None]:
        """The hooks of :meth:`point`, removed when the loop ends (the model outlives
        it). None under DDP (a rank must not leave a collective alone) or torch.compile."""
        if self._ddp or self._compiled:
            yield
            return
        blocks = getattr(self._model, "blocks", ())
        hooks = [b.register_forward_pre_hook(self.point) for b in blocks]
        hooks += [p.register_hook(self.point) for p in self._params]
        try:
            yield
        finally:
            for h in hooks:
                h.remove()

    def attempt(self, work: Callable[[], R], opt: torch.optim.Optimizer, stochastic: bool) -> R | None:
        """``work()`` (a step's forward/backward), abandonable at its stop points; None when a
        signal abandoned it: its gradients dropped and, with dropout on (``stochastic``), the
        global generators' state put back."""
        # Dropout draws from the global generators: keep their state so that an abandoned
        # step leaves the checkpoint exactly as a completed step would have.
        rng = checkpoint.rng_state() if stochastic else None
        try:
            self._abortable = not self._ddp  # DDP ranks must not abandon a collective alone
            out = work()
            self._abortable = False
        except AbandonStep:
            opt.zero_grad(set_to_none=True)
            if rng is not None:
                checkpoint.set_rng_state(rng)
            return None
        return out
