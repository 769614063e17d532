"""``normlab import MODEL DIR``: a transformers checkpoint as a lab model directory.

DIR gets ``model.safetensors`` + ``model_config.json`` (``normlab.model.io``'s format, so
``TransformerLM.load``, ``normlab inspect DIR`` and ``normlab train --init-from DIR`` read it) and
the checkpoint's tokenizer (``tokenizer.json``, which training uses to tokenise the corpus).
DIR is written under a temporary name and renamed, so a failure leaves nothing behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from normlab.core.errors import UserError
from normlab.diagnostics.families import family_of
from normlab.inspect.hub import hub_source
from normlab.inspect.subject import TOKENIZER_FILES, check_dir_config
from normlab.model.interop import from_hf
from normlab.model.io import save_model


def import_model(model: str, out: str | Path, context: int | None = None) -> Path:
    """Convert MODEL (Hub id or save_pretrained dir) into DIR; returns DIR."""
    try:
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise UserError("normlab import needs transformers: pip install 'normlab[hf]'") from None

    out = Path(out)
    if out.exists():
        raise UserError(f"{out}: already exists; choose a new directory")

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    src = hub_source(model)
    check_dir_config(model)  # a damaged config.json is the lab's one line, not transformers' words
    try:
        config = AutoConfig.from_pretrained(model, **src)
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"{model}: no model config found ({str(e).splitlines()[0]})") from None
    fam = family_of(config, model)
    if not fam.importable:
        from_hf(type("Stub", (), {"config": config})())  # raises the family's reason

    if Path(model).is_dir() and not any((Path(model) / f).is_file() for f in TOKENIZER_FILES):
        raise UserError(f"{model}: no tokenizer found (none of {', '.join(TOKENIZER_FILES)})")
    try:
        tok = AutoTokenizer.from_pretrained(model, **src)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise UserError(f"{model}: no tokenizer found ({str(e).splitlines()[0][:160]})") from None
    hf = AutoModelForCausalLM.from_pretrained(model, dtype="float32", **src).eval()
    lab = from_hf(hf, **({"context": context} if context else {}))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        save_model(lab, tmp)
        tok.save_pretrained(tmp)
        if not (tmp / "tokenizer.json").is_file():
            raise UserError(f"{model}: the tokenizer has no tokenizer.json (a slow tokenizer); "
                            "training needs the fast one")
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
