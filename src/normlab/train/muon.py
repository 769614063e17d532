"""``optim.name = "muon"``: torch.optim.Muon on the hidden matrices, AdamW on the rest, as one
optimizer.

Muon orthogonalises each matrix's momentum (Newton-Schulz, torch's own implementation), which
means something only for the weight matrices of hidden layers; embeddings, the output head
and every 1-D or scalar parameter keep AdamW, as Keller Jordan's reference (``MuonWithAuxAdam``)
and Moonshot's "Muon is scalable" (arXiv 2502.16982) do. The split is structural
(:func:`muon_names`): the weight of every ``nn.Linear`` except the output head ``lm_head`` (the
attention and MLP projections of the blocks). Anything else 2-D (none in the lab model today)
stays with AdamW.

The training loop, the checkpoints and the divergence replay speak to one
``torch.optim.Optimizer``: :class:`MuonAdamW` is that one, holding a ``torch.optim.Muon`` and a
``torch.optim.AdamW`` that share its ``state`` and whose groups are its ``param_groups`` (Muon's
first). ``Optimizer.state_dict`` and ``load_state_dict`` therefore number and restore both
parts' state as one optimizer's, so a checkpoint is the same safetensors + JSON format and a
resume is bit for bit (tests/train/test_muon_resume.py).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from normlab.run.train_config import OptimConfig


def muon_names(model: nn.Module) -> set[str]:
    """Names of the parameters Muon updates: the weights of the hidden ``nn.Linear`` layers (not the
    output head ``lm_head``, nor a weight it shares with an embedding)."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    hidden = {id(m.weight) for name, m in model.named_modules()
              if isinstance(m, nn.Linear) and name.rpartition(".")[2] != "lm_head"}
    return {n for n, p in model.named_parameters()
            if p.requires_grad and p.ndim == 2 and id(p) in hidden and id(p) not in embeddings}


def is_muon_group(group: dict[str, Any]) -> bool:
    """Whether a parameter group is Muon's: ``ns_steps`` is one of torch.optim.Muon's defaults, which
    every group of it carries (through a checkpoint too); AdamW's groups have no such key."""
    return "ns_steps" in group


class MuonAdamW(torch.optim.Optimizer):
    """``muon`` and ``adamw`` stepped as one optimizer (see the module docstring)."""

    def __init__(self, muon: torch.optim.Muon, adamw: torch.optim.Optimizer) -> None:
        self.muon, self.adamw = muon, adamw
        super().__init__([p for o in (muon, adamw) for g in o.param_groups for p in g["params"]], {})
        self._link()

    def _link(self) -> None:
        # The parts' own group dicts (so the loop's lr setting reaches them) and one state mapping
        # (so state_dict sees both, and the replay's state.clear() empties both).
        self.param_groups = [*self.muon.param_groups, *self.adamw.param_groups]
        self.muon.state = self.adamw.state = self.state

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.muon.step()
        self.adamw.step()
        return loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # The base class installs new group dicts and a new state mapping: hand them to the parts.
        super().load_state_dict(state_dict)
        n = len(self.muon.param_groups)
        self.muon.param_groups, self.adamw.param_groups = self.param_groups[:n], self.param_groups[n:]
        self.muon.state = self.adamw.state = self.state


def make_muon(model: nn.Module, cfg: OptimConfig, adamw: Any) -> MuonAdamW:
    """The Muon optimizer of ``cfg`` over ``model``; ``adamw(model, cfg, skip)`` builds the AdamW part
    over every parameter not in ``skip`` (``normlab.train.optim``'s groups and kernel)."""
    names = muon_names(model)
    muon = torch.optim.Muon([p for n, p in model.named_parameters() if n in names], lr=cfg.muon_lr,
                            weight_decay=cfg.muon_weight_decay, momentum=cfg.muon_momentum,
                            nesterov=cfg.muon_nesterov, adjust_lr_fn=cfg.muon_adjust_lr)
    return MuonAdamW(muon, adamw(model, cfg, names))
