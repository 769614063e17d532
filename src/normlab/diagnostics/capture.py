"""The captures of ``normlab inspect``; the statistics are the registry's (``tools`` naming
``inspect`` in diagnostics/catalogue.py), computed on what is captured here.

On one batch of windows ``ids`` (B, T) of the subject's own tokens:

- forward with gradients: residual stream x_0..x_L (x_0 enters block 1, x_l leaves block
  l), attention max |logit| per block, mean log Z of the output softmax, the loss; then one
  backward for dLoss/dx_l and each block's parameter-gradient norm;
- L no-grad forwards with one block skipped each (its input passed on): the deletion loss.

Memory: gradients are reduced to one number per block the moment each parameter's
gradient is accumulated and then dropped (a post-accumulate hook), so the backward never
holds a second copy of the weights; the stream states are kept detached in float32 (L + 1
tensors of B x T x d) for the layer x layer matrix.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F

from normlab.diagnostics.statistic import Captured, StreamStates
from normlab.diagnostics.subject import Subject
from normlab.stats.tensors import Moments, moments

MLM_FRACTION = 0.15  # BERT's share of masked positions


def make_batch(subject: Subject, ids: list[int], max_tokens: int, seed: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets), both (B, T): consecutive windows of ``ids`` wrapped in the tokenizer's
    special tokens. Causal targets are the inputs (shifted by the loss); masked-LM inputs
    have 15% of the text positions replaced by the mask token, targets -100 elsewhere."""
    T = subject.context
    inner = T - len(subject.prefix) - len(subject.suffix)
    rows = max(1, min(max_tokens // T, len(ids) // inner))
    x = torch.tensor([subject.prefix + ids[r * inner:(r + 1) * inner] + subject.suffix for r in range(rows)])
    if subject.family.causal:
        return x, x.clone()
    gen = torch.Generator().manual_seed(seed)
    pick = torch.rand(x.shape, generator=gen) < MLM_FRACTION
    pick[:, : len(subject.prefix)] = False
    pick[:, T - len(subject.suffix):] = False
    pick[0, len(subject.prefix)] = True  # at least one target
    y = torch.where(pick, x, torch.full_like(x, -100))
    assert subject.mask_id is not None  # a masked model without one is refused when it is opened
    return x.masked_fill(pick, subject.mask_id), y


def loss_of(subject: Subject, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy in float32: next token (causal) or the masked positions (masked LM)."""
    if subject.family.causal:
        logits, y = logits[:, :-1], y[:, 1:]
    return F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), ignore_index=-100)


Batches = list[tuple[torch.Tensor, torch.Tensor]]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@torch.no_grad()
def mean_loss(subject: Subject, batches: Batches, loss: LossFn, skip: int | None = None) -> float:
    """Mean of ``loss(logits, y)`` over ``batches``, block ``skip`` (0-based) passed over."""
    tot = 0.0
    with _hooks(subject, skip=skip):
        for x, y in batches:
            tot += float(loss(subject.forward(x), y).item())
    return tot / len(batches)


def deletion_losses(subject: Subject, batches: Batches, loss: LossFn,
                    progress: Callable[[int, int], None] | None = None) -> list[float]:
    """The loss with each block skipped in turn, its input passed on (layer deletion, Gromov et
    al. 2024): the one implementation inspect and analyze both use."""
    L = len(subject.layers)
    out = []
    for i in range(L):
        out.append(mean_loss(subject, batches, loss, skip=i))
        if progress:
            progress(i + 1, L)
    return out


@torch.no_grad()
def stream_states(subject: Subject, batches: Batches) -> list[torch.Tensor]:
    """x_0..x_L of the main stream over ``batches``, concatenated along the batch, detached in float32."""
    xs: list[list[torch.Tensor]] = []
    for x, _ in batches:
        stream: list[Any] = []
        with _hooks(subject, stream):
            subject.forward(x)
        xs.append([s.detach().float().cpu() for s in stream])
    return [torch.cat(col) for col in zip(*xs)]


@contextlib.contextmanager
def _hooks(subject: Subject, stream: list[Any] | None = None, skip: int | None = None) -> Iterator[None]:
    """Record block inputs/outputs into ``stream`` (x_0..x_L); make block ``skip`` the identity."""
    handles = []

    def pre(i: int) -> Callable:
        def hook(_m, args, kwargs):
            h = args[0] if args else kwargs.get("hidden_states", next(iter(kwargs.values()), None))
            if stream is not None and i == 0:
                stream.append(subject.state_of(h))
            if i == skip:
                _m._normlab_in = h
        return hook

    def post(i: int) -> Callable:
        def hook(_m, _args, _kwargs, out):
            if i == skip:
                out = subject.with_state(out, _m.__dict__.pop("_normlab_in"))
            if stream is not None:
                stream.append(subject.state_of(out))
            return out
        return hook

    try:
        for i, layer in enumerate(subject.layers):
            handles.append(layer.register_forward_pre_hook(pre(i), with_kwargs=True))
            handles.append(layer.register_forward_hook(post(i), with_kwargs=True))
        yield
    finally:
        for h in handles:
            h.remove()


def _block_params(subject: Subject) -> dict[int, int]:
    """id(parameter) -> block index (parameters outside the blocks are not listed)."""
    return {id(p): i for i, layer in enumerate(subject.layers) for p in layer.parameters()}


def measure(subject: Subject, x: torch.Tensor, y: torch.Tensor,
            progress: Any = None) -> tuple[Captured, dict[str, Any]]:
    """What the module docstring lists, as (a ``Captured`` for the registered ``inspect``
    statistics, the raw measurements as plain floats and lists)."""
    dev = next(subject.model.parameters()).device
    x, y = x.to(dev), y.to(dev)
    L = len(subject.layers)
    owner = _block_params(subject)
    sq = torch.zeros(L, dtype=torch.float64)
    gap = [Moments() for _ in range(L)]  # each block's gradient entries, merged as they arrive
    handles = []
    for p in subject.model.parameters():
        if p.requires_grad:
            def reduce(q: torch.Tensor, i: int | None = owner.get(id(p))) -> None:
                if i is not None and q.grad is not None:  # (it is: the hook runs after accumulation)
                    sq[i] += q.grad.detach().double().pow(2).sum().cpu()
                    gap[i].add(q.grad)
                q.grad = None  # reduced: never keep a second copy of the weights
            handles.append(p.register_post_accumulate_grad_hook(reduce))
    stream: list[torch.Tensor] = []
    sgrad = [float("nan")] * (L + 1)
    try:
        with torch.enable_grad(), _hooks(subject, stream), subject.attention() as attn:
            logits = subject.forward(x)
            loss = loss_of(subject, logits, y)
            log_z = torch.logsumexp(logits.detach().float(), dim=-1).mean().item()
            for i, s in enumerate(stream):
                if s.requires_grad:
                    s.register_hook(lambda g, i=i: sgrad.__setitem__(i, g.detach().float().norm().item()))
            del logits
        max_logit = [float(attn[i]) if i in attn else float("nan") for i in range(L)]
        loss.backward()
    finally:
        for h in handles:
            h.remove()
    xs = [s.detach().float().cpu() for s in stream]
    del stream
    base = loss.item()
    deletion = deletion_losses(subject, [(x, y)], lambda logits, t: loss_of(subject, logits, t), progress)
    raw = {"loss": base, "log_z": log_z, "deletion_loss": deletion, "grad_norm_block": sq.sqrt().tolist(),
           "grad_norm_stream": sgrad, "attn_max_logit": max_logit,
           "tokens": int(x.numel()), "sequences": int(x.size(0)), "context": int(x.size(1))}
    # float64 scalars: the rows hold these floats exactly (the deltas are differences of them)
    c = Captured(n_layer=L, stream=StreamStates(xs), loss=torch.tensor(base, dtype=torch.float64),
                 measured={"deletion": deletion, "state_grads": sgrad, "block_grads": raw["grad_norm_block"],
                           "log_z": log_z, "max_logit": max_logit})
    c.moments = {"param": _block_moments(subject.layers, torch.float64).cpu(),
                 "grad": torch.tensor([m.row() for m in gap], dtype=torch.float64)}
    c.provided = {"stream", "loss", "deletion", "state_grads", "block_grads", "log_z", "max_logit",
                  "param_stats", "grad_stats"}
    return c, raw


def _block_moments(layers: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(L, 3): mean, variance and max |w| of each block's trainable parameters."""
    return torch.stack([moments([p for p in b.parameters() if p.requires_grad], dtype) for b in layers])


def take_moments(c: Captured, layers: Any) -> None:
    """The per-block parameter statistics, and those of the gradients ``c.param_grads`` holds,
    into ``c`` (what the probe captures for the GAP statistics)."""
    c.moments["param"] = _block_moments(layers)
    c.provided.add("param_stats")
    if "param_grads" in c.provided:
        by: list[list[torch.Tensor]] = [[] for _ in layers]
        for (layer, _, _), g in c.param_grads:
            if g is not None:
                by[layer - 1].append(g)
        c.moments["grad"] = torch.stack([moments(gs).to(c.moments["param"].device) for gs in by])
        c.provided.add("grad_stats")


def probe_capture(subject: Subject, idx: torch.Tensor, targets: torch.Tensor, n_proj: int,
                  gen: torch.Generator | None, needs: set[str]) -> Captured:
    """What ``normlab.diagnostics.probe.probe_model`` captures, for any subject: the stream
    x_0..x_L from block hooks, the logits and loss of ``subject.forward``, the inputs of the
    norm modules inside the blocks (and of those running after the last block: ``final``),
    and one backward for every gradient. A block parameter ``attn.c_attn.weight`` of block
    l is the row (l, attn, c_attn.weight); a parameter directly on the block, (l, block, name)."""
    stream: list[torch.Tensor] = []
    norm_in: dict[str, torch.Tensor] = {}
    handles = []
    if "norm_inputs" in needs:
        handles = _norm_hooks(subject, norm_in)
    try:
        with torch.enable_grad(), _hooks(subject, stream):
            logits = subject.forward(idx)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
    finally:
        for h in handles:
            h.remove()
    c = Captured(n_layer=len(subject.layers), stream=StreamStates([x.detach() for x in stream]),
                 logits=logits.detach(), loss=loss, norm_inputs=norm_in, n_proj=n_proj, generator=gen)
    c.provided = {"stream", "logits", "loss", "norm_inputs"}
    keys: list[tuple[int, str, str]] = []
    params: list[torch.Tensor] = []
    if needs & {"param_grads", "stream_grads"}:
        for li, block in enumerate(subject.layers, start=1):
            for pname, p in block.named_parameters():
                if p.requires_grad:
                    head, _, rest = pname.partition(".")
                    keys.append((li, head, rest) if rest else (li, "block", pname))
                    params.append(p)
    c.take_grads(loss, params, keys, stream, needs)
    take_moments(c, subject.layers)
    return c


def _is_norm(m: torch.nn.Module) -> bool:
    return "norm" in type(m).__name__.lower() and not any(True for _ in m.children())


def _norm_hooks(subject: Subject, into: dict[str, torch.Tensor]) -> list[Any]:
    """Hooks writing each norm module's input into ``into``: ``blocks.{i}.{sub}.{name}`` inside
    block i (``sub`` the first part of its path, ``block`` when it sits on the block), and its
    own path for a norm outside the blocks that runs after the last block (the final norm)."""
    inside: set[int] = set()
    handles = []
    done = [False]  # the last block has run: a norm outside the blocks now is a final one

    def keep(name: str, final: bool = False) -> Callable:
        def hook(_m, args):
            if args and isinstance(args[0], torch.Tensor) and (not final or done[0]):
                into[name] = args[0].detach()
        return hook

    for i, block in enumerate(subject.layers):
        for path, m in block.named_modules():
            if path and _is_norm(m):
                inside.add(id(m))
                head, _, rest = path.partition(".")
                handles.append(m.register_forward_pre_hook(keep(f"blocks.{i}.{head}.{rest}" if rest
                                                                else f"blocks.{i}.block.{path}")))
    handles.append(subject.layers[-1].register_forward_hook(lambda *_: done.__setitem__(0, True)))
    handles.append(subject.layers[0].register_forward_pre_hook(lambda *_: done.__setitem__(0, False)))
    for path, m in subject.model.named_modules():
        if path and id(m) not in inside and _is_norm(m):
            handles.append(m.register_forward_pre_hook(keep(path, final=True)))
    return handles
