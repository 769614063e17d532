"""The captures of ``normlab inspect``; the statistics are the registry's (``tools`` naming
``inspect`` in diagnostics/catalogue.py), computed on what is captured here.

On one batch of windows ``ids`` (B, T) of the subject's own tokens:

- forward with gradients: residual stream x_0..x_L (x_0 enters block 1, x_l leaves block
  l), attention max |logit| per block, mean log Z of the output softmax, the loss; then one
  backward for dLoss/dx_l and each block's parameter-gradient norm;
- L no-grad forwards with one block skipped each (its input passed on): the deletion loss;
- each head's attention entropy, where the subject's attention recording reads the
  probabilities (``attention_record``), and, with ``sharpness_iters`` > 0, the loss again
  for the sharpness's Hessian-vector products (``curvature``), run when the statistic asks.

Memory: gradients are reduced to one number per block the moment each parameter's
gradient is accumulated and then dropped (a post-accumulate hook), so the backward never
holds a second copy of the weights; the stream states are kept detached in float32 (L + 1
tensors of B x T x d) for the layer x layer matrix.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

from normlab.diagnostics.attention_record import entropy_table
from normlab.diagnostics.curvature import Curvature
from normlab.diagnostics.hooks import recording
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
    with recording(subject, stream=False, skip=skip):
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
        with recording(subject) as rec:
            subject.forward(x)
        xs.append([s.detach().float().cpu() for s in rec.stream])
    return [torch.cat(col) for col in zip(*xs)]


def _block_params(subject: Subject) -> dict[int, int]:
    """id(parameter) -> block index (parameters outside the blocks are not listed)."""
    return {id(p): i for i, layer in enumerate(subject.layers) for p in layer.parameters()}


def measure(subject: Subject, x: torch.Tensor, y: torch.Tensor, progress: Any = None,
            sharpness_iters: int = 0, seed: int = 0) -> tuple[Captured, dict[str, Any]]:
    """What the module docstring lists, as (a ``Captured`` for the registered ``inspect``
    statistics, the raw measurements as plain floats and lists); with ``sharpness_iters`` > 0
    the sharpness's loss too (computed when the statistic asks)."""
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
    sgrad = [float("nan")] * (L + 1)
    try:
        with torch.enable_grad(), recording(subject) as rec, subject.attention() as attn:
            stream = rec.stream
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
    del stream, rec
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
    take_heads(c, entropy_table(attn, L))
    if sharpness_iters > 0:
        take_curvature(c, subject, lambda: loss_of(subject, subject.forward(x), y), sharpness_iters, seed)
    return c, raw


def take_heads(c: Captured, table: torch.Tensor | None) -> None:
    """The (L, H) head entropies of an attention recording as ``attention["head_entropy"]``."""
    if table is not None:
        c.attention["head_entropy"] = table
        c.provided.add("attention")


def take_curvature(c: Captured, subject: Subject, loss: Callable[[], torch.Tensor], iters: int, seed: int) -> None:
    """The need ``hessian``: ``loss`` recomputed under the subject's attention recording (the
    lab model's explicit path has a second derivative; the fused kernels have none)."""
    def traced() -> torch.Tensor:
        with subject.attention():
            return loss()
    c.curvature = Curvature(traced, [p for p in subject.model.parameters() if p.requires_grad], iters, seed)
    c.provided.add("hessian")


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
                  gen: torch.Generator | None, needs: set[str], sharpness_iters: int = 0, seed: int = 0) -> Captured:
    """What ``normlab.diagnostics.probe.probe_model`` captures, for any subject (the lab model
    included): the stream x_0..x_L (and a second stream beside it, ResiDual's d), the logits
    and loss of ``subject.forward``, the inputs of the norm modules, and one backward for
    every gradient of the block weights (``Subject.block_weights``) and the stream; the attention
    probabilities from a second, no-grad forward under ``subject.attention()`` (so the first keeps
    the fast attention and its numbers), and with ``sharpness_iters`` > 0 the sharpness's loss."""
    with torch.enable_grad(), recording(subject, norms="norm_inputs" in needs) as rec:
        logits = subject.forward(idx)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
    c = Captured(n_layer=len(subject.layers), stream=StreamStates([x.detach() for x in rec.stream]),
                 logits=logits.detach(), loss=loss, norm_inputs=rec.norm_in, n_proj=n_proj, generator=gen)
    c.provided = {"stream", "logits", "loss", "norm_inputs"}
    aux = rec.aux_stream()
    if aux is not None:
        c.aux = StreamStates([a.detach() for a in aux])
        c.provided.add("aux")
    params, keys = subject.block_weights() if needs & {"param_grads", "stream_grads"} else ([], [])
    c.take_grads(loss, params, keys, rec.stream, needs)
    take_moments(c, subject.layers)
    if "attention" in needs:
        with torch.no_grad(), subject.attention() as attn:
            subject.forward(idx)
        take_heads(c, entropy_table(attn, c.n_layer))
    if sharpness_iters > 0 and "hessian" in needs:
        def probe_loss() -> torch.Tensor:
            logits = subject.forward(idx)
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        take_curvature(c, subject, probe_loss, sharpness_iters, seed)
    return c
