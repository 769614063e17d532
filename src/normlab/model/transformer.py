"""The decoder-only Transformer LM. Reads top to bottom: embed, blocks, final norm, head."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from normlab.core.errors import UserError
from normlab.model.attention import CausalSelfAttention
from normlab.model.build import ResolvedModel, lab_internals, resolve_model
from normlab.model.config import ModelConfig
from normlab.model.init import init_weights
from normlab.model.io import load_config, load_weights, save_model
from normlab.model.placement import Placement
from normlab.model.sampling import generate

CALIBRATION_SEED = 20200817  # private generator for the init-time profiling batch


def unresettable(model: nn.Module) -> list[str]:
    """Modules of ``model`` that hold parameters or buffers of their own but have no
    ``reset_parameters()`` (as ``name (Type)``): what ``materialise`` cannot re-make."""
    return [f"{name or 'model'} ({type(m).__name__})" for name, m in model.named_modules()
            if not callable(getattr(m, "reset_parameters", None))
            and (next(m.parameters(recurse=False), None) is not None or next(m.buffers(recurse=False), None) is not None)]


class Block(nn.Module):
    """One layer: an attention sub-layer then an FFN sub-layer, each wrapped by its placement."""

    def __init__(self, plan: ResolvedModel, layer: int) -> None:
        super().__init__()
        attn, ffn = plan.layout[layer - 1]  # 1-based layer
        attention = CausalSelfAttention(plan.cfg, plan.qk_norm, layer, plan.param.attn_scale())
        self.attn = attn.cls(attention, plan.site(layer, "attn"))
        self.ffn = ffn.cls(plan.ffn(plan.cfg), plan.site(layer, "ffn"))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = self.attn(h)
        return self.ffn(h)


class TransformerLM(nn.Module):
    """``logits, loss = model(idx, targets=None)``: always a pair; logits (B, T, V), loss the
    mean cross-entropy against ``targets`` (B, T), or None without targets.

    Building resolves and checks every name of ``cfg`` once (``model/build.py``). Every tensor's
    init is tabled in ``model/init.py`` (``init_weights``). A model built on the meta device
    (``model/cost.py``) becomes the model a direct build gives with ``materialise``.
    """

    def __init__(self, cfg: ModelConfig, plan: ResolvedModel | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        plan = plan.for_config(cfg) if plan is not None else resolve_model(cfg)  # resolved once per run
        self.layout = plan.names()  # per block (attention, FFN) placement names
        d = cfg.d_model
        self.wte = nn.Embedding(cfg.vocab_size, d)
        self.wpe = nn.Embedding(cfg.context, d) if cfg.pos == "learned" else None
        # The parametrisation (model.param): its init rescaling runs inside init_weights, its
        # multipliers here and in the blocks, its lr rules in the optimiser (train/optim.py).
        self.parametrisation = plan.param
        self.embed_scale = cfg.embed_scale if cfg.embed_scale is not None else plan.param.embed_scale(plan.init)
        self.output_mult = plan.param.output_mult()  # muP's base_width / d_model on the logits
        self.drop = nn.Dropout(cfg.dropout)
        self.stream = plan.stream()
        self.blocks = nn.ModuleList(Block(plan, i + 1) for i in range(cfg.n_layer))
        self.norm_f = plan.site(cfg.n_layer, "final").norm() if plan.final_norm else nn.Identity()
        self.lm_head = nn.Linear(d, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.init_scheme = plan.init  # kept for materialise, which runs init_weights again
        init_weights(self, plan.init)  # also runs each placement's init_ and the stream's init_
        # Only placements that override after_step (nGPT) are called each step.
        self._after_step = [m for m in self.modules() if isinstance(m, Placement)
                            and type(m).after_step is not Placement.after_step]
        self._calibrate_at_init()

    def _calibrate_at_init(self) -> None:
        # Data-dependent constants (Admin's omega) come from one pass over random tokens
        # drawn from a private generator, so building a model never consumes the global RNG.
        # A model built on the meta device (model/cost.py counts it) has no values to profile.
        if self.wte.weight.device.type != "meta" and any(type(p).calibrate.__func__ is not Placement.calibrate.__func__  # type: ignore[attr-defined]
               for p in self._placements()):  # (mypy types a classmethod read off a class as a plain callable)
            gen = torch.Generator().manual_seed(CALIBRATION_SEED)
            T = min(self.cfg.context, 64)
            self.calibrate(torch.randint(0, self.cfg.vocab_size, (8, T), generator=gen, device="cpu"))

    @torch.no_grad()
    def materialise(self, device: torch.device | str) -> "TransformerLM":
        """This model, built on the meta device, given the values of a direct build, on ``device``.

        With the global RNG seeded as for the direct build, ``torch.manual_seed(s);
        m.materialise(device)`` equals ``torch.manual_seed(s); TransformerLM(cfg).to(device)``
        bit for bit (every parameter and buffer, and the RNG state after), so the pre-flight's
        meta model is the one that trains. On a model already materialised it puts those
        initial values back in place: the same Parameter objects, so an optimizer built over
        them stays valid (the divergence replay's restart). ``normlab.model.build.materialise``
        is the entry. Raises ValueError for a module that cannot re-make its tensors (no
        ``reset_parameters``; checked before any number is drawn), RuntimeError naming a
        tensor no step wrote.
        """
        if lacking := unresettable(self):
            raise ValueError(f"materialise: {', '.join(lacking)} hold tensors but no reset_parameters() to "
                             "re-make them; give each module a reset_parameters() that __init__ calls")
        # Drawn on the CPU, where a direct build draws (build_model(cfg).to(device)): the CUDA
        # generator would give other numbers.
        if any(t.is_meta for _, t in self._tensors()):
            tied = self.lm_head.weight is self.wte.weight
            self.to_empty(device="cpu")
            if tied:  # to_empty gives each module a new Parameter: tie them again
                self.lm_head.weight = self.wte.weight
        else:  # already real: new CPU storage under the same objects (a tied tensor is one object)
            for _, t in self._tensors():
                t.data = torch.empty_like(t, device="cpu")
        for _, t in self._tensors():  # a tensor no step writes shows as NaN below, not as stale memory
            if t.is_floating_point():
                t.fill_(float("nan"))
        # Construction order. nn.Linear and nn.Embedding drew their default init from the global
        # RNG while __init__ built them; init_weights overwrites those values, but the draws that
        # follow depend on the generator's position, so they are drawn again, in the same order
        # (modules() lists them in construction order), for the RNG to end where a build leaves it.
        for m in self.modules():
            reset = getattr(m, "reset_parameters", None)
            if callable(reset):
                reset()
        init_weights(self, self.init_scheme)
        self._calibrate_at_init()
        unwritten = [name for name, t in self._tensors() if t.is_floating_point() and not bool(t.isfinite().all())]
        if unwritten:
            raise RuntimeError(f"materialise: {', '.join(unwritten)} not written (NaN after init): the "
                               "module's reset_parameters() must set every tensor __init__ creates")
        return self.to(device)

    def _tensors(self) -> list[tuple[str, torch.Tensor]]:
        """Every parameter and buffer (non-persistent ones too), a tied tensor once."""
        return [*self.named_parameters(), *self.named_buffers()]

    def _placements(self) -> list[Placement]:
        return [m for m in self.modules() if isinstance(m, Placement)]

    @torch.no_grad()
    def calibrate(self, idx: torch.Tensor) -> None:
        """Re-profile data-dependent constants (Admin's omega) on real tokens ``idx`` (B, T).

        Runs in eval mode (no dropout) without gradients and restores the training flag.
        Call it before training if you want Admin's omega from data instead of random tokens.
        """
        self.check_tokens(idx, "idx")
        was_training = self.training
        self.eval()
        try:
            for cls in dict.fromkeys(type(p) for p in self._placements()):
                cls.calibrate(self, idx.to(self.wte.weight.device))
        finally:
            self.train(was_training)

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """Token (+ learned position) embeddings: (B, T) int64 -> (B, T, d)."""
        x = self.wte(idx)
        if self.embed_scale != 1.0:
            x = x * self.embed_scale
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(idx.size(1), device=idx.device))
        return self.drop(x) if self.drop.p else x  # dropout at p=0 is the identity: skip the call

    def head(self, h: object) -> torch.Tensor:
        """Residual state after the last block -> logits (B, T, V), soft-capped with ``model.logit_softcap``."""
        z = self.lm_head(self.norm_f(self.stream.end(h)))
        if self.output_mult != 1.0:  # sp: no multiply at all (the very logits it always computed)
            z = z * self.output_mult
        z = self.stream.logits(z)
        cap = self.cfg.logit_softcap
        return z if cap is None else torch.tanh(z / cap) * cap  # Gemma 2's order: divide, tanh, multiply

    def run(self, idx: torch.Tensor) -> torch.Tensor:
        """The residual path, written once: (B, T) token ids -> logits (B, T, V).

        embed -> ``stream.begin`` -> every block -> ``head`` (stream end, final norm, output
        projection, stream logit hook). Tools that need more than the logits (the stream
        states, a block skipped, the norms' inputs) observe this forward through hooks
        (``normlab.diagnostics.hooks``) instead of calling the pieces. No input check:
        callers that have not checked their tokens use ``forward``.
        """
        h = self.stream.begin(self.embed(idx))  # (B, T, d), or ResiDual's (x, d)
        for block in self.blocks:
            h = block(h)
        return self.head(h)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *,
                check: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``run`` after the input check -> ``(logits, loss)``; ``loss`` is the mean
        cross-entropy against ``targets``, None without them. One return shape for both
        calls, so ``logits, loss = model(idx)`` can never unpack the batch dimension.

        ``check=False`` skips the token check, which reads values: for callers whose tokens
        are known good (batched training under ``vmap``, which cannot read values).
        """
        if check:
            self.check_tokens(idx, "idx")
        logits = self.run(idx)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def check_tokens(self, idx: torch.Tensor, name: str) -> None:
        """Refuse inputs the model cannot take, naming what to change."""
        if not isinstance(idx, torch.Tensor) or idx.dtype not in (torch.int64, torch.int32):
            raise UserError(f"{name}: expected an int64 tensor of token ids (B, T), got "
                            f"{getattr(idx, 'dtype', type(idx).__name__)}; use tensor.long()")
        if idx.dim() != 2:
            raise UserError(f"{name}: expected shape (B, T), got {tuple(idx.shape)}")
        if idx.size(1) > self.cfg.context:
            raise UserError(f"{name}: sequence length {idx.size(1)} exceeds model.context="
                            f"{self.cfg.context}; crop the input or raise model.context")
        # The range check reads values. On CUDA that is one host sync per call (the GPU
        # idles for a kernel launch, tens of microseconds); skipping it would let an
        # out-of-range id trip the embedding's device-side assert, which poisons the
        # CUDA context for the rest of the process. A torch.compile graph cannot read
        # values (the compiled caller has checked its inputs already).
        if torch.compiler.is_compiling() or not idx.numel():
            return
        lo, hi = torch.stack(torch.aminmax(idx)).tolist()
        if lo < 0 or hi >= self.cfg.vocab_size:
            raise UserError(f"{name}: token ids must be in [0, model.vocab_size={self.cfg.vocab_size}), "
                            f"got range [{lo}, {hi}]")

    @torch.no_grad()
    def after_step(self) -> None:
        """Call after each optimizer step (nGPT re-normalises its weights here)."""
        self.stream.after_step(self)
        for m in self._after_step:
            m.after_step()

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
                 top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """Continue token ids ``idx`` (B, T) by ``max_new_tokens`` sampled tokens -> (B, T + new).

        ``temperature`` 0 is greedy; ``top_k`` samples among the k most likely tokens. Runs in
        eval mode (no dropout) and restores the training flag; the prompt is cropped to the
        last ``cfg.context`` tokens at each step.
        """
        if max_new_tokens < 0:
            raise UserError(f"max_new_tokens={max_new_tokens}: must be >= 0")
        self.check_tokens(idx[:, -self.cfg.context:] if isinstance(idx, torch.Tensor) and idx.dim() == 2 else idx,
                          "idx")
        was_training = self.training
        self.eval()
        try:
            return generate(self, idx, max_new_tokens, self.cfg.context, temperature, top_k, generator)
        finally:
            self.train(was_training)

    def save(self, dir: str | Path) -> Path:
        """Write ``dir/model.safetensors`` + ``dir/model_config.json`` (``normlab.model.io.save_model``)."""

        return save_model(self, dir)

    @classmethod
    def load(cls, dir: str | Path, device: str = "cpu") -> "TransformerLM":
        """The model saved by :meth:`save` in ``dir``: built from ``dir/model_config.json``, then
        ``dir/model.safetensors`` loaded strictly (hash checked, never unpickled)."""

        cfg = load_config(dir)
        if not lab_internals(cfg):  # weights under another implementation's names (model/impls.py)
            raise UserError(f"{dir}: holds a model.impl={cfg.impl!r} model, not a TransformerLM; load it with "
                            "normlab.model.build.build_model(load_config(dir)) and load_weights")
        model = cls(cfg)
        load_weights(model, dir, device)
        return model.to(device)
