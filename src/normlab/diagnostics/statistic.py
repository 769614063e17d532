"""A statistic as one small object: its name, what it is over, what it needs, how to compute it.

The probe (``normlab probe``), the in-training diagnostics (``diagnostics.jsonl``),
``normlab inspect``, ``normlab analyze``, the coordinate check across widths
(``normlab.train.coord``, tool ``coord``) and the report pages all read the same registry
(``normlab.diagnostics.catalogue.STATISTICS``), so a new statistic is one :class:`Statistic`
added there: every tool that captures what it needs writes its rows, and every page draws
the figures it declares (``draw``, a :class:`Figure` or a kind each).
This module is a leaf: it imports nothing of normlab and no torch at import time, so the
report can read names, labels and help without building a model.

``over`` says what one value stands for (L = number of blocks):

| over       | values | labels (report)          | probe row (layer, sublayer, param) |
|------------|--------|--------------------------|------------------------------------|
| states     | L + 1  | x0 .. xL                 | (l, stream, x), l = 0..L           |
| inputs     | L      | x0 .. x(L-1) (block l+1's input; pairs (x_l, x_l+1)) | (l, stream, x), l = 0..L-1 |
| blocks     | L      | 1 .. L                   | (l, block, all), l = 1..L          |
| groups     | L + 2  | emb, 1 .. L, head        | (g, group, emb/block/head)         |
| scalar     | 1      | -                        | (0, model, param or key)           |
| labelled   | any    | given by compute         | given by compute                   |
| pairs      | (L+1)² | x0 .. xL both ways       | (i, pair, j): layer_pairs.csv's (layer_a, layer_b) |

``needs`` names what the tool must capture, from :data:`NEEDS` (an unknown name is refused
when the statistic is defined); a tool computes a statistic only when it
captures all of it (and ``tools`` names it), so a statistic that needs the second stream
is skipped for a one-stream model and one that needs attention records is skipped by the
probe, whose attention takes the fast path:

| need        | attribute of :class:`Captured`   | probe | training |
|-------------|----------------------------------|-------|----------|
| stream      | ``stream``: main stream x_0..x_L | yes   | yes (fixed batch, after the update) |
| aux         | ``aux``: a second stream (ResiDual's d) | when the placement has one | same |
| logits      | ``logits`` (B, T, V)             | yes   | yes      |
| loss        | ``loss`` (mean cross-entropy)    | yes   | no       |
| attention   | ``attention[key]``: (L,) per recorded key (max_logit, min_entropy, mean_entropy); ``head_entropy`` (L, H) | a second no-grad forward | yes |
| reference   | ``reference``: logits of W_0 on the fixed batch | no | yes |
| grads       | ``grads``, ``group_norms``: per-parameter gradients before clipping | no | yes |
| update      | ``params``, ``snapshot``, ``group_norms``, ``group_rms``: weights after and before the step | no | yes |
| optimizer   | ``optimizer``: Adam's state of each parameter (``monitors.AdamView``), ``group_rms`` | no | yes (after the step) |
| hessian     | ``curvature``: the loss as a function of the parameters, for Hessian-vector products (``curvature.Curvature``) | when sharpness_iters > 0 | on train.sharpness_every steps |
| param_grads | ``param_grads``: ((layer, sublayer, param), grad) of every block parameter | yes | no |
| stream_grads| ``stream_grads``: dLoss/dx_l for l = 0..L-1 | yes | no |
| jacobian    | ``graph``: live x_0..x_L, ``n_proj``, ``generator`` | when n_proj > 0 | no |
| norm_inputs | ``norm_inputs``: what each norm module received | yes | no |
| param_stats | ``moments["param"]``: (places, 3) mean, variance, max abs of each place's parameters | per block | per group, after the update |
| grad_stats  | ``moments["grad"]``: the same of their gradients | per block | per group, before clipping |
| history     | ``history``: the spike scan of every step's loss and gradient norm (``diagnostics.spikes``) | no | yes |
| reference_stream | ``reference_stream``: x_0..x_L of W_0 on the same batch (the coordinate check's) | no | no |

``inspect`` and ``analyze`` capture ``stream`` and ``loss`` too, and name what they measure
themselves in ``measured`` (a need each): ``deletion`` (L losses, block l skipped; both),
``state_grads`` (L+1 norms of dLoss/dx_l), ``block_grads`` (L per-block gradient norms),
``log_z`` and ``max_logit`` (L; inspect only). ``inspect`` provides ``param_stats`` and
``grad_stats`` per block too (gradients reduced as they arrive), ``attention`` (``head_entropy``
alone, where the subject's attention records it) and, with ``--sharpness-iters``, ``hessian``;
a single checkpoint has no step, so never ``update`` nor ``optimizer``.

The coordinate check (tool ``coord``) captures ``stream``, ``logits``, ``reference`` and
``reference_stream`` of one fixed batch at initialisation and after a few optimizer steps.

Training computes statistics that need ``grads`` or ``grad_stats`` right after the backward
(before clipping changes the gradients) and every other one after the optimizer step.
``draw`` kind ``growth`` is Peri-LN's figure (Kim et al. 2025, Fig. 1): the per-layer profile
of a statistic, one line per diagnostics step, on the run page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Sequence

from normlab.core.registry import Registry

if TYPE_CHECKING:  # torch is imported by the tools that capture, not by readers of names
    import torch

# over -> the report's name for its rows
OVER: dict[str, str] = {"states": "stream x_l", "inputs": "stream x_l", "blocks": "block",
                        "groups": "parameter group", "scalar": "", "labelled": "layer", "pairs": "stream x_l"}
_EXTRA = {"states": 1, "inputs": 0, "blocks": 0, "groups": 2}  # values beyond L
TOOLS = frozenset({"probe", "training", "inspect", "analyze", "coord"})
# Every name a statistic may need: what some tool captures into a Captured (the table in the
# module docstring says what each holds and which tool captures it). A statistic's needs are
# checked against these when it is defined: a misspelt need would otherwise never be met, and
# the statistic would silently never be computed. A new kind of capture adds its name here.
NEEDS: tuple[str, ...] = ("stream", "aux", "logits", "loss", "attention", "reference", "grads", "update", "param_grads",
                          "stream_grads", "jacobian", "norm_inputs", "param_stats", "grad_stats", "history",
                          "reference_stream", "hessian", "optimizer",
                          # measured by inspect and analyze themselves (Captured.measured)
                          "deletion", "state_grads", "block_grads", "log_z", "max_logit")
# how a page draws a statistic (docs/diagnostics.md); a statistic without ``draw`` gets _BY_OVER's
DRAW = frozenset({"layers", "depth", "matrix", "bars", "curve", "growth", "none"})


@dataclass(frozen=True)
class Figure:
    """One figure of a statistic: ``kind`` in DRAW; ``name`` the file name (default
    ``<kind>_<key>``); ``sublayer`` and ``params`` pick the rows of a labelled statistic."""

    kind: str
    name: str = ""
    title: str = ""
    label: str = ""
    sublayer: str = ""
    params: tuple[str, ...] = ()


@dataclass(frozen=True)
class Statistic:
    """One statistic; see the module docstring for ``over`` and ``needs``.

    ``compute(captured)`` returns, for ``labelled``, a list of ((layer, sublayer, param),
    value) pairs; otherwise a 1-D tensor or a sequence of 0-d tensors, one per label
    (scalar: one; pairs: an (L+1, L+1) matrix), or None when it does not apply. Values stay
    on the device: each tool reads every statistic back in one transfer. ``key`` is the name written to probe.csv
    and diagnostics.jsonl (default ``name``); two statistics may share a key when they are
    over different things (the probe's gradient norms of weights, blocks and states).
    """

    name: str
    over: str
    needs: frozenset[str]
    help: str
    compute: Callable[[Any], Any]  # takes a Captured that holds every need (its other fields may be None)
    label: str = ""                  # axis / colour-bar label in the report (default: key)
    tools: frozenset[str] = TOOLS    # which tools compute it
    key: str = ""
    draw: tuple[Figure | str, ...] = ()  # its figures; () = one, chosen by ``over``
    param: str = ""                  # a scalar's probe-row param (default: key)

    def __post_init__(self) -> None:
        # A mistake here would only surface as a missing row after minutes of training.
        if self.over not in OVER:
            raise ValueError(f"statistic {self.name!r}: over={self.over!r}; use one of {', '.join(OVER)}")
        if not self.tools or not set(self.tools) <= TOOLS:
            raise ValueError(f"statistic {self.name!r}: tools={sorted(self.tools)}; use a subset of {sorted(TOOLS)}")
        if isinstance(self.needs, str):  # frozenset("stream") would be its letters
            raise ValueError(f"statistic {self.name!r}: needs={self.needs!r}; give a set of names, e.g. {{{self.needs!r}}}")
        unknown = sorted(set(self.needs) - set(NEEDS))
        if unknown:
            raise ValueError(f"statistic {self.name!r}: needs {', '.join(map(repr, unknown))}, which no tool captures; "
                             f"use names from {', '.join(NEEDS)}")
        object.__setattr__(self, "needs", frozenset(self.needs))
        object.__setattr__(self, "tools", frozenset(self.tools))
        object.__setattr__(self, "key", self.key or self.name)
        object.__setattr__(self, "label", self.label or self.key)
        figs = tuple(Figure(f) if isinstance(f, str) else f for f in self.draw) or (Figure(_BY_OVER[self.over]),)
        for f in figs:
            if f.kind not in DRAW:
                raise ValueError(f"statistic {self.name!r}: draw={f.kind!r}; use one of {', '.join(sorted(DRAW))}")
        object.__setattr__(self, "draw", tuple(f for f in figs if f.kind != "none"))

    def figures(self) -> tuple[Figure, ...]:
        """Its figures, each with its file name and labels filled in."""
        from dataclasses import replace

        return tuple(replace(f, name=f.name or f"{f.kind}_{self.key}", label=f.label or self.label,
                             title=f.title or self.help) for f in self.draw if isinstance(f, Figure))

    def size(self, n_layer: int) -> int | None:
        """How many values it has for a model of ``n_layer`` blocks (None: given by compute)."""
        if self.over == "labelled":
            return None
        if self.over == "pairs":
            return (n_layer + 1) ** 2
        return 1 if self.over == "scalar" else n_layer + _EXTRA[self.over]

    def labels(self, n_layer: int) -> list[Any]:
        """Row labels of its values in the report, e.g. ['emb', 1, 2, 'head'] for groups."""
        if self.over == "states" or self.over == "inputs":
            return [f"x{i}" for i in range(n_layer + _EXTRA[self.over])]
        if self.over == "groups":
            return ["emb", *range(1, n_layer + 1), "head"]
        return list(range(1, n_layer + 1)) if self.over == "blocks" else [self.key]

    def rows(self, n_layer: int) -> list[tuple[int, str, str]]:
        """(layer, sublayer, param) of each value in probe.csv (see the table above)."""
        n = self.size(n_layer) or 0
        if self.over in ("states", "inputs"):
            return [(i, "stream", "x") for i in range(n)]
        if self.over == "blocks":
            return [(i, "block", "all") for i in range(1, n + 1)]
        if self.over == "groups":
            return [(g, "group", "emb" if g == 0 else ("head" if g == n - 1 else "block")) for g in range(n)]
        if self.over == "pairs":  # (x_i, x_j): layer i, param j (layer_pairs.csv: layer_a, layer_b)
            return [(i, "pair", str(j)) for i in range(n_layer + 1) for j in range(n_layer + 1)]
        return [(0, "model", self.param or self.key)]


_BY_OVER = {"states": "layers", "inputs": "layers", "blocks": "layers", "groups": "layers",
            "scalar": "curve", "labelled": "none", "pairs": "matrix"}


# The one statistics registry: filled by ``diagnostics/catalogue.py`` (one ``add`` line per
# built-in, then installed plugins), which it imports at the first lookup.
STATISTICS: Registry[Statistic] = Registry("statistic", "statistics", catalogue="normlab.diagnostics.catalogue")


def chosen(stats: Sequence[Statistic], tool: str, captured: set[str]) -> list[Statistic]:
    """The statistics ``tool`` computes, given what it captures; refuses two with one key and
    one ``over`` (their values would overwrite each other)."""
    unknown = sorted(set(captured) - set(NEEDS))
    if unknown:  # a tool that provides a name no statistic can declare: a bug in the tool
        raise ValueError(f"{tool} captures {', '.join(map(repr, unknown))}, not in statistic.NEEDS; declare it there")
    out = [s for s in stats if tool in s.tools and s.needs <= captured]
    seen: dict[tuple[str, str], str] = {}
    for s in out:
        # training writes one entry per key; the probe one row per (key, row label)
        where = "" if tool == "training" else ("stream" if s.over in ("states", "inputs") else s.over)
        other = seen.setdefault((s.key, where), s.name)
        if other != s.name:
            raise ValueError(f"statistics {other!r} and {s.name!r} both write {s.key!r} in the {tool} output; "
                             "give one of them another key")
    return out


class StreamStates:
    """States x_0..x_L of one stream, detached; ``stacked`` and ``pair_cos`` are computed
    once and shared by every statistic (batched ops: per-op overhead dominates small models)."""

    def __init__(self, states: Sequence[torch.Tensor]) -> None:
        self.states = list(states)

    @cached_property
    def stacked(self) -> torch.Tensor:
        """(L + 1, B, T, d) float32."""
        import torch

        return torch.stack(self.states).float()

    @cached_property
    def pair_cos(self) -> torch.Tensor:
        """(L, B, T): cos(x_{l-1}, x_l) per token for each block l."""
        import torch

        xs = self.stacked
        return torch.nn.functional.cosine_similarity(xs[:-1], xs[1:], dim=-1, eps=1e-12)


@dataclass
class Captured:
    """What one tool captured on one batch; attributes per need (module docstring)."""

    n_layer: int
    provided: set[str] = field(default_factory=set)  # the needs this capture meets
    stream: StreamStates | None = None
    aux: StreamStates | None = None
    logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    attention: dict[str, torch.Tensor] = field(default_factory=dict)
    reference: torch.Tensor | None = None
    reference_stream: StreamStates | None = None
    grads: list[torch.Tensor] | None = None
    params: list[torch.Tensor] | None = None
    snapshot: list[torch.Tensor] | None = None
    group_norms: Callable[[list[torch.Tensor] | tuple[torch.Tensor, ...]], torch.Tensor] | None = None
    param_grads: list[tuple[tuple[int, str, str], torch.Tensor | None]] = field(default_factory=list)
    stream_grads: Sequence[torch.Tensor | None] = ()
    graph: list[torch.Tensor] = field(default_factory=list)
    norm_inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    n_proj: int = 0
    generator: torch.Generator | None = None
    measured: dict[str, Any] = field(default_factory=dict)  # inspect's and analyze's own (docstring)
    moments: dict[str, torch.Tensor] = field(default_factory=dict)  # "param", "grad": (places, 3)
    history: Any = None  # a diagnostics.spikes.Scan
    group_rms: Callable[..., torch.Tensor] | None = None  # per-group RMS over matrices (monitors.group_rms)
    optimizer: Any = None  # a diagnostics.monitors.AdamView
    curvature: Any = None  # a diagnostics.curvature.Curvature

    def take_grads(self, loss: torch.Tensor, params: list[torch.Tensor], keys: list[tuple[int, str, str]],
                   stream: list[torch.Tensor], needs: set[str]) -> None:
        """The parameter and stream gradients of ``loss`` in one autograd call (``stream`` is
        x_0..x_L with its graph; x_L is left out), keeping the graph for the Jacobian statistics
        when ``n_proj`` > 0: what the probe and ``inspect`` capture alike."""
        import torch  # this module stays importable without torch (a leaf of the registry)

        if needs & {"param_grads", "stream_grads"}:
            jac = self.n_proj > 0 and "jacobian" in needs
            grads = torch.autograd.grad(loss, params + stream[:-1], retain_graph=jac, allow_unused=True)
            self.param_grads = list(zip(keys, grads[: len(params)]))
            self.stream_grads = grads[len(params):]
            self.provided |= {"param_grads", "stream_grads"}
        if self.n_proj > 0:
            self.graph = stream
            self.provided.add("jacobian")
