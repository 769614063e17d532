"""Cheap in-training statistics every k steps, one JSON line per active step.

The training loop (normlab.train) builds ``TrainingDiagnostics`` when
``train.diag_every > 0`` and, on steps where ``active(step)`` is true, calls
``before_forward`` -> (forward/backward of every micro-batch) -> ``after_backward``
-> (clip, optimizer.step, model.after_step) -> ``after_step``. Each active step appends to
RUN/diagnostics.jsonl one key per training statistic of the registry
(``normlab.diagnostics.catalogue.STATISTICS``, in its order; a statistic added there is
written here too). A line holds ``step`` (the optimizer step) and, per statistic, its
``key``: one number (``over`` scalar) or a list of ``size(L)`` values in the order of its
``over`` (``labels(L)``: x_0..x_L, blocks 1..L, or [embeddings, blocks 1..L, final
norm/head]). The registry is the list of keys; docs/diagnostics.md defines each.

Cost: per-group norms use ``torch._foreach_norm`` (one fused pass, no per-parameter
``.item()``). The training forward is left alone (no hooks, fast attention); every
activation statistic (stream, attention, log Z, output change) comes from one extra
no-grad forward on the fixed batch trimmed to ``fixed_rows`` sequences, taken after the
update, so all steps are measured on the same inputs. The GAP statistics (max, mean and
variance of each parameter group and its gradient) concatenate one group at a time. The
spike statistics (``normlab.diagnostics.spikes``) take every step's loss and gradient norm
through ``record`` (kept on the device as they are) and scan them here; their window rides
in the checkpoint (``state``, ``load_state``). Given the optimizer, its Adam state after the
step (``monitors.AdamView``: moments, and the preconditioner of the preconditioned sharpness);
every ``sharpness_every`` steps the sharpness (``curvature``: power iteration on Hessian-vector
products of the whole fixed batch's loss, dropout off, explicit attention; about 40-60
training steps of cost per call on the smoke model, docs/diagnostics.md, and one more host
sync). Every other number of a step is read back to the host in a single transfer. W_0 is the model as it was when the
object was first built for this run directory; its logits are kept in
RUN/diagnostics_ref.safetensors so that a resumed run keeps measuring against the same W_0.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_bytes
from normlab.diagnostics import monitors, spikes
from normlab.diagnostics.catalogue import STATISTICS
from normlab.diagnostics.curvature import ITERS, Curvature
from normlab.diagnostics.hooks import recording
from normlab.diagnostics.statistic import Captured, StreamStates, chosen
from normlab.diagnostics.subject import as_subject
from normlab.run.dir import RunDir
from normlab.stats.tensors import moments

if TYPE_CHECKING:
    from normlab.model.transformer import TransformerLM

ATTENTION_KEYS = ("max_logit", "min_entropy", "mean_entropy")  # what the lab's attention records
EARLY = frozenset({"grads", "grad_stats"})  # needs met right after the backward, before clipping


class TrainingDiagnostics:
    """See the module docstring. ``every`` = k; ``fixed_rows`` caps the fixed batch; the
    ``optimizer`` (its Adam state) and, every ``sharpness_every`` steps (a multiple of k; 0 =
    never), the sharpness of the whole fixed batch by ``sharpness_iters`` power iterations."""

    def __init__(self, model: nn.Module, run_dir: str | Path, fixed_batch: tuple[torch.Tensor, torch.Tensor],
                 every: int, fixed_rows: int = 1, optimizer: torch.optim.Optimizer | None = None,
                 sharpness_every: int = 0, sharpness_iters: int = ITERS) -> None:
        if every < 1 or sharpness_every < 0 or sharpness_iters < 1:
            raise ValueError(f"every={every}, sharpness_every={sharpness_every}, sharpness_iters={sharpness_iters}: "
                             "must be >= 1, >= 0 and >= 1")
        self.opt, self.sharpness_every, self.sharpness_iters = optimizer, sharpness_every, sharpness_iters
        self.batch = fixed_batch  # the sharpness's loss: every row of the fixed batch, with its targets
        self.model: Any = getattr(model, "_orig_mod", model)  # hooks go on the eager module

        self.run_dir, self.every = Path(run_dir), every
        self.run = RunDir(self.run_dir)  # the owner of RUN/diagnostics.jsonl and the W_0 reference
        self.x = fixed_batch[0][:fixed_rows]
        self.L = len(self.model.blocks)
        self.subject = as_subject(self.model)  # what the one capture path records on
        # Parameter groups: 0 = embeddings, 1..L = blocks, L + 1 = everything after (final norm, head).
        seen: set[int] = set()
        self.params: list[nn.Parameter] = []
        group: list[int] = []
        named = list(self.model.named_parameters())
        for name, p in named:
            if id(p) in seen:
                continue  # tied embedding/head counted once, under embeddings
            seen.add(id(p))
            parts = name.split(".")
            g = int(parts[1]) + 1 if parts[0] == "blocks" else (0 if parts[0] in ("wte", "wpe") else self.L + 1)
            self.params.append(p)
            group.append(g)
        self.group = torch.tensor(group, dtype=torch.long)
        self.n_groups = self.L + 2
        self.members = [[i for i, g in enumerate(group) if g == k] for k in range(self.n_groups)]
        self.group_rms = monitors.group_rms(self.params, self.group, self.n_groups)
        everything = {n for _, s in STATISTICS.items() for n in s.needs}
        # the registry's training statistics, in its order (the order of a line's keys);
        # chosen() also refuses two that would write the same key
        self.stats = chosen([s for _, s in STATISTICS.items()], "training", everything)
        self._early: dict[str, torch.Tensor] = {}  # statistics of the gradients, from after_backward
        self._snapshot: list[torch.Tensor] | None = None
        self.spikes = spikes.SpikeWindow(self.x.device, spikes.WINDOW, spikes.THRESHOLD)
        self.ref = self._reference()

    # ------------------------------------------------------------------ public API
    def active(self, step: int) -> bool:
        return step % self.every == 0

    def record(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        """Every training step's mean cross-entropy and pre-clip gradient norm, for the spike
        statistics (device tensors, kept as they are until the next diagnostics step)."""
        self.spikes.record(loss, grad_norm)

    def state(self, step: int) -> dict[str, Any]:
        """What a checkpoint at ``step`` keeps so that a resumed run scores spikes as this one."""
        return {"step": step, "spikes": self.spikes.state()}

    def load_state(self, state: dict[str, Any] | None, step: int) -> None:
        """Continue from :meth:`state`; one of another step (a checkpoint written while the
        diagnostics were off) or window size starts the spike window afresh."""
        sp = (state or {}).get("spikes")
        if state and state.get("step") == step and sp and sp.get("window") == self.spikes.size:
            self.spikes.load(sp)

    def before_forward(self, step: int) -> None:
        """Nothing to install: activation statistics come from the fixed-batch forward in
        ``after_step``, so the training forward keeps its fast attention path and no hooks."""

    def after_backward(self, step: int) -> None:
        """Gradients are complete: statistics of the gradients (before clipping), weights snapshot."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        c = Captured(n_layer=self.L, provided={"grads"}, grads=grads, group_norms=self._group_norms)
        if any("grad_stats" in s.needs for s in self.stats):
            c.moments["grad"] = self._group_moments(grads)
            c.provided.add("grad_stats")
        self._early = {s.name: s.compute(c) for s in self.stats if s.needs <= c.provided}
        if any("update" in s.needs for s in self.stats):
            self._snapshot = [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def after_step(self, step: int, metrics: dict | None = None) -> dict[str, Any]:
        """Weights are updated: fixed-batch forward, every other statistic, one host sync, one JSON line."""
        logits, c = self._forward(record=True)
        c.reference, c.group_norms = self.ref, self._group_norms
        c.provided.add("reference")
        c.group_rms = self.group_rms
        if self._snapshot is not None:
            c.params, c.snapshot = [p.detach() for p in self.params], self._snapshot
            c.provided.add("update")
        if self.opt is not None:
            c.optimizer = monitors.AdamView(self.opt, self.params)
            c.provided.add("optimizer")
        if self.sharpness_every and step % self.sharpness_every == 0:
            c.curvature = Curvature(self._loss, list(self.params), self.sharpness_iters)
            c.provided.add("hessian")
        if any("param_stats" in s.needs for s in self.stats):
            c.moments["param"] = self._group_moments([p.detach() for p in self.params])
            c.provided.add("param_stats")
        c.history = self.spikes.scan()
        c.provided.add("history")
        parts = dict(self._early)
        for s in self.stats:
            if s.name not in parts and s.needs <= c.provided and not s.needs & EARLY:
                parts[s.name] = s.compute(c)
        done = [(s, parts[s.name]) for s in self.stats if parts.get(s.name) is not None]
        dev = self.x.device
        # a labelled statistic (per head) writes its values in its rows' order
        values = [v if isinstance(v, torch.Tensor) else torch.stack([x for _, x in v] if s.over == "labelled" else list(v))
                  for s, v in done]
        flat = torch.cat([v.detach().float().reshape(-1).to(dev) for v in values]).tolist()  # the one sync
        rec: dict[str, Any] = {"step": step}
        i = 0
        for (s, _), v in zip(done, values):
            k = v.numel()
            vals = [x if math.isfinite(x) else None for x in flat[i: i + k]]
            rec[s.key] = vals[0] if s.over == "scalar" else vals
            i += k
        if metrics and "train/loss" in metrics:
            rec["train/loss"] = metrics["train/loss"]
        self.run.append_diagnostics(rec)
        self._early, self._snapshot = {}, None
        return rec

    def close(self) -> None:
        for a in self._attention():
            a.record = False

    # ------------------------------------------------------------------ internals
    def _attention(self) -> list[Any]:  # the blocks' CausalSelfAttention modules
        return [b.attn.branch for b in self.model.blocks if hasattr(b.attn.branch, "record")]

    def _loss(self) -> torch.Tensor:
        """Mean cross-entropy of the whole fixed batch with its graph, dropout off, attention on
        its explicit path (the fused kernels have no second derivative): the sharpness's loss."""
        was = self.model.training
        self.model.eval()
        try:
            with self.subject.attention():
                return self.model(*self.batch, check=False)[1]
        finally:
            self.model.train(was)

    def _group_norms(self, tensors: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> torch.Tensor:
        """sqrt of the per-group sum of squared Frobenius norms: (L + 2,) tensor."""
        norms = torch.stack(torch._foreach_norm(tensors)).float()
        sq = torch.zeros(self.n_groups, device=norms.device).index_add_(0, self.group.to(norms.device), norms**2)
        return sq.sqrt()

    def _group_moments(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """(L + 2, 3): mean, variance and max |x| of each parameter group's entries (one
        concatenation per group: a block's tensors at a time, never the whole model)."""
        return torch.stack([moments([tensors[i] for i in idx]).to(self.x.device) for idx in self.members])

    @torch.inference_mode()  # lighter than no_grad per op (no version counters): runs every diag step
    def _forward(self, record: bool = False) -> tuple[torch.Tensor, Captured]:
        """Logits on the fixed batch; with ``record`` also the streams and attention records."""
        was = self.model.training
        self.model.eval()  # dropout off: F(x; W) must depend on W only
        attn = self._attention() if record else []
        for a in attn:
            a.record = True
        try:
            with recording(self.subject, stream=record) as rec:
                # The model's one forward minus its input check (this batch was checked when
                # the run started): one host sync less per diagnostic step.
                logits = self.model.run(self.x).detach()
        finally:
            self.model.train(was)
            for a in attn:
                a.record = False
        c = Captured(n_layer=self.L, provided={"logits"}, logits=logits)
        if record and len(rec.stream) == self.L + 1:
            c.stream = StreamStates([x.detach() for x in rec.stream])
            c.provided.add("stream")
            aux = rec.aux_stream()
            if aux is not None:  # a second stream (ResiDual's d)
                c.aux = StreamStates([a.detach() for a in aux])
                c.provided.add("aux")
        if attn:
            nan = torch.full((), float("nan"), device=self.x.device)
            keys = dict.fromkeys((*ATTENTION_KEYS, *(k for a in attn for k in a.stats)))
            c.attention = {k: torch.stack([a.stats.get(k, nan).float() for a in attn]) for k in keys}
            c.provided.add("attention")
        return logits, c

    def _reference(self) -> torch.Tensor:
        # safetensors, not pickle: nothing in a run directory can run code when loaded.
        from safetensors import SafetensorError
        from safetensors.torch import load_file, save

        path = self.run.diagnostics_ref
        if path.exists():
            try:
                ref = load_file(path, device=str(self.x.device))["logits"]
            except (SafetensorError, KeyError, OSError) as e:
                # Recomputing would silently measure against W_t instead of W_0.
                raise UserError(f"{path}: unreadable ({e}); delete it only if you accept that the "
                                "output-change statistic restarts from the current weights") from None
            if ref.shape[:2] == self.x.shape:
                return ref
        ref, _ = self._forward()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, save({"logits": ref.detach().cpu().contiguous()}))
        return ref


def first_nonfinite(model: TransformerLM, forward_backward: Any, step: int) -> dict[str, Any] | None:
    """Run one training step's ``forward_backward()`` with capture hooks; name the first
    place a non-finite value appears, in the order the computation visits it.

    Forward: the embedding output, then per block l the output of its attention sub-layer,
    of its FFN sub-layer and of the block (``blocks.l.attn``, ``blocks.l.ffn``, ``blocks.l``:
    the sites of ``diagnostics.hooks.recording``), then the loss (``head``). If the forward is finite, backward: the parameter whose gradient turned
    non-finite, searched from the output end (where backprop starts) towards the input,
    since a bad gradient propagates from its source to everything before it.
    Returns ``{"step", "stage": "forward"|"backward", "where"}`` or None if the step is
    clean on replay (e.g. a non-deterministic kernel on a GPU).
    """

    def bad(t: Any) -> bool:  # a tensor, or a state tuple (ResiDual's (x, d)) holding one
        if isinstance(t, (tuple, list)):
            return any(bad(u) for u in t)
        return isinstance(t, torch.Tensor) and not bool(torch.isfinite(t).all())

    model.zero_grad(set_to_none=True)
    with recording(as_subject(model), stream=False, sites=True) as rec:
        loss, _ = forward_backward()  # (mean CE of the step, log Z)
    for where, out in rec.sites:  # in the order the forward ran them, micro-batch after micro-batch
        if bad(out):
            return {"step": step, "stage": "forward", "where": where}
    if bad(loss):
        return {"step": step, "stage": "forward", "where": "head"}
    for name, p in reversed(list(model.named_parameters())):
        if bad(p.grad):
            return {"step": step, "stage": "backward", "where": name}
    return None
