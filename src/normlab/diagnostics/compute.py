"""How the built-in statistics compute their rows: the ``compute`` functions that
``diagnostics/catalogue.py`` passes to its ``Statistic`` lines, where a statistic takes more than
the one expression on its line.

Each takes a ``Captured`` (or returns a function that does) and returns the statistic's values
in the shape its ``over`` declares: a tensor or list per place, or (layer, sublayer, param) rows
for ``labelled``. Several statistics share one (the RMS and the angle of either stream, the
parameter and gradient moments per group or per block), so a change here reaches every statistic
that names it. Registering stays in ``catalogue.py``; nothing here adds to ``STATISTICS``.
"""

from __future__ import annotations

import math
from typing import Any

from normlab.diagnostics.statistic import Captured
from normlab.stats import tensors as stats

Rows = list[tuple[tuple[int, str, str], Any]]


# ------------------------------------------------------------------ probe, gradients at init
def weight_grad_norm(c: Captured) -> Rows:
    import torch

    rows: Rows = []
    for (layer, sub, param), g in c.param_grads:
        if param == "qkv" and g is not None:  # one matrix holds W_Q, W_K, W_V: report each
            for i, part in enumerate(("W_Q", "W_K", "W_V")):
                rows.append(((layer, sub, part), torch.linalg.matrix_norm(g.chunk(3, dim=0)[i])))
        else:
            rows.append(((layer, sub, param), _sq(g, c).sqrt()))
    return rows


def block_grad_norm(c: Captured) -> Any:
    import torch

    assert c.loss is not None  # a need of this statistic
    per_layer = torch.zeros(c.n_layer + 1, device=c.loss.device)
    for (layer, _, _), g in c.param_grads:
        per_layer[layer] += _sq(g, c)
    return per_layer[1:].sqrt()


def _sq(g: Any, c: Captured) -> Any:
    import torch

    assert c.loss is not None  # a need of every statistic that calls this
    return g.pow(2).sum() if g is not None else torch.zeros((), device=c.loss.device)


def jacobian(c: Captured) -> Any:
    return stats.jacobian_rms(c.graph[-1], c.graph[:-1], c.n_proj, c.generator)


def norm_inputs(fn: Any) -> Any:
    def compute(c: Captured) -> Rows:
        rows: Rows = []
        for name, x in c.norm_inputs.items():
            parts = name.split(".")
            if parts[0] == "blocks":
                where = (int(parts[1]) + 1, parts[2], ".".join(parts[3:]))
            else:
                where = (c.n_layer, "final", name)
            rows.append(((where[0], where[1], where[2] + ".input"), fn(x)))
        return rows

    return compute


# ------------------------------------------------------------------ both
def rms(s: Any) -> Any:
    return s.stacked.pow(2).mean(dim=(1, 2, 3)).sqrt()


def change(c: Captured) -> Any:
    assert c.stream is not None and c.reference_stream is not None  # the needs of change_rms
    return (c.stream.stacked - c.reference_stream.stacked).pow(2).mean(dim=(1, 2, 3)).sqrt()


def cos(s: Any) -> Any:
    return s.pair_cos.mean(dim=(1, 2))


def angle(s: Any) -> Any:
    return (s.pair_cos.clamp(-1, 1).arccos() / math.pi).mean(dim=(1, 2))


def pairs(fn: Any) -> Any:
    """An (L+1) x (L+1) matrix of ``fn(x_i, x_j)`` over the stream states."""
    return lambda c: [[fn(a, b) for b in c.stream.states] for a in c.stream.states]


def adjacent(fn: Any) -> Any:
    """``fn(x_{l-1}, x_l)`` of each block l."""
    return lambda c: [fn(a, b) for a, b in zip(c.stream.states[:-1], c.stream.states[1:])]


def token_cos(x: Any) -> Any:
    return stats.token_cosine(x) if x.size(1) > 1 else math.nan  # one position: no pair


def attention(key: str) -> Any:
    return lambda c: c.attention.get(key)


def moment(which: str, col: int) -> Any:
    """Column ``col`` (0 mean, 1 variance, 2 max |x|) of the ``which`` moments, per place."""
    return lambda c: c.moments[which][:, col]


def act(col: int) -> Any:
    return lambda c: stats.activation_moments(c.stream.stacked)[col]
