"""Any causal LM as a :class:`~normlab.inspect.subject.Subject`: ``subject_from_module``.

The one public way to put a model under the lab's statistics from Python. What the
statistics need of a model is small: the module, its blocks in order (the residual stream
x_0 is block 1's input, x_l block l's output), its token embedding (vocabulary size and
width), a forward giving logits (B, T, V) and, for text, its tokenizer. Everything else is
found when it is not given, and what cannot be found fails in one line naming the argument.

    subject = subject_from_module(gpt, blocks="transformer.h", embed="transformer.wte",
                                  tokenizer=tok, forward=lambda ids: gpt(ids, ids)[0])

``normlab inspect`` builds its subjects (transformers checkpoints, lab models) with this
function too, so a hand-built subject is measured by the same code.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import nn

from normlab.core.errors import UserError
from normlab.diagnostics.attention_record import lab_attention
from normlab.diagnostics.families import FAMILIES, Family
from normlab.diagnostics.hf_attention import hf_attention
from normlab.model import cost
from normlab.model.transformer import TransformerLM

DEFAULT_CONTEXT = 512  # tokens per window when neither the caller nor the model says


@contextlib.contextmanager
def no_attention() -> Iterator[dict[int, torch.Tensor]]:
    """The attention capture of a model whose attention cannot be read: records nothing
    (``max_logit`` is then NaN for every block)."""
    yield {}


@dataclass
class Subject:
    """A model ready to measure.

    ``layers``: the blocks in order; each takes the residual state as its first argument
    (positional or ``hidden_states=``) and returns it (alone or first in a tuple).
    ``forward(ids)`` -> logits (B, T, V). ``encode(text)`` -> token ids without special
    tokens; ``prefix``/``suffix`` are the special tokens the tokenizer puts around a
    sequence ([CLS] ... [SEP], <s> ...). ``attention()`` is a context manager recording the
    maximum |logit| of each block's attention into the dict {block index: value} it yields
    (``no_attention``, the default, records none). Build one with ``subject_from_module``.
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
    attention: Callable[[], Any] = no_attention
    info: dict[str, Any] = field(default_factory=dict)
    weights: Callable[[], tuple[list[torch.Tensor], list[tuple[int, str, str]]]] | None = None

    def state_of(self, value: Any) -> torch.Tensor:
        """The main residual stream in a block's input or output."""
        if isinstance(value, (tuple, list)):
            return value[0]
        return value

    def aux_of(self, value: Any) -> torch.Tensor | None:
        """A second residual stream carried beside the main one (ResiDual's d in its (x, d)
        state): the second element of a state tuple shaped like the first; None otherwise (a
        transformers block's extras are not a stream)."""
        if isinstance(value, (tuple, list)) and len(value) > 1:
            x, d = value[0], value[1]
            if isinstance(x, torch.Tensor) and isinstance(d, torch.Tensor) and d.shape == x.shape:
                return d
        return None

    def block_weights(self) -> tuple[list[torch.Tensor], list[tuple[int, str, str]]]:
        """Every trainable parameter of every block with its (layer, sublayer, name) key: the
        ``weights`` given (the lab model names its four matrices qkv, W_O, W_1, W_2), else a
        parameter ``attn.c_attn.weight`` of block l is (l, attn, c_attn.weight) and one directly
        on the block (l, block, name)."""
        if self.weights is not None:
            return self.weights()
        params: list[torch.Tensor] = []
        keys: list[tuple[int, str, str]] = []
        for li, block in enumerate(self.layers, start=1):
            for pname, p in block.named_parameters():
                if p.requires_grad:
                    head, _, rest = pname.partition(".")
                    keys.append((li, head, rest) if rest else (li, "block", pname))
                    params.append(p)
        return params, keys

    def with_state(self, output: Any, state: Any) -> Any:
        """What a skipped block returns: its input ``state`` in the shape of its ``output``
        (a tensor, the same tuple as the input (ResiDual's (x, d)), or the output tuple
        with the stream replaced (transformers' (hidden, extras...)))."""
        if isinstance(output, tuple) and not isinstance(state, (tuple, list)):
            return (state, *output[1:])
        return state


