"""K trials stacked along a leading dimension: parameters, Adam moments, buffers, the
vmapped loss and the optimizer step on each trial's slices (the batched loop's model).

Parameters are leaves of shape (K, ...); the loss is ``torch.func.vmap`` over
``torch.func.functional_call`` of one template model, so one batched matmul replaces K
small ones. The step applies the solo loop's clipping and AdamW kernel to each trial's
slices (``normlab.train.step``), which keeps a trial's float32 rounding that of its solo run.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable

import torch
from torch import nn

from normlab.run.train_config import OptimConfig
from normlab.train.optim import make_optimizer, param_groups
from normlab.train.step import clip_grads_, clip_limit


class Stack:
    """The stacked state of ``trials`` (objects with ``.model`` and ``.optim``, their optim
    section; trial 0's model is the template the stack is evaluated through); ``bf16``: the
    forward under bfloat16 autocast (train.dtype)."""

    def __init__(self, trials: list[Any], device: torch.device, bf16: bool = False) -> None:
        self.base, self.device = trials[0].model, device
        groups = param_groups(self.base, 0.0)
        names = [n for g in groups for n in g["names"]]
        self.params = {n: torch.stack([dict(t.model.named_parameters())[n].detach() for t in trials])
                       .requires_grad_() for n in names}
        self.order = [n for n, p in self.base.named_parameters() if p.requires_grad]  # the solo loop's order
        self.decay = set(groups[0]["names"])
        self.m = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.v = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.buffers = {n: torch.stack([dict(t.model.named_buffers())[n] for t in trials])
                        for n, _ in self.base.named_buffers()}
        o = [t.optim for t in trials]
        self.hyper: dict[str, list[float]] = {
            "wd": [x.weight_decay for x in o], "b1": [x.beta1 for x in o], "b2": [x.beta2 for x in o],
            "eps": [x.eps for x in o], "clip": [clip_limit(x) for x in o], "z": [x.z_loss for x in o]}
        self.z_on = any(x.z_loss > 0 for x in o)
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else None
        # CPU's flash SDPA kernel has no vmap batching rule, so vmap runs it once per trial
        # (the same kernel call a solo run makes, which keeps the curves together); the
        # matmuls around it are batched. Measured under load, the math kernel was not faster.
        warnings.filterwarnings("ignore", message=".*batching rule for aten::_scaled_dot_product")

    # -- forward / backward ---------------------------------------------------------------------
    def _loss_one(self, p: dict, b: dict, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple:
        # forward's token-range check reads values, which vmap cannot do; the tokens come
        # from the corpus, so check=False. tie_weights keeps the tied head on wte's slice.
        logits, _ = torch.func.functional_call(self.base, {**p, **b}, (x,), {"check": False},
                                               tie_weights=True)  # (B, T, V)
        ce = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
        if not self.z_on:
            return ce, ce
        log_z = torch.logsumexp(logits.float(), dim=-1).pow(2).mean()   # PaLM z-loss, as the solo loop
        return ce + z * log_z, ce

    def losses(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, train_dims: bool) -> tuple:
        """(objective, cross-entropy), each (K,); ``train_dims``: x and y carry a trial dimension."""
        dims = (0, 0, 0, 0, 0) if train_dims else (0, 0, None, None, 0)
        with self.autocast or contextlib.nullcontext():
            return torch.func.vmap(self._loss_one, in_dims=dims)(self.params, self.buffers, x, y, z)

    def forward_backward(self, batch: Callable[[int], list[tuple[torch.Tensor, torch.Tensor]]],
                         accum: int) -> torch.Tensor:
        """``accum`` micro-batches, ``batch(m)[k]`` that of trial k; gradients accumulated, (K,) mean CE."""
        z = torch.tensor(self.hyper["z"], device=self.device)
        step_loss = torch.zeros(len(self.hyper["z"]), device=self.device)
        for m in range(accum):
            xs, ys = zip(*batch(m))
            x, y = torch.stack(xs).to(self.device), torch.stack(ys).to(self.device)     # (K, B, T)
            obj, ce = self.losses(x, y, z, True)
            (obj.sum() / accum).backward()   # trials are independent: d(sum)/d(theta_k) = d(obj_k)
            step_loss += ce.detach().float() / accum
        return step_loss

    @torch.no_grad()
    def validate(self, val: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """(K,) mean validation cross-entropy on the shared batches (no z-loss)."""
        z = torch.zeros(len(self.hyper["z"]), device=self.device)
        return sum(self.losses(vx, vy, z, False)[1].float() for vx, vy in val) / len(val)

    # -- the optimizer step ---------------------------------------------------------------------
    @torch.no_grad()
    def step(self, lrs: list[float], step: int) -> torch.Tensor:
        """Per trial, the solo step's own calls on that trial's slices: :func:`clip_grads_`
        (parameters in ``model.parameters()`` order, as the solo loop passes them), then
        ``torch._fused_adamw_``, the kernel of the solo loop's ``AdamW(fused=True)``, per
        parameter group. Returns the unclipped norms (K,)."""
        ps, h = self.params, self.hyper
        grads = {n: g for n, p in ps.items() if (g := p.grad) is not None}  # all of them, after backward
        norms = []
        for i, lr in enumerate(lrs):
            total = clip_grads_([grads[n][i] for n in self.order], h["clip"][i])
            norms.append(total)
            step_t = torch.tensor(float(step), device=total.device)  # AdamW's state["step"] after its += 1
            for decays in (True, False):
                names = [n for n in ps if (n in self.decay) == decays]
                if names:
                    torch._fused_adamw_([ps[n][i] for n in names], [grads[n][i] for n in names],
                                        [self.m[n][i] for n in names], [self.v[n][i] for n in names], [],
                                        [step_t] * len(names), amsgrad=False, lr=lr, beta1=h["b1"][i],
                                        beta2=h["b2"][i], weight_decay=h["wd"][i] if decays else 0.0,
                                        eps=h["eps"][i], maximize=False)
        for p in ps.values():
            p.grad = None
        return torch.stack(norms)

    # -- trials leaving the stack ---------------------------------------------------------------
    def keep(self, keep: list[int]) -> None:
        """Drop finished trials from the stack (their compute stops; the rest carry on)."""
        idx = torch.tensor(keep)
        self.params = {n: t.detach()[idx].clone().requires_grad_() for n, t in self.params.items()}
        self.m = {n: t.detach()[idx].clone() for n, t in self.m.items()}
        self.v = {n: t.detach()[idx].clone() for n, t in self.v.items()}
        self.buffers = {n: b[keep] for n, b in self.buffers.items()}
        self.hyper = {k: [v[i] for i in keep] for k, v in self.hyper.items()}

    @torch.no_grad()
    def export(self, i: int, model: nn.Module, o: OptimConfig, step: int) -> torch.optim.Optimizer:
        """Copy slice ``i`` into ``model`` and a real AdamW holding its moments, so that the
        trial's checkpoint is a solo checkpoint (``normlab.run.checkpoint`` format)."""

        named = dict(model.named_parameters())
        for n, p in self.params.items():
            named[n].copy_(p[i])
        opt = make_optimizer(model, o)
        for n, p in named.items():
            opt.state[p] = {"step": torch.tensor(float(step)), "exp_avg": self.m[n][i].clone(),
                            "exp_avg_sq": self.v[n][i].clone()}
        return opt
