"""Errors that mean "the user asked for something we cannot do".

The CLI turns a :class:`UserError` into one line on stderr and exit status 2;
anything else is a bug and keeps its traceback (exit status 1).
"""

from __future__ import annotations

from typing import Any

NO_VALUE = object()  # ConfigError value for "the key itself is wrong"


class UserError(Exception):
    """Bad input from the user: a config value, a path, a corrupt file."""


class ConfigError(UserError, ValueError):
    """A config field holds a value that cannot work.

    The message always names the dotted field, the bad value and the fix, e.g.
    ``model.n_head=5: must divide model.d_model=128; choose one of 1, 2, 4, 8, ...``.
    """

    def __init__(self, field: str, value: Any, fix: str) -> None:
        self.field, self.value, self.fix = field, value, fix
        super().__init__(f"{field}: {fix}" if value is NO_VALUE else f"{field}={value!r}: {fix}")


def unknown_name(field: str, value: Any, valid: list[str] | tuple[str, ...]) -> ConfigError:
    """The error for a name missing from a registry: lists the valid names and the closest one."""
    close = closest_name(str(value), list(valid))
    hint = f" (did you mean {close!r}?)" if close else ""
    return ConfigError(field, value, f"unknown name{hint}; valid: {', '.join(valid)}")


# Spellings the literature uses for the same thing: "Pre-LN", "prenorm", "pre_layernorm".
_SUFFIXES = ("layernorm", "norm", "ln")


def _key(name: str) -> str:
    return "".join(c for c in name.lower() if c.isalnum())


def _stem(key: str) -> str:
    for suffix in _SUFFIXES:
        if key.endswith(suffix) and len(key) > len(suffix):
            return key[: -len(suffix)]
    return key


def closest_name(value: str, valid: list[str]) -> str | None:
    """The valid name the user most likely meant, or None.

    Spelling first, edit distance last: ``Pre-LN``, ``prenorm`` and ``pre_ln`` mean ``pre``
    (difflib alone ranks ``deepnorm`` closer to ``prenorm``), and a unique prefix such as
    ``sandw`` means ``sandwich``.
    """
    import difflib

    key = _key(value)
    for test in (lambda v: _key(v) == key, lambda v: _stem(_key(v)) == _stem(key)):
        hits = [v for v in valid if test(v)]
        if len(hits) == 1:
            return hits[0]
    if len(key) >= 3:
        hits = [v for v in valid if _key(v).startswith(key)]
        if len(hits) == 1:
            return hits[0]
    close = difflib.get_close_matches(value, valid, n=1)
    return close[0] if close else None


# What other code bases (Hugging Face configs, nanoGPT) call the lab's options: typed here, they
# mean the lab's name, whatever spelling is nearest (learning_rate is lr, not min_lr).
KEY_ALIASES = {"learning_rate": "lr", "min_learning_rate": "min_lr", "num_layers": "n_layer", "n_layers": "n_layer",
               "num_hidden_layers": "n_layer", "hidden_size": "d_model", "n_embd": "d_model", "num_heads": "n_head",
               "n_heads": "n_head", "num_attention_heads": "n_head", "block_size": "context", "seq_len": "context",
               "max_seq_len": "context", "max_position_embeddings": "context", "intermediate_size": "d_ff",
               "max_iters": "steps", "max_steps": "steps", "warmup_iters": "warmup_steps", "max_grad_norm": "grad_clip",
               "gradient_accumulation_steps": "grad_accum", "layer_norm_eps": "norm_eps", "rms_norm_eps": "norm_eps"}


def _initials(name: str) -> str:
    return "".join(w[0] for w in name.split("_") if w)


def closest_key(key: str, valid: list[str]) -> str | None:
    """The dotted option (or section) the user most likely meant by ``key``, or None.

    Meaning before spelling: the field in another section (``lr`` is ``optim.lr``), a known alias (``learning_rate``) or an abbreviation either way
    (``learning_rate`` for ``lr``, ``bs`` for ``batch_size``) names a field, in ``key``'s own
    section when that has it; then the nearest spelling in that section, then anywhere.
    """
    import difflib

    section, _, leaf = key.lower().rpartition(".")
    by_leaf: dict[str, list[str]] = {}
    for v in valid:
        by_leaf.setdefault(v.rpartition(".")[2], []).append(v)

    def placed(name: str) -> str | None:  # the key whose leaf is ``name``: own section first, else unique
        hits = by_leaf.get(name, [])
        own = [h for h in hits if h.rpartition(".")[0] == section]
        return own[0] if own else hits[0] if len(hits) == 1 else None

    meant = [leaf, KEY_ALIASES.get(leaf, "")] + [n for n in by_leaf if len(n) > 1 and "_" in leaf + n and
                                            (_initials(leaf) == n.replace("_", "") or _initials(n) == leaf)]
    for name in meant:
        if name and placed(name):
            return placed(name)
    own = [n for n, keys in by_leaf.items() if any(k.rpartition(".")[0] == section for k in keys)]
    close = difflib.get_close_matches(leaf, own, n=1, cutoff=0.6)
    if close and placed(close[0]):
        return placed(close[0])
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    return close[0] if close else None
