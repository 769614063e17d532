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