def subject_from_module(model: nn.Module, *, blocks: str | Sequence[nn.Module] | None = None,
                        embed: str | nn.Module | None = None, tokenizer: Any = None,
                        forward: Callable[[torch.Tensor], torch.Tensor] | None = None,
                        name: str | None = None, family: Family | None = None, context: int | None = None,
                        attention: Callable[[], Any] | None = None) -> Subject:
    """A Subject of ``model`` (see the module docstring).

    ``blocks``: the blocks in order, or the dotted name of their list (``"transformer.h"``);
    default the ``nn.ModuleList`` of ``config.num_hidden_layers``/``n_layer`` modules, or the
    largest list of same-class modules. ``embed``: the token embedding (module or dotted
    name; default ``get_input_embeddings()`` or the first ``nn.Embedding``). ``tokenizer``: a
    transformers tokenizer, anything with ``encode(text) -> ids``, or a callable; None
    for a subject measured on token ids only. ``forward(ids) -> logits (B, T, V)``; default
    ``model(ids)`` and its ``.logits``, first element or itself. ``family``: how the report
    describes it (default: the family table's for a known ``model_type``, else "unknown").
    ``context``: tokens per window (default the model's maximum, at most 512). ``attention``:
    a context manager factory yielding {block index: max |logit|} (an ``AttentionRecord`` also
    holds each head's entropy); default transformers' attention interface for a transformers
    model, the explicit path of a lab model (``attention_record.lab_attention``), nothing otherwise.
    """
    if not isinstance(model, nn.Module):
        raise UserError(f"subject_from_module: model is a {type(model).__name__}, not a torch.nn.Module")
    layers = _blocks(model, blocks)
    emb = _module(model, embed, "embed") if embed is not None else _find_embedding(model)
    config = getattr(model, "config", None) or getattr(model, "cfg", None)  # transformers' or TransformerLens'
    hf = _is_transformers(model)
    vocab = getattr(emb, "num_embeddings", None) or _first(config, "vocab_size", "d_vocab")
    d = getattr(emb, "embedding_dim", None) or _first(config, "hidden_size", "n_embd", "d_model")
    if d is None:
        raise UserError(f"{type(model).__name__}: cannot tell the width d_model; pass embed= (its token "
                        "embedding, an nn.Embedding or its dotted name)")
    if family is None:
        kind = getattr(config, "model_type", None)
        family = FAMILIES.get(kind) if isinstance(kind, str) else None
        family = family or Family(str(kind or type(model).__name__), "unknown", "unknown",
                                  "outside normlab's family table")
    max_pos = _first(config, "max_position_embeddings", "n_positions", "block_size", "n_ctx", "context")
    ctx = context or min(DEFAULT_CONTEXT, max_pos or DEFAULT_CONTEXT)
    if ctx < 2:
        raise UserError(f"subject_from_module: context={ctx}; give context >= 2")
    encode, prefix, suffix, mask_id = _tokenizer(tokenizer, type(model).__name__)
    if not family.causal and mask_id is None:
        raise UserError(f"{type(model).__name__}: a masked LM needs a tokenizer with a mask token")
    run = forward or _default_forward(model, hf)
    if attention is None:
        attention = ((lambda: hf_attention(model, layers)) if hf
                     else (lambda: lab_attention(model)) if isinstance(model, TransformerLM) else no_attention)
    info = {"source": f"python: {type(model).__module__}.{type(model).__name__}", "vocab_size": vocab}
    if hf:
        import transformers

        info.update(model_type=getattr(config, "model_type", None), transformers=transformers.__version__)
    weights = (lambda: lab_weights(model)) if isinstance(model, TransformerLM) else None
    return Subject(name or type(model).__name__, family, model, layers, run, encode, ctx, int(d), prefix, suffix,
                   mask_id, attention=attention, info=info, weights=weights)


def lab_weights(model: TransformerLM) -> tuple[list[torch.Tensor], list[tuple[int, str, str]]]:
    """A lab model's block parameters with their (layer, sublayer, name) keys, the four
    matrices last in each block and named qkv (split into W_Q, W_K, W_V by the statistics),
    W_O, W_1 and W_2: the names Xiong et al.'s gradient statistics are written in."""
    params: list[torch.Tensor] = []
    keys: list[tuple[int, str, str]] = []
    block: Any  # a Block: its placements hold the branches (ModuleList items are typed as Module)
    for li, block in enumerate(model.blocks, start=1):
        for sub in ("attn", "ffn"):
            for pname, p in getattr(block, sub).named_parameters():
                if pname.startswith("branch.") and pname.endswith("weight") and p.dim() == 2:
                    continue  # the matrices come below
                params.append(p)
                keys.append((li, sub, pname.removeprefix("branch.")))
        params += [block.attn.branch.qkv.weight, block.attn.branch.proj.weight,
                   block.ffn.branch.fc.weight, block.ffn.branch.proj.weight]
        keys += [(li, "attn", "qkv"), (li, "attn", "W_O"), (li, "ffn", "W_1"), (li, "ffn", "W_2")]
    return params, keys


def as_subject(model: Any) -> Subject:
    """``model`` itself when it is a Subject, else ``subject_from_module(model)``."""
    return model if isinstance(model, Subject) else subject_from_module(model)


