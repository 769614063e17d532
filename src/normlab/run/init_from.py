"""``normlab train --init-from DIR``: start a run from a model directory's weights.

DIR is anything ``TransformerLM.load`` reads (``model.safetensors`` +
``model_config.json``): a ``normlab import`` output (a Hugging Face checkpoint), a
``save_model`` directory, or a run's ``checkpoints/best``. The run's model section is DIR's
config, with the model keys the user set (``--config``, ``--placement``, ``--set``) on top
(``init_layer`` is one layer of ``normlab.run.resolve.resolve``), so a checkpoint can be trained
further as it is or with another placement whose parameters have the same names (pre ->
post_branch, lns, ...). When DIR holds a ``tokenizer.json`` and
the user did not choose a tokenizer, the corpus is tokenised with it. The model's
vocabulary is kept (a tokenizer may use fewer ids than a padded embedding).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.schema import to_dict
from normlab.model.io import WEIGHTS, is_hf_dir, is_model_dir, load_config


def init_layer(base: dict[str, Any], init_dir: str | Path) -> dict[str, Any]:
    """The config layer of ``train.init_from=DIR`` on top of ``base`` (a preset's plain data).

    DIR's model section replaces the preset's (a preset sizes a fresh model, not this one),
    DIR's tokenizer.json becomes ``data.tokenizer``, and ``train.init_from`` names DIR. The
    layers the user typed (TOML, ``--placement``, ``--set``) go on top of this in
    ``normlab.run.resolve.resolve``, so a key set there wins over DIR's.
    """

    folder = Path(init_dir)
    if not is_model_dir(folder) and is_hf_dir(folder):
        raise UserError(f"--init-from (train.init_from) {folder}: a Hugging Face checkpoint (config.json with "
                        f"a model_type), not a normlab model directory; convert it first with `normlab import "
                        f"{folder} DIR`, then pass --init-from DIR")
    if not (folder / WEIGHTS).is_file():
        raise UserError(f"--init-from (train.init_from) {folder}: no {WEIGHTS} there; give a `normlab import` or save_model "
                        "directory, or a run's checkpoints/best")
    data = dict(base)  # new tables below: base itself is left as it was
    data["model"] = to_dict(load_config(folder))
    tok = folder / "tokenizer.json"
    if tok.is_file():
        data["data"] = {**data.get("data", {}), "tokenizer": str(tok)}
    data["train"] = {**data.get("train", {}), "init_from": str(folder)}
    return data

def load_init(model: Any, init_from: str) -> None:
    """Copy the weights of ``init_from`` (train.init_from, a model directory) into ``model``
    (strict: every tensor by name and shape)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_model as st_load

    path = Path(init_from) / WEIGHTS
    try:
        st_load(model, str(path), strict=True, device=str(next(model.parameters()).device))
    except (SafetensorError, RuntimeError, OSError) as e:
        first = str(e).splitlines()[0][:300]
        raise UserError(f"--init-from {path.parent}: its weights do not fit model "
                        f"(placement {model.cfg.placement!r}): {first}; choose a placement with the same "
                        "parameters (e.g. pre, post, post_branch, lns for a pre checkpoint)") from None


def fit_vocab(vocab_size: int, init_from: str, corpus_vocab: int) -> None:
    """Refuse a tokenizer with more ids than the model of ``init_from`` has embeddings
    (``vocab_size``): the model's vocabulary is kept when it covers the tokenizer's ids."""
    if corpus_vocab > vocab_size:
        raise UserError(f"--init-from {init_from}: the tokenizer has {corpus_vocab} ids but the model "
                        f"only {vocab_size} embeddings; tokenise with the checkpoint's own tokenizer "
                        "(data.tokenizer=DIR/tokenizer.json)")
