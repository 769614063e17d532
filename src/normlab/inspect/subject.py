"""``load_subject``: what ``normlab inspect MODEL`` measures, from a name.

A :class:`~normlab.diagnostics.subject.Subject` (a model, its blocks, its tokenizer behind one
interface) is built by ``subject_from_module`` (``module.py``) from any causal LM; this
module builds one that way from a transformers model (a Hub id or a ``save_pretrained``
directory, any family of ``families.py``) or a lab model (a run directory, a checkpoint or
a ``save_model`` directory). The measurement code (``measure.py``) and the probe only use
the Subject's fields, so a real checkpoint, a lab model and a hand-built subject go
through the same statistics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from normlab.core.errors import UserError
from normlab.core.fscheck import read_json_table
from normlab.data.tokenizers import tokenizer_from_state
from normlab.diagnostics.families import Family, family_of
from normlab.diagnostics.subject import Subject, find_blocks, subject_from_module
from normlab.inspect.hub import hub_source
from normlab.model.io import HF_CONFIG, is_model_dir
from normlab.model.transformer import TransformerLM
from normlab.run import checkpoint as checkpoint_files  # (callers name their argument `checkpoint`)
from normlab.run.dir import RunDir, note_if_written

# Files transformers reads a tokenizer from (fast, BPE, WordPiece, SentencePiece).
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "tokenizer.model", "spiece.model")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_subject(model: str, dtype: str = "float32", device: str = "cpu", context: int | None = None) -> Subject:
    """Resolve MODEL (lab run / checkpoint / model dir, HF directory or Hub id) into a Subject."""
    path = Path(model)
    if path.is_dir() and is_model_dir(path):
        return _lab_dir(path, dtype, device, context)
    # A lab run and a Hugging Face directory both hold a config.json: its content tells them apart.
    if path.is_dir() and (path / HF_CONFIG).is_file():
        data = dir_config(path)
        if isinstance(data.get("model"), dict) and "model_type" not in data:
            return _lab_run(path, dtype, device, context)
    elif path.exists() or model.startswith((".", "/")):
        raise UserError(f"{model}: neither a run directory, a checkpoint (model_config.json), nor a "
                        "Hugging Face model directory (config.json)")
    return _hf(model, dtype, device, context)


def dir_config(path: Path) -> dict[str, Any]:
    """A directory's config.json, a lab run's or a Hugging Face model's: read here before
    transformers sees it, so damage is the lab's one line naming the file."""
    return read_json_table(Path(path) / HF_CONFIG, "restore it from a backup (a lab run's, or a Hugging "
                           "Face model's as save_pretrained writes it)")


def check_dir_config(model: str) -> None:
    """MODEL a directory with a config.json: read it now, so that damage is the lab's one line
    naming the file before transformers words it its own way (a Hub id: nothing to check)."""
    if Path(model).is_dir() and (Path(model) / HF_CONFIG).is_file():
        dir_config(Path(model))


# ------------------------------------------------------------------------------ lab models
def _lab_run(run: Path, dtype: str, device: str, context: int | None) -> Subject:
    note_if_written(run, "inspect")  # a reader: it never locks, and says so
    rd = RunDir(run)
    for name, other in (("best", "latest"), ("latest", "best")):
        found = rd.find_checkpoint(name)
        if found is not None:
            return _lab_dir(found, dtype, device, context, run_dir=run)
        if rd.checkpoint_dir(name).exists():  # damaged: never passed over for the other one
            fix = (f"inspect {rd.checkpoint_dir(other)} instead" if rd.find_checkpoint(other) is not None
                   else "retrain the run or restore the folder from a backup")
            raise UserError(f"checkpoint {rd.checkpoint_dir(name)} is damaged ({rd.checkpoint_problem(name)}); {fix}")
    raise UserError(f"{run}: no checkpoint under checkpoints/best or checkpoints/latest; train it first")


def _lab_dir(folder: Path, dtype: str, device: str, context: int | None, run_dir: Path | None = None) -> Subject:
    tok_state = checkpoint_files.tokenizer_state(folder)
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
    sub = subject_from_module(model, blocks=list(model.blocks), embed=model.wte, tokenizer=encode,
                              forward=lambda ids: model(ids)[0], name=(run_dir or folder).name, family=fam,
                              context=ctx)  # the lab model's attention recording by default
    sub.info.update(lab=True, source=str(run_dir or folder), vocab_size=cfg.vocab_size)

    run = RunDir(run_dir) if run_dir is not None else RunDir.of_checkpoint(folder)
    if run is not None:  # measured on the run's own validation data by default (inspect.measured_text)
        sub.info["run"] = str(run.path)
    return sub


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
    # eager attention: every family supports it (Gemma's soft-capping included), and the
    # recording attention (module.hf_attention) calls the same eager function
    # (transformers' own types give from_pretrained a decorator's signature, not its own)
    hf: Any = auto.from_pretrained(model, dtype=DTYPES[dtype], attn_implementation="eager", **src)
    hf = hf.to(device).eval()
    max_pos = getattr(config, "max_position_embeddings", 0) or getattr(config, "n_positions", 1024)
    sub = subject_from_module(hf, blocks=find_blocks(hf), tokenizer=tok, name=Path(model.rstrip("/")).name,
                              family=fam, context=min(context or 512, max_pos))
    sub.info.update(lab=False, source=model)
    return sub
