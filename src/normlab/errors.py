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
    import difflib

    close = difflib.get_close_matches(str(value), list(valid), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(field, value, f"unknown name{hint}; valid: {', '.join(valid)}")
