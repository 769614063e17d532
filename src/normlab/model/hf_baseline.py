"""``model.impl = "hf-gpt2"``: transformers' ``GPT2LMHeadModel`` trained by the lab's own loop,
data, schedule and metrics, as the baseline of the lab's Pre-LN.

The GPT-2 is built from its config (``hf_export.hf_config``; nothing is downloaded) and refused,
with export's one-line reason, for any lab config that GPT-2 does not compute exactly
(``hf_export.family_for``). Its initial weights are the lab's: the seeded ``TransformerLM`` of the
same config is built first (drawing from the global RNG exactly as the lab arm does) and copied
in through export's mapping, so both arms start from the same weights with the same parameter
count, and a difference after training is the implementation's (kernels, operation order), not
the init's. transformers' own ``_init_weights`` runs on a forked RNG and is overwritten, so the
global RNG leaves the build where the lab arm's build leaves it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from normlab.core.errors import ConfigError, UserError
from normlab.model.config import ModelConfig
from normlab.model.hf_export import family_for, to_hf
from normlab.model.transformer import TransformerLM


def check(cfg: ModelConfig) -> None:
    """Refuse, naming the reason, a config transformers' GPT-2 does not compute, or a machine
    without transformers."""
    import importlib.util

    lab = dataclasses.replace(cfg, impl="normlab")
    try:
        family = family_for(lab)
    except UserError as e:
        raise ConfigError("model.impl", cfg.impl, f"GPT-2 cannot compute this model: {e}") from None
    if family != "gpt2":
        raise ConfigError("model.impl", cfg.impl, f"GPT-2 computes placement pre with layernorm, learned "
                                                  f"positions and GELU; this model is {family}'s (model.norm="
                                                  f"{cfg.norm!r}, model.pos={cfg.pos!r}); use the GPT-2 settings")
    if importlib.util.find_spec("transformers") is None:
        raise ConfigError("model.impl", cfg.impl, "needs transformers: pip install 'normlab[hf]'")


class HFGPT2(nn.Module):
    """``logits, loss = model(idx, targets=None)`` computed by ``GPT2LMHeadModel`` (``self.hf``);
    ``loss`` is the lab's mean cross-entropy, so both arms report the same quantity."""

    def __init__(self, cfg: ModelConfig, plan: Any = None) -> None:  # plan: of impl=hf-gpt2, not the lab arm's
        super().__init__()
        check(cfg)
        self.cfg = cfg
        lab = TransformerLM(dataclasses.replace(cfg, impl="normlab"))  # the lab arm's seeded init
        with torch.random.fork_rng(devices=[]):  # GPT2LMHeadModel's own init: drawn, then overwritten
            self.hf: Any = to_hf(lab).train()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *,
                check: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        if check:
            self.check_tokens(idx, "idx")
        logits = self.hf(input_ids=idx, use_cache=False).logits
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    def check_tokens(self, idx: torch.Tensor, name: str) -> None:
        """The lab model's input check (dtype, shape, context, token range): the same refusals."""

        TransformerLM.check_tokens(self, idx, name)  # type: ignore[arg-type]  # reads only self.cfg

    def after_step(self) -> None:
        """Nothing: GPT-2 has no weight hooks."""

    def calibrate(self, idx: torch.Tensor) -> None:
        """Nothing: GPT-2 has no data-dependent constants."""
