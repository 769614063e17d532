"""Will one training step fit this machine? Memory and time per step, estimated before starting.

``--set model.context=100000`` is a valid config that would sit in its first step for
hours. The estimate is deliberately simple (float32, formulas below) and errs by small
factors, not orders of magnitude; that is enough to refuse a step that needs more
memory than is free or more than ``REFUSE_S`` seconds, and to warn above ``WARN_S``.

- memory: weights, gradients and two AdamW moments (16 bytes a parameter) plus the
  activations autograd keeps for one micro-batch: per layer about 16 d + 2 d_ff values a
  token (norms, q/k/v, attention output, FFN in and out), and the logits twice.
  Attention itself runs in ``scaled_dot_product_attention``'s fused kernels, which keep
  no T x T matrix; with attention dropout the math path does, and that is counted.
- time: FLOPs of forward + backward (``normlab.model.cost.step_flops``: 3x the forward
  matrix products, attention's T x T products included) over ``EFFICIENCY`` times the
  rate of a float32 matmul measured here, once, and only when a step is big enough for the answer to
  matter. On 2 CPU cores (matmul 230-290 GFLOP/s) whole steps of the default model ran
  at 48 GFLOP/s (context 2048, batch 4: 4.4 s) and 90 GFLOP/s (context 8192, batch 1:
  7.5 s), a quarter to a third of the matmul rate; the estimates are 2.9 s and 11.7 s
  (rescaled from the times measured with the older 6 N formula, 6-7% above these FLOPs),
  and the activation estimate 0.6 GiB against 0.8 GiB peak RSS (torch itself included).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from normlab.core.errors import UserError
from normlab.model import cost
from normlab.model.build import ResolvedModel
from normlab.model.config import ModelConfig
from normlab.run.train_config import TrainConfig

WARN_S = 30.0      # a step longer than this gets a warning with the numbers
REFUSE_S = 600.0   # ... and one longer than this is refused: it cannot even log
MEASURE_ABOVE = 1e11  # FLOPs per step below which no rate is measured (a fraction of a second)
EFFICIENCY = 0.25    # whole training steps against a bare matmul (measured on CPU; see above)


@dataclass(frozen=True)
class StepEstimate:
    bytes: float
    flops: float

    def seconds(self, rate: float) -> float:
        return self.flops / rate


def estimate(m: ModelConfig, t: TrainConfig, world: int = 1, plan: ResolvedModel | None = None,
             model: Any = None) -> StepEstimate:
    """Memory (bytes) and FLOPs of one optimizer step of model ``m`` trained as ``t`` says, on one
    of ``world`` processes; ``model``: ``m`` already built on the meta device (else built here)."""

    d, L, T, V, ff = m.d_model, m.n_layer, m.context, m.vocab_size, m.ff_width
    params, flops = _costs(m, plan, batch=t.batch_size // world, model=model)
    rows = t.batch_size // (t.grad_accum * world)          # sequences in one micro-batch
    acts = rows * T * (L * (16 * d + 2 * ff) + 2 * V)       # values kept for backward
    if m.dropout > 0:                                        # math attention: B H T T probabilities
        acts += 2 * rows * m.n_head * T * T * L
    return StepEstimate(bytes=16 * params + 4 * acts, flops=flops)


# Building a deep stack even on the meta device costs about 4 ms a block: 20000 blocks, a
# mistyped n_layer, would sit a minute in the check meant to refuse them. Past this depth a stack
# of one placement is costed from three shallow ones (both numbers are linear in the depth).
EXTRAPOLATE_ABOVE = 64
_PROBES = (8, 16, 24)


def _costs(m: ModelConfig, plan: ResolvedModel | None, batch: int, model: Any = None) -> tuple[float, float]:
    """Parameters and step FLOPs of the model of ``m``: read off the resolved model, shapes only;
    for a deep stack of one placement, extrapolated from three shallow builds that lie on a line
    (if they do not, the stack is built whole)."""
    if model is None and m.n_layer > EXTRAPOLATE_ABOVE and not isinstance(m.placement, (list, tuple)):
        try:
            points = [_costs(dataclasses.replace(m, n_layer=n), None, batch) for n in _PROBES]
        except UserError:  # a field that depends on the depth (window_layers, say): build it whole
            points = []
        if len(points) == 3:
            (p0, f0), (p1, f1), (p2, f2) = points
            step = _PROBES[1] - _PROBES[0]
            if p2 - p1 == p1 - p0 and math.isclose(f2 - f1, f1 - f0, rel_tol=1e-9):
                k = (m.n_layer - _PROBES[0]) / step
                return p0 + k * (p1 - p0), f0 + k * (f1 - f0)
    model = cost.meta_model(model if model is not None else m, plan)  # the resolved model, shapes only
    return float(cost.parameters(model)), cost.step_flops(model, batch=batch)


def matmul_rate(device: torch.device) -> float:
    """Float32 matmul FLOP/s on ``device``: best of a few products of a size that fills it."""
    n = 2048 if device.type == "cuda" else 512
    a = torch.randn(n, n, device=device)
    best = float("inf")
    for _ in range(4):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        a @ a
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / max(best, 1e-9)


def free_memory(device: torch.device) -> float | None:
    """Bytes this process could still allocate on ``device`` (None if unknown)."""
    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _gib(b: float) -> str:
    return f"{b / 2**30:.1f} GiB"


def _human_s(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


# The fields that make a step big, in the order they are blamed on a tie.
GROWERS = ("model.context", "model.n_layer", "model.d_model", "train.batch_size")


Sections = dict[str, Any]  # {"model": ModelConfig, "train": TrainConfig}: the two sections a step's size reads


def _value(sections: Sections, key: str) -> Any:
    section, field = key.split(".")
    return getattr(sections[section], field)


def culprit(m: ModelConfig, t: TrainConfig, est: StepEstimate, world: int,
            size: Callable[[StepEstimate], float]) -> str:
    """The field (a key of ``GROWERS``) that makes the step (``est``) too big: the one above its
    default whose return to the default shrinks ``size`` (bytes or FLOPs) the most (so
    ``model.n_layer=100000`` is blamed, not the default context it runs at)."""
    now: Sections = {"model": m, "train": t}
    base: Sections = {"model": ModelConfig(), "train": TrainConfig()}
    named = "model.context"
    best = size(est)
    for key in GROWERS:
        section, field = key.split(".")
        if _value(now, key) <= _value(base, key):
            continue
        try:
            smaller: Sections = {**now, section: dataclasses.replace(now[section], **{field: _value(base, key)})}
        except UserError:  # the default is invalid beside the other values (d_model vs n_head)
            continue
        got = size(estimate(smaller["model"], smaller["train"], world))
        if got < best:
            best, named = got, key
    return named


def _blame(sections: Sections, named: str, memory: bool) -> tuple[str, str]:
    """(``field=value`` of the culprit, the fix): lower the culprit first, else any other field
    that sizes a step, each named (a fix that left out the culprit, say d_model, misleads)."""
    *others, last = [f"{k}={_value(sections, k)}" for k in GROWERS if k != named]
    accum = " (or raise train.grad_accum: the batch in smaller pieces)" if memory else ""
    return f"{named}={_value(sections, named)}", f"lower {named}, or else {', '.join(others)} or {last}{accum}"


def check_step_fits(m: ModelConfig, t: TrainConfig, device: torch.device, world: int = 1,
                    plan: ResolvedModel | None = None, model: Any = None) -> None:
    """Refuse (UserError) a step of model ``m`` trained as ``t`` says that cannot fit in memory or
    time here; warn on a slow one. The error names the field to blame first (``culprit``), then
    every other field that sizes a step. ``plan``: ``m`` already resolved, ``model``: ``m`` built on
    the meta device (``train.plan.prepare``: the run's one model)."""
    est = estimate(m, t, world, plan, model)
    sections = {"model": m, "train": t}
    free = free_memory(device)
    if free is not None and est.bytes > free:
        named, fix = _blame(sections, culprit(m, t, est, world, lambda e: e.bytes), memory=True)
        raise UserError(f"{named}: one step needs about {_gib(est.bytes)} on {device.type}, {_gib(free)} is free; {fix}")
    if est.flops < MEASURE_ABOVE:
        return
    rate = EFFICIENCY * matmul_rate(device)
    sec = est.seconds(rate)
    what = (f"one step is about {est.flops:.2g} FLOP, {_human_s(sec)} at the {rate / 1e9:.0f} GFLOP/s a step "
            f"reaches here ({_human_s(sec * max(t.steps, 1))} for {t.steps} steps)")
    if sec > REFUSE_S:
        named, fix = _blame(sections, culprit(m, t, est, world, lambda e: e.flops), memory=False)
        raise UserError(f"{named}: {what}; {fix}")
    if sec > WARN_S:
        logging.getLogger(__name__).warning(what)
