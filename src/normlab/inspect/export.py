"""``normlab export RUN DIR``: a lab model as a Hugging Face checkpoint, the inverse of ``normlab import``.

DIR gets what ``save_pretrained`` writes (``config.json``, ``model.safetensors``,
``generation_config.json``) and the tokenizer (``tokenizer.json`` + ``tokenizer_config.json``);
both state the model's context (``max_length``, ``model_max_length``: ``_state_context``),
so ``AutoModelForCausalLM.from_pretrained(DIR)`` and ``AutoTokenizer.from_pretrained(DIR)``
load it offline. Before DIR appears, the written files are loaded back with transformers and
checked: the logits against the lab model's (max |diff| <= TOLERANCE in float32) and the
token ids against the lab tokenizer's. DIR is written under a temporary name and renamed,
so a refusal or a failed check leaves nothing behind.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_json
from normlab.data.tokenizers import tokenizer_from_state
from normlab.model.hf_export import family_for, max_logit_diff, to_hf
from normlab.model.io import is_model_dir
from normlab.model.transformer import TransformerLM
from normlab.run import checkpoint as checkpoint_files  # (callers name their argument `checkpoint`)
from normlab.run.dir import RunDir

TOLERANCE = 1e-4  # float32 logits; observed differences are ~1e-6 (docs/inspect.md)
_IMPORTED_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class Exported:
    """What ``export_model`` wrote and how closely it matches."""

    path: Path
    family: str          # the model_type written: gpt2, llama, mistral, qwen3, olmo2, olmo3, gemma2, gemma3_text
    hf_class: str        # e.g. LlamaForCausalLM
    max_logit_diff: float
    tokens: int          # tokens the logits were compared on


def _byte_symbols() -> dict[int, str]:
    """Byte -> the printable character byte-level tokenizers stand it for: printable Latin-1
    bytes are themselves, the other 68 take code points from 256 up, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def hf_tokenizer(lab_tok: Any, context: int | None = None) -> Any:
    """A ``PreTrainedTokenizerFast`` giving the same ids as the lab tokenizer (char, byte, bpe or
    a pretrained tokenizer.json); no special tokens are added (the lab adds none). ``context``:
    its ``model_max_length`` (the model's context), so transformers warns at a longer input."""
    try:
        import tokenizers as tk
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        raise UserError("normlab export needs transformers and tokenizers: pip install 'normlab[hf]'") from None
    name = lab_tok.name
    if name == "char":  # one token per character: split into single code points, look each up
        tok = tk.Tokenizer(tk.models.WordLevel({c: i for i, c in enumerate(lab_tok.chars)}))
        tok.pre_tokenizer = tk.pre_tokenizers.Split(tk.Regex(r"[\s\S]"), behavior="isolated")
        tok.decoder = tk.decoders.Fuse()
    elif name == "byte":  # UTF-8 bytes; a BPE without merges over the byte-level alphabet
        tok = tk.Tokenizer(tk.models.BPE({s: b for b, s in _byte_symbols().items()}, []))
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.decoder = tk.decoders.ByteLevel()
    elif name in ("bpe", "pretrained"):
        tok = tk.Tokenizer.from_str(lab_tok.state()["json"])
    else:
        raise UserError(f"data.tokenizer={name!r}: no Hugging Face form of it; export handles char, byte, "
                        "bpe and a tokenizer.json")
    extra = {} if context is None else {"model_max_length": context}
    return PreTrainedTokenizerFast(tokenizer_object=tok, **extra)


def _load(src: Path, checkpoint: str) -> tuple[Any, Any, Path | None]:
    """(lab model, lab tokenizer or None, directory of an imported tokenizer or None)."""

    if is_model_dir(src):  # a checkpoint or a `normlab import` / save_model dir

        model = TransformerLM.load(src).eval()
        tok_state = checkpoint_files.tokenizer_state(src)
        if tok_state:
            return model, tokenizer_from_state(tok_state), None
        if (src / "tokenizer.json").is_file():
            return model, None, src
        raise UserError(f"{src}: no tokenizer (neither state.json from a training run nor tokenizer.json); "
                        "export the run directory, or save the tokenizer beside the weights")
    if RunDir(src).is_run():
        model, _, state = RunDir(src).load_model(checkpoint, "export")
        return model, tokenizer_from_state(state["tokenizer"]), None
    raise UserError(f"{src}: neither a run directory nor a model directory (model_config.json)")


def export_model(src: str | Path, out: str | Path, checkpoint: str = "best") -> Exported:
    """Write the Hugging Face checkpoint of SRC into OUT (must not exist). SRC is a run directory
    (its ``checkpoint``: best or latest), a checkpoint, or a model directory."""
    try:
        import transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise UserError("normlab export needs transformers: pip install 'normlab[hf]'") from None

    src, out = Path(src), Path(out)
    if out.exists():
        raise UserError(f"{out}: already exists; choose a new directory")
    model, lab_tok, imported = _load(src, checkpoint)
    family = family_for(model.cfg)  # refuses before anything is written
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # a few small files: no bars on stderr
    hf = to_hf(model)
    _state_context(hf, model.cfg.context)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        hf.save_pretrained(tmp)
        if imported is not None:  # `normlab import`'s tokenizer files, as the checkpoint had them
            for name in _IMPORTED_TOKENIZER:
                if (imported / name).is_file():
                    shutil.copy2(imported / name, tmp / name)
            _set_max_length(tmp / "tokenizer_config.json", model.cfg.context)
        else:
            hf_tokenizer(lab_tok, model.cfg.context).save_pretrained(tmp)
        back = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(0, model.cfg.vocab_size, (2, min(model.cfg.context, 64)), generator=gen)
        diff = max_logit_diff(model, back, ids)
        if not diff <= TOLERANCE:
            raise UserError(f"{src}: the exported {type(back).__name__} differs from the lab model "
                            f"(max |logit diff| {diff:.3g} > {TOLERANCE}); nothing written")
        if lab_tok is not None:
            _check_tokenizer(lab_tok, AutoTokenizer.from_pretrained(tmp), src)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Exported(out, family, type(back).__name__, diff, ids.numel())


def _state_context(hf: Any, context: int) -> None:
    """The context in the generation config: ``generate()`` without a length stops at it.

    A model with learned positions (GPT-2) has no position past its context: transformers'
    ``generate(max_new_tokens=...)`` past it fails inside the embedding (IndexError) and
    nothing in the written files can stop an explicit request; a RoPE model (Llama, OLMo-2)
    computes any position, so it generates past its context, beyond what it was trained on."""
    hf.generation_config.max_length = context


def _set_max_length(path: Path, context: int) -> None:
    """An imported tokenizer_config.json with ``model_max_length`` set to this model's context."""
    import json

    if path.is_file():  # without one, transformers reads tokenizer.json alone: nothing to state it in
        atomic_write_json(path, {**json.loads(path.read_text(encoding="utf-8")), "model_max_length": context})


def _check_tokenizer(lab_tok: Any, hf_tok: Any, src: Path) -> None:
    """The written tokenizer encodes a text covering the vocabulary's first ids as the lab's does."""
    text = lab_tok.decode(list(range(min(lab_tok.vocab_size, 256))))
    want, got = lab_tok.encode(text), hf_tok(text, add_special_tokens=False)["input_ids"]
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
        raise UserError(f"{src}: the exported tokenizer encodes differently from the lab's "
                        f"(first difference at token {at}); nothing written")
