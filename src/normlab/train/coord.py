"""The coordinate check across widths (Yang, Hu et al. 2022, "Tensor Programs V", §D and
microsoft/mup's ``coord_check.py``), and the few-step losses of an lr sweep.

``coord_check`` builds one model config at several ``d_model`` (or ``n_layer``; the same seed
each), trains each for a few AdamW steps on one fixed batch, and compares size by size the
coordinate size of each layer's activations and of their change since initialisation. Under a
parametrisation that transfers (muP in width, CompleteP in width and depth) the changes stay
flat; under sp with Adam at one lr they grow about linearly with width, which is what makes
sp's best lr move with width (and under muP the change of x_L grows with depth).

The numbers are the registry's statistics of tool ``coord`` (``diagnostics/catalogue.py``: ``rms``
of x_l, ``change_rms`` of x_l - x_l(W_0), ``logit_rms``, ``logit_change_rms``), computed on what
this module captures: the stream and logits of the batch at init and after the steps. Steps
are plain AdamW steps at a constant lr (the parametrisation's per-group factors applied, no
clipping: the global gradient norm grows with width and clipping would make the widths differ
by more than the parametrisation), so the check reads the parametrisation alone.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from normlab.diagnostics.catalogue import STATISTICS
from normlab.diagnostics.hooks import recording
from normlab.diagnostics.statistic import Captured, StreamStates, chosen
from normlab.diagnostics.subject import as_subject
from normlab.model.build import build_model
from normlab.model.config import ModelConfig
from normlab.run.train_config import OptimConfig
from normlab.train.optim import make_optimizer

NEEDS = {"stream", "logits", "reference", "reference_stream"}  # what coord_check captures


@dataclass
class CoordCheck:
    """Per statistic key, per size of ``field`` (d_model or n_layer), the statistic's values (one
    per label: x0..xL, or one for a scalar; L may differ between sizes when ``field`` is n_layer)."""

    field: str
    sizes: list[int]
    steps: int
    values: dict[str, list[list[float]]]
    labels: dict[str, list[str]]

    def series(self, key: str, label: str | None = None) -> list[float]:
        """One value per size: the statistic's at ``label`` (default: its last, x_L or the scalar)."""
        if label is None:
            return [v[-1] for v in self.values[key]]
        i = self.labels[key].index(label)
        return [v[i] for v in self.values[key]]

    def spread(self, key: str, label: str | None = None) -> float:
        """max / min over the sizes (1 = flat; inf when a value is 0 or not finite)."""
        s = self.series(key, label)
        if not all(math.isfinite(v) and v > 0 for v in s):
            return math.inf
        return max(s) / min(s)

    def table(self) -> str:
        """A markdown table: one row per statistic and label (x_0 and x_L only when the depth varies),
        one column per size, and max/min."""
        short = {"d_model": "d", "n_layer": "L"}.get(self.field, self.field)
        head = ["statistic", *[f"{short}={n}" for n in self.sizes], "max/min"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for key, labels in self.labels.items():
            same = len({len(v) for v in self.values[key]}) == 1
            rows: list[str | None] = list(labels) if same else [labels[0], None]
            for label in rows:
                name = key if len(labels) == 1 else f"{key} {label if label is not None else 'x_L'}"
                cells = [f"{v:.4g}" for v in self.series(key, label)] + [f"{self.spread(key, label):.3g}"]
                lines.append("| " + " | ".join([name, *cells]) + " |")
        return "\n".join(lines)


def coord_check(cfg: ModelConfig, sizes: Sequence[int], *, field: str = "d_model", steps: int = 3, lr: float = 1e-2,
                rows: int = 8, tokens: torch.Tensor | None = None, seed: int = 0) -> CoordCheck:
    """The coordinate check of ``cfg`` at each of ``sizes`` of ``field`` (d_model: n_head kept, the
    heads widen; or n_layer), after ``steps`` AdamW steps at ``lr`` on one batch of ``rows``
    sequences of cfg.context tokens (from the 1-D token ids ``tokens``, else uniform random ids;
    drawn with ``seed``)."""
    if field not in ("d_model", "n_layer"):
        raise ValueError(f"coord_check: field={field!r}; use d_model or n_layer")
    x, y = batch(cfg, rows, tokens, seed, 0)
    stats = chosen([s for _, s in STATISTICS.items()], "coord", NEEDS)
    out = CoordCheck(field, list(sizes), steps, {s.key: [] for s in stats}, {})
    for size in sizes:
        sized = dataclasses.replace(cfg, d_model=size) if field == "d_model" else dataclasses.replace(cfg, n_layer=size)
        torch.manual_seed(seed)
        model = build_model(sized)
        ref_stream, ref = _capture(model, x)
        opt = make_optimizer(model, OptimConfig(lr=lr, min_lr=0.0, weight_decay=0.0))
        for _ in range(steps):
            step(model, opt, x, y)
        stream, logits = _capture(model, x)
        c = Captured(n_layer=sized.n_layer, provided=set(NEEDS), stream=stream, logits=logits, reference=ref,
                     reference_stream=ref_stream)
        for s in stats:
            v = s.compute(c)
            v = v if isinstance(v, torch.Tensor) else torch.stack([torch.as_tensor(t) for t in v])
            out.values[s.key].append([float(t) for t in v.reshape(-1)])
            out.labels[s.key] = [str(t) for t in s.labels(sized.n_layer)]
    return out


def final_loss(cfg: ModelConfig, lr: float, steps: int, tokens: torch.Tensor, *, rows: int = 8,
               seed: int = 0, eval_rows: int = 32) -> float:
    """Cross-entropy on a held-out batch after ``steps`` AdamW steps at the constant ``lr`` (fresh
    batches of ``rows`` sequences from ``tokens`` each step, seeded); inf when training diverged."""
    torch.manual_seed(seed)
    model = build_model(cfg)
    opt = make_optimizer(model, OptimConfig(lr=lr, min_lr=0.0, weight_decay=0.0))
    for s in range(steps):
        loss = step(model, opt, *batch(cfg, rows, tokens, seed, s + 1))
        if not math.isfinite(loss):
            return math.inf
    model.eval()
    with torch.no_grad():
        _, val = model(*batch(cfg, eval_rows, tokens, seed, -1))
    return float(val) if val is not None and math.isfinite(float(val)) else math.inf


def step(model: Any, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    """One AdamW step on (x, y) of ``model`` (a TransformerLM); returns its loss."""
    model.train()
    _, loss = model(x, y)
    assert loss is not None
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    model.after_step()
    return float(loss.detach())


def batch(cfg: ModelConfig, rows: int, tokens: torch.Tensor | None, seed: int, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, y) of ``rows`` windows of cfg.context tokens: random windows of ``tokens``, or uniform
    random ids without them; batch ``index`` of the stream ``seed`` names."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + index)
    T = cfg.context
    if tokens is None:
        ids = torch.randint(0, cfg.vocab_size, (rows, T + 1), generator=gen)
    else:
        starts = torch.randint(0, len(tokens) - T - 1, (rows,), generator=gen)
        ids = torch.stack([tokens[s: s + T + 1] for s in starts.tolist()]).long()
    return ids[:, :-1], ids[:, 1:]


@torch.no_grad()
def _capture(model: Any, x: torch.Tensor) -> tuple[StreamStates, torch.Tensor]:
    """The stream x_0..x_L and the logits of ``x`` (eval mode: no dropout), detached copies."""
    model.eval()
    with recording(as_subject(model), stream=True) as rec:
        logits = model.run(x)  # a TransformerLM
    return StreamStates([s.detach().clone() for s in rec.stream]), logits.detach().clone()


def lr_optimum(lrs: Sequence[float], losses: Sequence[float]) -> float:
    """log10 of the best lr of a sweep: the vertex of the parabola through the lowest loss and its
    two neighbours in log10(lr) (the grid's end when the lowest is at one, or the parabola opens
    down), so that two near-equal losses on a plateau move the estimate by less than a grid step."""
    logs = [math.log10(lr) for lr in lrs]
    i = min(range(len(losses)), key=lambda k: losses[k])
    if i in (0, len(losses) - 1):
        return logs[i]
    (x0, x1, x2), (y0, y1, y2) = logs[i - 1: i + 2], losses[i - 1: i + 2]
    if not all(math.isfinite(y) for y in (y0, y1, y2)):
        return logs[i]
    den = (x0 - x1) * (x0 - x2) * (x1 - x2)
    a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
    b = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den
    return logs[i] if a <= 0 else min(max(-b / (2 * a), x0), x2)
