"""What ``normlab inspect`` measures: a model, its blocks, its tokenizer, behind one interface.

A :class:`Subject` is either a transformers model (a Hub id or a ``save_pretrained``
directory, any family of ``families.py``) or a lab model (a run directory, a checkpoint or
a ``save_model`` directory). The measurement code (``measure.py``) only uses the fields
below, so a real checkpoint and a lab model go through the same statistics.
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch import nn

from normlab.errors import UserError
from normlab.inspect.families import Family, family_of

# Files transformers reads a tokenizer from (fast, BPE, WordPiece, SentencePiece).
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model", "spiece.model")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Subject:
    """A model ready to measure.

    ``layers``: the blocks in order; each takes the residual state as its first argument
    (positional or ``hidden_states=``) and returns it (alone or first in a tuple).
    ``forward(ids)`` -> logits (B, T, V). ``encode(text)`` -> token ids without special
    tokens; ``prefix``/``suffix`` are the special tokens the tokenizer puts around a
    sequence ([CLS] ... [SEP], <s> ...). ``attention()`` is a context manager recording the
    maximum |logit| of each block's attention into the dict it yields.
    """

    name: str
    family: Family
    model: nn.Module
    layers: list[nn.Module]
    forward: Callable[[torch.Tensor], torch.Tensor]
    encode: Callable[[str], list[int]]
    context: int
    d_model: int
    prefix: list[int] = field(default_factory=list)
    suffix: list[int] = field(default_factory=list)
    mask_id: int | None = None
    attention: Callable[[], Any] = contextlib.nullcontext
    info: dict[str, Any] = field(default_factory=dict)

    def state_of(self, value: Any) -> torch.Tensor:
        """The main residual stream in a block's input or output."""
        if isinstance(value, (tuple, list)):
            return value[0]
        return value

    def with_state(self, output: Any, state: Any) -> Any:
        """``output`` of a block with its residual state replaced (skipping the block)."""
        if self.info.get("lab") or not isinstance(output, tuple):
            return state
        return (state, *output[1:])


def load_subject(model: str, dtype: str = "float32", device: str = "cpu", context: int | None = None) -> Subject:
    """Resolve MODEL (lab run / checkpoint / model dir, HF directory or Hub id) into a Subject."""
    path = Path(model)
    if path.is_dir() and (path / "model_config.json").is_file():
        return _lab_dir(path, dtype, device, context)
    # A lab run and a Hugging Face directory both hold a config.json: its content tells them apart.
    if path.is_dir() and (path / "config.json").is_file():
        data = _read_json(path / "config.json")
        if isinstance(data.get("model"), dict) and "model_type" not in data:
            return _lab_run(path, dtype, device, context)
    elif path.exists() or model.startswith((".", "/")):
        raise UserError(f"{model}: neither a run directory, a checkpoint (model_config.json), nor a "
                        "Hugging Face model directory (config.json)")
    return _hf(model, dtype, device, context)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object")
    return data


# ------------------------------------------------------------------------------ lab models
def _lab_run(run: Path, dtype: str, device: str, context: int | None) -> Subject:
    from normlab.rundir import RunDir

    for name in ("best", "latest"):
        found = RunDir(run).find_checkpoint(name)
        if found is not None:
            return _lab_dir(found, dtype, device, context, run_dir=run)
    raise UserError(f"{run}: no checkpoint under checkpoints/best or checkpoints/latest; train it first")


def _lab_dir(folder: Path, dtype: str, device: str, context: int | None, run_dir: Path | None = None) -> Subject:
    from normlab.data.tokenizers import tokenizer_from_state
    from normlab.model.transformer import TransformerLM

    state = folder / "state.json"
    tok_state = _read_json(state).get("tokenizer") if state.is_file() else None
    if tok_state:
        encode = tokenizer_from_state(tok_state).encode
    elif (folder / "tokenizer.json").is_file():  # a `normlab import` directory
        encode = _tokenizers_file(folder / "tokenizer.json")
    else:
        raise UserError(f"{folder}: no tokenizer (neither state.json from a training run nor tokenizer.json); "
                        "inspect the run directory, or save the tokenizer beside the weights")
    model = TransformerLM.load(folder, device).to(DTYPES[dtype]).eval()
    cfg = model.cfg
    pl = cfg.placement if isinstance(cfg.placement, str) else "mixed"
    notes = ", ".join(x for x in (f"QK-norm {cfg.qk_norm}" if cfg.qk_norm else "",
                                  f"{cfg.kv_heads} kv heads" if cfg.kv_heads != cfg.n_head else "") if x)
    fam = Family("normlab TransformerLM", pl, cfg.norm, notes, importable=True)
    ctx = min(context or cfg.context, cfg.context)
    attn: list[Any] = [b.attn.branch for b in model.blocks]  # type: ignore[union-attr]  # ModuleList yields Modules

    @contextlib.contextmanager
    def attention() -> Iterator[dict[int, torch.Tensor]]:
        out: dict[int, torch.Tensor] = {}
        for a in attn:
            a.record = True
        try:
            yield out
        finally:
            for i, a in enumerate(attn):
                a.record = False
                if "max_logit" in a.stats:
                    out[i] = a.stats["max_logit"]

    def forward(ids: torch.Tensor) -> torch.Tensor:
        return model(ids)[0]

    name = (run_dir or folder).name
    return Subject(name, fam, model, list(model.blocks), forward, encode, ctx, cfg.d_model,
                   attention=attention, info={"lab": True, "source": str(run_dir or folder),
                                               "vocab_size": cfg.vocab_size})


