"""The optimizer monitors of the in-training diagnostics, and the per-head attention entropy.

``grad_norm`` and ``update_ratio``: Frobenius norms per group of the gradient before clipping
and of the update over the weights (``Captured.group_norms``, every parameter). Per parameter group (embeddings, blocks 1..L, final norm and head; ``over`` groups), over the
group's matrices (its 2-D parameters: the embeddings, W_Q W_K W_V, W_O, W_1, W_2, the head;
gains and biases left out, whose Adam updates are as large as a matrix entry's but few), RMS =
sqrt(sum of squares / number of entries), pooled over the matrices:

- ``update_rms``: RMS of W_{t+1} - W_t over one optimizer step, ``update_rms_ratio`` its ratio
  to RMS(W_{t+1}) (``update_ratio`` is the Frobenius ratio over every parameter of the group);
- ``adam_m_rms``, ``adam_sqrt_v_rms``: RMS of Adam's exp_avg and of sqrt(exp_avg_sq), as stored
  (no bias correction), over the matrices that Adam updates (NaN where none does: Muon's).

:class:`AdamView` is what the need ``optimizer`` holds: Adam's state of each parameter of the
tool's list, and the preconditioner of ``curvature.precond_sharpness``.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch


class AdamView:
    """Adam's state of ``params`` in their order (an empty dict where a parameter has none:
    before its first step; another optimizer's state, e.g. Muon's momentum, is not Adam's)."""

    def __init__(self, optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor]) -> None:
        group = {id(p): g for g in optimizer.param_groups for p in g["params"]}
        self.params = list(params)
        self.state: list[dict[str, Any]] = [dict(optimizer.state.get(p, {})) for p in self.params]
        self.hyper: list[dict[str, Any]] = [group.get(id(p), {}) for p in self.params]

    def moment(self, key: str) -> list[torch.Tensor | None]:
        """Each parameter's ``exp_avg`` or ``exp_avg_sq`` (None where it has none)."""
        return [s.get(key) for s in self.state]

    def inverse_sqrt_preconditioner(self) -> list[torch.Tensor] | None:
        """P^{-1/2} per parameter, P = sqrt(v_hat) + eps, v_hat = exp_avg_sq / (1 - beta2^step);
        zero for a parameter Adam has not stepped (it does not move); None when Adam has stepped
        none, or another optimizer governs one of them (the product would not be Adam's)."""
        if any(s and "exp_avg_sq" not in s for s in self.state) or not any(self.state):
            return None
        out = []
        for p, s, h in zip(self.params, self.state, self.hyper):
            if not s:
                out.append(torch.zeros_like(p))
                continue
            step = torch.as_tensor(s["step"], dtype=torch.float32, device=p.device)
            v_hat = s["exp_avg_sq"].float() / (1 - torch.pow(float(h["betas"][1]), step))
            out.append((v_hat.sqrt() + float(h["eps"])).rsqrt())
        return out


def grad_norm(c: Any) -> torch.Tensor:
    assert c.group_norms is not None and c.grads is not None  # what the need "grads" provides
    return c.group_norms(c.grads)


def update_ratio(c: Any) -> torch.Tensor:
    assert c.group_norms is not None and c.params is not None and c.snapshot is not None  # need "update"
    return c.group_norms(torch._foreach_sub(c.params, c.snapshot)) / c.group_norms(c.params).clamp_min(1e-30)


def update_rms(c: Any) -> torch.Tensor:
    assert c.params is not None and c.snapshot is not None and c.group_rms is not None  # need "update"
    return c.group_rms(torch._foreach_sub(c.params, c.snapshot))


def update_rms_ratio(c: Any) -> torch.Tensor:
    return update_rms(c) / c.group_rms(c.params).clamp_min(1e-30)


def adam_rms(key: str) -> Any:
    """RMS of exp_avg (``exp_avg``) or of sqrt(exp_avg_sq) (``exp_avg_sq``) per group."""
    def compute(c: Any) -> torch.Tensor | None:
        got = c.optimizer.moment(key)
        if all(t is None for t in got):
            return None
        return c.group_rms(got, squared=key == "exp_avg_sq")  # sum of sqrt(v)^2 = sum of v: no copy
    return compute


def head_entropy_rows(c: Any) -> list[tuple[tuple[int, str, str], torch.Tensor]] | None:
    """((block l, "attn", "head{h}"), mean entropy of head h over its queries), h from 0."""
    e = c.attention.get("head_entropy")
    if e is None or e.dim() != 2:
        return None
    return [((li + 1, "attn", f"head{h}"), e[li, h]) for li in range(e.size(0)) for h in range(e.size(1))]


def group_rms(params: Sequence[torch.Tensor], group: torch.Tensor, n_groups: int) -> Any:
    """``(tensors, squared=False) -> (n_groups,)``: RMS over the entries of each group's
    matrices among ``tensors`` (aligned with ``params``; None entries and 1-D parameters left
    out; NaN for a group with none), ``group[i]`` the group of ``params[i]``. ``squared``:
    the tensors hold squares (>= 0), and the RMS is that of their square roots."""
    matrix = [p.dim() >= 2 for p in params]
    numel = torch.tensor([p.numel() for p in params], dtype=torch.float32)

    def rms(tensors: Sequence[torch.Tensor | None], squared: bool = False) -> torch.Tensor:
        given = [(i, t) for i, t in enumerate(tensors) if t is not None and matrix[i]]
        if not given:
            return torch.full((n_groups,), float("nan"), device=params[0].device)
        idx = [i for i, _ in given]
        norms = torch.stack(torch._foreach_norm([t for _, t in given], 1 if squared else 2)).float()
        at = group[idx].to(norms.device)
        sq = torch.zeros(n_groups, device=norms.device).index_add_(0, at, norms if squared else norms ** 2)
        n = torch.zeros(n_groups, device=norms.device).index_add_(0, at, numel[idx].to(norms.device))
        return (sq / n).sqrt()  # 0 / 0: NaN for a group without matrices
    return rms
