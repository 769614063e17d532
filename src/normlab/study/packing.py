"""How many trials one GPU holds: K, the size of a batched pack (``normlab.train.batched``), from
each trial's own memory cost and the device's memory.

A trial's cost (:func:`trial_cost`) is read off its model, not off a formula: weights, gradients
and AdamW moments from the parameters the config builds; activations from the tensors autograd
saves for backward in one forward + loss of the training micro-batch (train.batch_size /
train.grad_accum sequences of model.context tokens). That forward is the batched trainer's own
(``Stack.losses``: ``vmap`` over ``functional_call`` of the model, z-loss included) for one
trial: under vmap a linear layer may keep its input twice (as given and a flattened copy), so a
solo forward counts about a sixth less than a pack holds (the smoke preset). Saved tensors count once per storage
(views of one tensor, a tensor saved twice); the weights' storages are left out (counted as weights).

* float32 (train.dtype): the forward runs on the meta device (shapes only: no memory, no
  arithmetic). There ``scaled_dot_product_attention`` would take the math path and keep the
  T x T probabilities; a real device takes a fused kernel that keeps q, k, v, the output and
  the log-sum-exp, so a torch-function mode sends it to the fused kernel's meta version (CPU's
  flash kernel; CUDA's flash and memory-efficient kernels keep the same set, their log-sum-exp
  padded by a few KiB). The count equals a real CPU forward's byte for byte (tests/study/test_packing.py).
* bfloat16: autocast has no meta device (and a fake CUDA tensor aborts a CPU-only torch), so
  the forward runs for real on the CPU under CPU autocast, with 1 and 2 sequences, and is
  scaled to the micro-batch: the saved bytes are linear in the sequences (a constant: the
  bfloat16 copies of the weights). CPU autocast's op lists are not CUDA's: CUDA keeps the
  log-softmax of the logits in float32 (CPU: bfloat16), 2 bytes a logit more on a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from normlab.core.errors import UserError
from normlab.model import cost
from normlab.run.config import RunConfig
from normlab.run.train_config import OptimConfig
from normlab.train.plan import compatible, incompatibility, planned_model
from normlab.train.stack import Stack

MiB = 2**20


class _FusedAttention(TorchFunctionMode):
    """Sends ``scaled_dot_product_attention`` to the fused kernel a real device takes (on meta)."""

    def __torch_function__(self, func: Callable, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is F.scaled_dot_product_attention:
            return _fused_attention(*args, **(kwargs or {}))
        return func(*args, **(kwargs or {}))


def _fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: torch.Tensor | None = None,
                     dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                     **rest: Any) -> torch.Tensor:
    if dropout_p > 0 or rest.get("enable_gqa"):  # the fused CPU kernel has neither: CPU takes math too
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale, **rest)
    if attn_mask is not None and attn_mask.dtype == torch.bool:  # as SDPA does before a fused kernel:
        attn_mask = torch.zeros_like(attn_mask, dtype=q.dtype).masked_fill(~attn_mask, -math.inf)  # (kept)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, is_causal, attn_mask=attn_mask, scale=scale)[0]


@dataclass(frozen=True)
class TrialCost:
    """Bytes one trial holds on its device while it trains: ``params`` its weights (parameters
    and buffers), ``grads`` and ``optimizer`` (AdamW's two float32 moments) of its trainable
    parameters, ``activations`` what autograd keeps of one micro-batch for backward."""

    params: int
    grads: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer + self.activations

    def text(self) -> str:
        return (f"{_mib(self.total)} MiB (params {_mib(self.params)}, grads {_mib(self.grads)}, "
                f"Adam {_mib(self.optimizer)}, activations {_mib(self.activations)})")


def _mib(b: float) -> str:
    return f"{b / MiB:.1f}"


def _nbytes(ts: Iterable[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _meta_model(cfg: RunConfig) -> Any:
    # the vocabulary the run will have as far as it is known without the corpus (byte, bpe, a
    # tokenizer.json; a char corpus's stands in as model.vocab_size), as the run's pre-flight reads it
    return cost.meta_model(planned_model(cfg.model, cfg.data, cfg.train.init_from))


def batched(cfg: RunConfig) -> bool:
    """Whether ``cfg`` trains in a batched pack; a trial the batched trainer refuses (dropout, nGPT,
    diagnostics) trains alone, through the solo loop."""
    return incompatibility([cfg]) is None


def _loss(cfg: RunConfig, model: Any, n: int, device: str) -> tuple[Callable[[], Any], list[torch.Tensor]]:
    """The training forward + loss of one trial on ``n`` sequences, as its trainer computes it,
    and the weights it reads (the model's, or the stack's copy)."""
    zc, bf16 = cfg.optim.z_loss, cfg.train.dtype == "bfloat16"
    x = torch.zeros(n, cfg.model.context, dtype=torch.long, device=device)  # the ids are saved too
    if batched(cfg):  # the batched trainer's loss (Stack.losses), one trial of the stack
        stack = Stack([types.SimpleNamespace(model=model, optim=cfg.optim)], torch.device(device), bf16=bf16)
        z = torch.full((1,), zc, device=device)
        return (lambda: stack.losses(x[None], x[None], z, True)), [*stack.params.values(), *stack.buffers.values()]

    def solo() -> Any:  # the solo loop's (Trainer._loss)
        with torch.autocast(device, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            logits, ce = model(x, x, check=False)
        return ce + zc * torch.logsumexp(logits.float(), dim=-1).pow(2).mean() if zc > 0 else ce
    return solo, [*model.parameters(), *model.buffers()]


def saved_bytes(cfg: RunConfig, device: str = "meta", rows: int | None = None) -> int:
    """Bytes autograd keeps for backward in the training forward + loss of one trial of ``cfg``
    (its trainer's: batched, or solo when ``batched`` is False) on ``rows`` sequences (default
    the micro-batch), weights left out. ``device``: meta, or cpu for a real forward (under CPU
    autocast with train.dtype=bfloat16, which meta cannot run)."""
    t = cfg.train
    if t.dtype == "bfloat16" and device == "meta":
        raise ValueError("saved_bytes: autocast has no meta device; measure bfloat16 on cpu")
    model = _meta_model(cfg)
    if device != "meta":
        with torch.random.fork_rng(devices=[]):  # the caller's random state is left as it was
            torch.manual_seed(cfg.seed)
            model = model.materialise(device)
    run, read = _loss(cfg, model, t.batch_size // t.grad_accum if rows is None else rows, device)
    weights = {w.untyped_storage()._cdata for w in read}
    kept: dict[int, int] = {}

    def pack(s: torch.Tensor) -> torch.Tensor:
        store = s.untyped_storage()  # shared by views; a meta tensor's data_ptr() is 0, its storage is its own
        if store._cdata not in weights:
            kept[store._cdata] = store.nbytes()
        return s

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda s: s), \
            _FusedAttention() if device == "meta" else contextlib.nullcontext():
        run()
    return sum(kept.values())


def activation_bytes(cfg: RunConfig) -> int:
    """``saved_bytes`` of the micro-batch: on meta for float32; for bfloat16 a real CPU forward
    on 1 and 2 sequences, scaled (see the module docstring)."""
    if cfg.train.dtype != "bfloat16":
        return saved_bytes(cfg)
    one, two = saved_bytes(cfg, "cpu", 1), saved_bytes(cfg, "cpu", 2)
    return one + (cfg.train.batch_size // cfg.train.grad_accum - 1) * (two - one)


def trial_cost(cfg: RunConfig) -> TrialCost:
    """What one trial of ``cfg`` holds on a GPU in a batched pack (see the module docstring)."""
    model = _meta_model(cfg)
    trainable = [p for p in model.parameters() if p.requires_grad]
    return TrialCost(params=_nbytes(model.parameters()) + _nbytes(model.buffers()),
                     grads=_nbytes(trainable),                              # in the parameters' dtype
                     optimizer=2 * 4 * sum(p.numel() for p in trainable),   # exp_avg, exp_avg_sq: float32
                     activations=activation_bytes(cfg))


@dataclass(frozen=True)
class Pack:
    """``k`` trials per GPU. ``costs``: the cost of each trial considered (the first ones of those
    given that may share a batch); ``needs``: what each holds in the pack (:func:`pack_bytes`);
    ``shared``: what the pack holds once; ``budget`` = (1 - ``reserve``) x ``memory`` bytes;
    ``batched``: False when the first trial trains alone (the batched trainer refuses it)."""

    k: int
    costs: tuple[TrialCost, ...]
    needs: tuple[int, ...]
    shared: int
    budget: int
    memory: int
    reserve: float
    batched: bool = True

    def text(self) -> str:
        i = max(range(self.k), key=lambda j: self.needs[j])  # the largest of those packed speaks for all
        c, s = self.costs[i], "" if self.k == 1 else "s"
        weights = f"params {_mib(c.params)}" + (" x2 (stacked, and the trial's own model)" if self.batched else "")
        keep = "; dropping a finished trial: 2 x (params + Adam)" if self.needs[i] > c.params + c.total else ""
        alone = "" if self.batched else " (alone: the batched trainer refuses it)"
        return (f"packs {self.k} trial{s} per GPU{alone}: each needs {_mib(self.needs[i])} MiB ({weights}, grads "
                f"{_mib(c.grads)}, Adam {_mib(c.optimizer)}, activations {_mib(c.activations)}{keep}), shared "
                f"{_mib(self.shared)} (validation batches), budget {self.budget / MiB:.0f} MiB "
                f"({100 * (1 - self.reserve):.0f}% of {self.memory / MiB:.0f})")


def pack_bytes(c: TrialCost) -> int:
    """Bytes one trial holds in a batched pack. ``Stack`` trains a copy of its weights stacked with
    the others' while the trial keeps its own model on the device (checkpoints are exported into
    it), so the weights count twice. When a finished trial leaves, ``Stack.keep`` clones the
    remaining weights and moments before the old ones go (no gradients nor activations then held):
    2 x (weights + moments), which tops training's peak only when activations are small."""
    return c.params + max(c.total, 2 * (c.params + c.optimizer))


