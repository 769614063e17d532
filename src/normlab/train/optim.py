"""The optimiser ``optim.name`` names: AdamW with decoupled weight decay (Loshchilov & Hutter
2019) on matrices only, or Muon on the hidden matrices with that AdamW on the rest
(``normlab.train.muon``).

No decay on norms' gains and biases, on biases of linear layers, on learned scalars
(ReZero, nGPT's alphas) or on embeddings: decaying those pulls gains toward zero and
shrinks token representations, which is not the regulariser AdamW intends (nanoGPT,
GPT-3 and OLMo make the same choice). The rule is structural: a parameter decays when it
is at least 2-D and is not an embedding table (the tied output head is the embedding).

Under a parametrisation other than sp (``model.param``, ``normlab.model.param``) each of the
two groups splits by the parametrisation's rule for each parameter's role (muP: the hidden
matrices get lr / m_w and weight decay x m_w): a group then carries ``lr_scale`` (the training
loop sets its lr to the schedule's times it) and, where the rule scales Adam's epsilon,
``eps_scale``. Under sp the groups are the two above, with no extra key, so optimizer state
and checkpoints stay as they were.
"""

from __future__ import annotations

from typing import Any, Callable, Collection

import torch
from torch import nn

from normlab.core.errors import ConfigError
from normlab.model.param import GroupRule, Parametrisation, roles
from normlab.run.train_config import OptimConfig
from normlab.train.muon import make_muon


def param_groups(model: nn.Module, weight_decay: float, skip: Collection[str] = ()) -> list[dict[str, Any]]:
    """Two AdamW groups, decayed matrices and everything else (names kept for inspection), each
    split by the parametrisation's rules (module docstring); ``skip``: names another optimiser
    updates (Muon's)."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    param = getattr(model, "parametrisation", None)  # (another model.impl has none: sp)
    role = roles(model) if param is not None else {}
    groups: dict[tuple[bool, GroupRule], dict[str, Any]] = {
        (True, GroupRule()): {"params": [], "weight_decay": weight_decay, "names": []},
        (False, GroupRule()): {"params": [], "weight_decay": 0.0, "names": []}}
    for name, p in model.named_parameters():  # shared (tied) tensors appear once
        if not p.requires_grad or name in skip:
            continue
        decays = p.ndim >= 2 and id(p) not in embeddings
        rule = param.rule(role[name]) if param is not None else GroupRule()
        g = groups.get((decays, rule))
        if g is None:
            g = groups[(decays, rule)] = {"params": [], "weight_decay": weight_decay * rule.weight_decay if decays
                                          else 0.0, "names": []}
        g["params"].append(p)
        g["names"].append(name)
    if len(groups) == 2:  # sp (or a rule of 1 everywhere): the two groups as they always were
        return list(groups.values())
    out = []
    for (_, rule), g in sorted(groups.items(), key=lambda kv: not kv[0][0]):  # decayed first, stable
        if g["params"]:
            out.append({**g, "lr_scale": rule.lr, **({"eps_scale": rule.eps} if rule.eps != 1.0 else {})})
    return out


def make_optimizer(model: nn.Module, cfg: OptimConfig) -> torch.optim.Optimizer:
    """The optimiser ``cfg.name`` names, over ``model``'s trainable parameters."""
    check_optimizer(cfg, getattr(model, "parametrisation", None))
    return BUILDERS[cfg.name](model, cfg)


def check_optimizer(cfg: OptimConfig, param: Parametrisation | None) -> None:
    """Refuse Muon under a parametrisation with lr rules of its own (muP's 1/m_w on the hidden
    matrices): Muon scales each matrix's step by its own shape rule (optim.muon_adjust_lr), and
    the two would compound."""
    if cfg.name == "muon" and param is not None and type(param).rule is not Parametrisation.rule:
        raise ConfigError("optim.name", cfg.name, f"Muon scales each matrix's step by its own shape rule, not by "
                                                  f"the lr rules of model.param ({type(param).__name__}); use "
                                                  "optim.name=adamw or model.param=sp")


def adamw(model: nn.Module, cfg: OptimConfig, skip: Collection[str] = ()) -> torch.optim.AdamW:
    """AdamW over every trainable parameter not named in ``skip``."""
    # A parametrisation's group starts at its own lr (the loop sets it again each step) and epsilon.
    groups = [{k: v for k, v in g.items() if k not in ("names", "eps_scale")}
              | ({"lr": cfg.lr * g["lr_scale"]} if "lr_scale" in g else {})
              | ({"eps": cfg.eps * g["eps_scale"]} if "eps_scale" in g else {})
              for g in param_groups(model, cfg.weight_decay, skip)]
    groups = [g for g in groups if g["params"]]
    # The fused kernel does the whole update in one pass per tensor: measured 2-3% more
    # train-step throughput than the foreach default at every bench size on CPU
    # (docs/performance.md); it exists for CPU and CUDA floating-point parameters.
    params = [p for g in groups for p in g["params"]]
    fused = all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params)
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, fused=fused)


# One builder per name of ``OPTIMIZERS`` (run/train_config.py, which checks optim.name; a test
# holds the two to the same names).
BUILDERS: dict[str, Callable[[nn.Module, OptimConfig], torch.optim.Optimizer]] = {
    "adamw": adamw,
    "muon": lambda model, cfg: make_muon(model, cfg, adamw),
}