def _tokenizers_file(path: Path) -> Callable[[str], list[int]]:
    try:
        import tokenizers
    except ImportError:
        raise UserError(f"{path}: reading it needs the 'tokenizers' package: pip install 'normlab[bpe]'") from None
    tok = tokenizers.Tokenizer.from_file(str(path))
    return lambda text: tok.encode(text, add_special_tokens=False).ids


# ------------------------------------------------------------------------ transformers models
def _hf(model: str, dtype: str, device: str, context: int | None) -> Subject:
    try:
        import transformers
    except ImportError:
        raise UserError("inspecting a Hugging Face model needs transformers: pip install 'normlab[hf]'") from None
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    from normlab.inspect.hub import hub_source

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # ours is over the layers
    src = hub_source(model)
    try:
        config = AutoConfig.from_pretrained(model, **src)
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"{model}: no model config found ({str(e).splitlines()[0]})") from None
    fam = family_of(config, model)
    if Path(model).is_dir() and not any((Path(model) / f).is_file() for f in TOKENIZER_FILES):
        raise UserError(f"{model}: no tokenizer found (none of {', '.join(TOKENIZER_FILES)}); save one beside "
                        "the weights with tokenizer.save_pretrained(DIR)")
    try:
        tok = AutoTokenizer.from_pretrained(model, **src)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UserError(f"{model}: no tokenizer found ({str(e).splitlines()[0][:160]}); save one beside the "
                        "weights with tokenizer.save_pretrained(DIR)") from None
    if isinstance(tok, bool) or not hasattr(tok, "encode"):
        raise UserError(f"{model}: no tokenizer found; save one beside the weights with tokenizer.save_pretrained(DIR)")
    auto = AutoModelForCausalLM if fam.causal else AutoModelForMaskedLM
    # eager attention: every family supports it (Gemma's soft-capping included) and it is the
    # path whose q and k we can read (see _hf_attention).
    # (transformers' own types give from_pretrained a decorator's signature, not its own)
    hf: Any = auto.from_pretrained(model, dtype=DTYPES[dtype], attn_implementation="eager", **src)
    hf = hf.to(device).eval()
    layers = _find_layers(hf, config)
    full = tok("a", add_special_tokens=True)["input_ids"]
    core = tok("a", add_special_tokens=False)["input_ids"]
    at = next((i for i in range(len(full) - len(core) + 1) if full[i:i + len(core)] == core), 0)
    prefix, suffix = full[:at], full[at + len(core):]
    max_pos = getattr(config, "max_position_embeddings", 0) or getattr(config, "n_positions", 1024)
    ctx = min(context or 512, max_pos)
    d = getattr(config, "hidden_size", None) or config.n_embd

    def encode(text: str) -> list[int]:
        return tok(text, add_special_tokens=False)["input_ids"]

    def forward(ids: torch.Tensor) -> torch.Tensor:
        return hf(input_ids=ids, use_cache=False).logits

    mask_id = getattr(tok, "mask_token_id", None)
    return Subject(Path(model.rstrip("/")).name, fam, hf, layers, forward, encode, ctx, d, prefix, suffix,
                   mask_id, attention=lambda: _hf_attention(layers),
                   info={"lab": False, "source": model, "model_type": config.model_type,
                         "vocab_size": hf.get_input_embeddings().num_embeddings,
                         "transformers": transformers.__version__})


def _find_layers(hf: nn.Module, config: Any) -> list[nn.Module]:
    """The block list: the first ModuleList holding num_hidden_layers modules."""
    n = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    for _, mod in hf.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) == n:
            return list(mod)
    raise UserError(f"cannot find the {n} blocks of {type(hf).__name__}")


@contextlib.contextmanager
def _hf_attention(layers: list[nn.Module]) -> Iterator[dict[int, torch.Tensor]]:
    """Record max |q.k * scaling| over attended pairs per block, through transformers' attention interface.

    Every family calls ``ALL_ATTENTION_FUNCTIONS.get_interface("eager", eager_attention_forward)``;
    a function registered under "eager" wins, so for the duration of the context ours runs
    first and then calls the model file's own ``eager_attention_forward`` unchanged. The
    logit is taken before Gemma's soft-cap (the quantity that grows; the cap bounds it).
    """
    from transformers.modeling_utils import AttentionInterface

    owner = {id(m): i for i, layer in enumerate(layers) for m in layer.modules()}
    out: dict[int, torch.Tensor] = {}

    def record(module, query, key, value, attention_mask, *args, scaling=None, **kwargs):
        own = sys.modules[type(module).__module__].eager_attention_forward
        with torch.no_grad():
            s = scaling if scaling is not None else query.size(-1) ** -0.5
            k = key.repeat_interleave(query.size(1) // key.size(1), dim=1)
            logits = (query.float() @ k.float().transpose(-1, -2)) * s     # (B, H, T, S)
            if attention_mask is None:
                ok = (torch.ones(logits.shape[-2:], dtype=torch.bool, device=logits.device).tril()
                      if getattr(module, "is_causal", False) else None)
            else:
                m = attention_mask[..., : k.size(-2)]
                ok = m if m.dtype == torch.bool else m == 0
            if ok is not None:
                logits = logits.masked_fill(~ok, 0.0)
            i = owner.get(id(module))
            if i is not None:
                out[i] = logits.abs().amax()
        return own(module, query, key, value, attention_mask, *args, scaling=scaling, **kwargs)

    mapping = AttentionInterface._global_mapping
    had, old = "eager" in mapping, mapping.get("eager")
    mapping["eager"] = record
    try:
        yield out
    finally:
        if had and old is not None:
            mapping["eager"] = old
        else:
            mapping.pop("eager", None)