def shared_bytes(cfg: RunConfig) -> int:
    """What a pack holds once: the validation batches, on the device for the whole run (ids and
    targets, int64; the solo loop moves each to the device when it validates)."""
    return cfg.train.eval_batches * 2 * cfg.train.batch_size * cfg.model.context * 8


def _shape(c: RunConfig) -> str:
    """What a trial's memory depends on: its config without seed, name and learning rates (they
    change values, not sizes); z-loss stays (it adds a tensor)."""
    return dataclasses.replace(c, seed=0, name="", optim=OptimConfig(z_loss=c.optim.z_loss)).to_json()


def choose_pack(cfgs: list[RunConfig], memory_bytes: int, *, reserve: float = 0.1,
                limit: int | None = None) -> Pack:
    """The largest K such that the first K of ``cfgs`` fit in (1 - ``reserve``) x ``memory_bytes``
    together: at least 1, at most len(cfgs) and ``limit``, and only trials that may share a batch
    with the first (``train.run.compatible``; a trial the batched trainer refuses packs alone).
    Raises UserError when the first trial alone does not fit."""
    if not cfgs:
        raise ValueError("choose_pack: no trials given")
    if not 0 <= reserve < 1:
        raise UserError(f"reserve={reserve}: must be in [0, 1), the fraction of memory kept free")
    if limit is not None and limit < 1:
        raise UserError(f"limit={limit}: must be >= 1")
    budget, first = int((1 - reserve) * memory_bytes), cfgs[0]
    together = batched(first)
    n = next((i for i, c in enumerate(cfgs[1:], 1) if not compatible([first, c])), len(cfgs)) if together else 1
    n = min(n, limit or n)
    memo: dict[str, TrialCost] = {}  # the trials of a pack share model, data and train: costed once
    costs = []
    for c in cfgs[:n]:
        key = _shape(c)
        if key not in memo:
            memo[key] = trial_cost(c)
        costs.append(memo[key])
    needs = tuple(pack_bytes(c) if together else c.total for c in costs)
    shared = shared_bytes(first) if together else 0
    if shared + needs[0] > budget:
        t = first.train
        raise UserError(
            f"one trial needs {_mib(shared + needs[0])} MiB ({costs[0].text()}"
            + (f"; in a pack its weights twice and the validation batches, {_mib(shared)}" if together else "")
            + f") but the budget is {budget / MiB:.0f} MiB ({100 * (1 - reserve):.0f}% of {memory_bytes / MiB:.0f}); "
            f"raise train.grad_accum (now {t.grad_accum}: micro-batches of {t.batch_size // t.grad_accum} "
            "sequences) to shrink the activations, or use a device with more memory")
    k, used = 0, shared
    for need in needs:
        if used + need > budget:
            break
        k, used = k + 1, used + need
    return Pack(k, tuple(costs), needs, shared, budget, memory_bytes, reserve, together)


def pack_for_all(cfgs: list[RunConfig], memory_bytes: int, *, reserve: float = 0.1) -> Pack:
    """The K that fits whichever of ``cfgs`` share a job (a study's trials, packed by the slurm
    executor as they are claimed): the smallest over their distinct shapes, each packed with
    copies of itself."""
    shapes: dict[str, RunConfig] = {}
    for c in cfgs:
        shapes.setdefault(_shape(c), c)
    return min((choose_pack([c] * len(cfgs), memory_bytes, reserve=reserve) for c in shapes.values()),
               key=lambda p: p.k)


def device_memory(device: str | None = None) -> int | None:
    """Total memory of CUDA ``device`` (cuda, cuda:N, auto; None = the current one) in bytes;
    None without CUDA or for a CPU device (callers pass their own budget then)."""
    if not torch.cuda.is_available() or (device is not None and not device.startswith(("cuda", "auto"))):
        return None
    index = None if device in (None, "auto", "cuda") else torch.device(device).index
    return int(torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index).total_memory)
