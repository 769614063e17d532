"""Sharpness: the top eigenvalue of the loss Hessian by power iteration on Hessian-vector products.

A tool that captures the need ``hessian`` puts a :class:`Curvature` in ``Captured.curvature``:
a closure that runs the forward again with its graph and returns the loss, the parameters
the Hessian is taken over, the number of iterations and the seed of the start. Nothing is
computed until a statistic asks (``sharpness``, ``precond_sharpness`` in the catalogue).

Power iteration: v_0 ~ N(0, I) from a generator seeded with ``seed`` (drawn on the CPU, so a
run on a GPU starts where one on the CPU does), then ``iters`` times w = M v, lambda = v . w,
v = w / ||w||, with M = H (sharpness) or M = S H S, S = P^{-1/2}, P = diag(sqrt(v_hat) + eps)
from Adam's state (preconditioned sharpness, Cohen et al. 2022, arXiv 2207.14484: the
eigenvalues of P^{-1} H, which Adam's stability threshold 2 (1 + beta1) / ((1 - beta1) lr)
bounds). Each Hessian-vector product is a double backward through the gradient graph of one
forward (``torch.autograd.grad`` with ``create_graph``), so a call costs about one forward, one
backward that keeps its graph, and ``iters`` backward passes of that graph. Power iteration
finds the eigenvalue of largest magnitude; when that is negative (a saddle, e.g. at
initialisation) ``iters`` more iterations on M - lambda I find the top one, at twice the cost.
A short iteration underestimates the top eigenvalue when the next one is close to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from normlab.core.errors import UserError

ITERS = 20  # the default number of power iterations of every tool


@dataclass
class Curvature:
    """What the need ``hessian`` holds (module docstring)."""

    loss: Callable[[], torch.Tensor]  # the scalar loss, recomputed with its graph (dropout off: one function)
    params: list[torch.Tensor]        # the Hessian is over these (those not requiring grad are left out)
    iters: int = ITERS
    seed: int = 0


def top_eigenvalue(loss: Callable[[], torch.Tensor], params: Sequence[torch.Tensor], iters: int, seed: int = 0,
                   scale: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
    """The top eigenvalue of S H S (S = diag(``scale``), the identity when None), H the Hessian
    of ``loss()`` over ``params``, by ``iters`` power iterations from a seeded N(0, I) start;
    when that finds a negative eigenvalue mu (one of largest magnitude), ``iters`` more on
    S H S - mu I, whose dominant eigenvalue is the top one minus mu. A 0-d tensor on the
    parameters' device."""
    if iters < 1:
        raise ValueError(f"iters={iters}: power iteration needs at least one step")
    keep = [i for i, p in enumerate(params) if p.requires_grad]
    ps = [params[i] for i in keep]
    ss = None if scale is None else [scale[i] for i in keep]
    gen = torch.Generator().manual_seed(seed)
    start = _unit([torch.randn(p.shape, generator=gen, dtype=torch.float32).to(p) for p in ps])
    with torch.enable_grad():
        grads = torch.autograd.grad(loss(), ps, create_graph=True, allow_unused=True)
        # a parameter whose gradient is constant (or absent) has a zero row and column in H
        live = [i for i, g in enumerate(grads) if g is not None and g.requires_grad]

        def product(v: list[torch.Tensor]) -> list[torch.Tensor]:  # S H S v
            u = v if ss is None else [s * x for s, x in zip(ss, v)]
            try:
                hv = torch.autograd.grad([grads[i] for i in live], ps, grad_outputs=[u[i] for i in live],
                                         retain_graph=True, allow_unused=True)
            except RuntimeError as e:  # fused attention kernels have no second derivative
                raise UserError(f"sharpness: {str(e).splitlines()[0]}; the model's forward has no second "
                                "derivative (use its eager attention), or leave sharpness off") from None
            w = [torch.zeros_like(x) if h is None else h.detach() for x, h in zip(v, hv)]
            return w if ss is None else [s * x for s, x in zip(ss, w)]

        lam = _power(product, start, iters, None)
        if float(lam) < 0:  # (one host sync per call) the top eigenvalue lies above mu: shift it to the top
            lam = lam + _power(product, start, iters, lam)
    return lam.detach()


def _power(product: Callable[[list[torch.Tensor]], list[torch.Tensor]], v: list[torch.Tensor], iters: int,
           shift: torch.Tensor | None) -> torch.Tensor:
    """Rayleigh quotient v . M v after ``iters`` power iterations, M = product - shift I."""
    lam = torch.zeros((), device=v[0].device if v else None)
    for _ in range(iters):
        w = product(v)
        if shift is not None:
            w = [a - shift * b for a, b in zip(w, v)]
        lam = sum(((a * b).sum() for a, b in zip(v, w)), torch.zeros((), device=lam.device))
        v = _unit(w)
    return lam


def _unit(v: list[torch.Tensor]) -> list[torch.Tensor]:
    norm = torch.sqrt(sum((x.pow(2).sum() for x in v), torch.zeros((), device=v[0].device if v else None)))
    return [x / norm.clamp_min(1e-30) for x in v]


def sharpness(c: Any) -> torch.Tensor | None:
    """Top Hessian eigenvalue of the captured loss (the statistic ``sharpness``)."""
    cur: Curvature | None = c.curvature
    if cur is None or not cur.params:
        return None
    return top_eigenvalue(cur.loss, cur.params, cur.iters, cur.seed)


def precond_sharpness(c: Any) -> torch.Tensor | None:
    """Top eigenvalue of P^{-1/2} H P^{-1/2}, P = diag(sqrt(v_hat) + eps) of Adam's state (the
    statistic ``precond_sharpness``); None where a parameter has no Adam state (before the first
    step, or Muon's matrices)."""
    cur: Curvature | None = c.curvature
    scale = None if cur is None or c.optimizer is None else c.optimizer.inverse_sqrt_preconditioner()
    if cur is None or scale is None or len(scale) != len(cur.params):
        return None
    return top_eigenvalue(cur.loss, cur.params, cur.iters, cur.seed, scale)