def _first(obj: Any, *names: str) -> Any:
    for n in names:
        v = getattr(obj, n, None) if obj is not None else None
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def _module(model: nn.Module, ref: str | nn.Module, arg: str) -> nn.Module:
    if isinstance(ref, nn.Module):
        return ref
    try:
        return model.get_submodule(ref)
    except AttributeError:
        names = [n for n, _ in model.named_children()]
        raise UserError(f"{arg}={ref!r}: {type(model).__name__} has no such submodule (its children: "
                        f"{', '.join(names)})") from None


def _blocks(model: nn.Module, blocks: str | Sequence[nn.Module] | None) -> list[nn.Module]:
    if blocks is None:
        layers = find_blocks(model)
    else:
        found = _module(model, blocks, "blocks") if isinstance(blocks, str) else blocks
        layers = list(found)  # type: ignore[arg-type]  # a ModuleList or Sequential iterates its modules
    inside = {id(m) for m in model.modules()}
    if not layers or not all(isinstance(m, nn.Module) and id(m) in inside for m in layers):
        raise UserError(f"blocks: give {type(model).__name__}'s blocks in order, modules of the model itself "
                        "(a list, or a dotted name such as 'transformer.h')")
    return layers


def find_blocks(model: nn.Module) -> list[nn.Module]:
    """The block list: the ModuleList of ``config.num_hidden_layers`` (or ``n_layer``) modules;
    without a config, the ModuleList of same-class modules holding the most parameters."""
    n = _first(getattr(model, "config", None) or getattr(model, "cfg", None), "num_hidden_layers", "n_layer",
               "n_layers")
    lists: list[nn.ModuleList] = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) > 0
                                  and len({type(b) for b in m}) == 1]
    if n is not None:
        lists = [m for m in lists if len(m) == n]
    if not lists:
        raise UserError(f"cannot find the blocks of {type(model).__name__}; pass blocks= (their list, or a "
                        "dotted name such as 'transformer.h')")
    sizes = [cost.count(m) for m in lists]
    return list(lists[sizes.index(max(sizes))])  # the first of the largest, as max() picks


def _find_embedding(model: nn.Module) -> nn.Module | None:
    get = getattr(model, "get_input_embeddings", None)
    if callable(get):
        with contextlib.suppress(NotImplementedError, AttributeError):
            emb = get()
            if isinstance(emb, nn.Module):
                return emb
    return next((m for m in model.modules() if isinstance(m, nn.Embedding)), None)


def _is_transformers(model: nn.Module) -> bool:
    try:
        from transformers import PreTrainedModel
    except ImportError:
        return False
    return isinstance(model, PreTrainedModel)


def _default_forward(model: nn.Module, hf: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    def forward(ids: torch.Tensor) -> torch.Tensor:
        out = model(input_ids=ids, use_cache=False) if hf else model(ids)
        logits = getattr(out, "logits", None)
        if logits is None:
            logits = out[0] if isinstance(out, (tuple, list)) else out
        if not isinstance(logits, torch.Tensor) or logits.shape[:2] != ids.shape:
            shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
            raise UserError(f"{type(model).__name__}(ids) gave {shape} for ids {tuple(ids.shape)}, not logits "
                            "(B, T, V); pass forward=, e.g. forward=lambda ids: model(ids, ids)[0]")
        return logits
    return forward


def _tokenizer(tok: Any, model: str) -> tuple[Callable[[str], list[int]], list[int], list[int], int | None]:
    """(encode without special tokens, prefix, suffix, mask id) of any kind of tokenizer."""
    if tok is None:
        def none(text: str) -> list[int]:
            raise UserError(f"{model}: this subject has no tokenizer; pass tokenizer= to subject_from_module")
        return none, [], [], None
    if hasattr(tok, "all_special_ids") and callable(tok):  # a transformers tokenizer
        def encode(text: str) -> list[int]:
            return list(tok(text, add_special_tokens=False)["input_ids"])
        full = list(tok("a", add_special_tokens=True)["input_ids"])
        core = encode("a")
        at = next((i for i in range(len(full) - len(core) + 1) if full[i:i + len(core)] == core), 0)
        return encode, full[:at], full[at + len(core):], getattr(tok, "mask_token_id", None)
    enc = getattr(tok, "encode", None)
    if enc is None and callable(tok):
        enc = tok
    if enc is None:
        raise UserError(f"tokenizer: a {type(tok).__name__} has no encode(text); give a transformers tokenizer, "
                        "an object with encode(text) -> ids, or a function")
    return (lambda text: [int(i) for i in getattr(enc(text), "ids", enc(text))]), [], [], None
