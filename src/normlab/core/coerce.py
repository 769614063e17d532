"""A value against a type annotation: ``coerce`` checks Python data (a TOML table, a sweep's
values), ``parse_text`` reads the text of ``--set key=value``, ``describe`` names a type in words.

Only typing is involved here, never dataclasses: ``normlab.core.schema`` walks a config's
sections and fields and asks this module about each leaf, so the rules for what a value may be
(ints widen to floats, lists to tuples, ``none`` for optionals) are written once for every way
a value arrives.
"""

from __future__ import annotations

import numbers
import sys
import types
from typing import Any, Union, get_args, get_origin

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

from normlab.core.errors import ConfigError


def describe(tp: Any) -> str:
    """Annotation ``tp`` in the words of an error message or ``config --explain``."""
    if tp is type(None):
        return "none"
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(describe(a) for a in get_args(tp))
    if origin in (list, tuple):
        return "a list"
    if origin is dict:
        return "a table"
    if origin is not None:
        return getattr(origin, "__name__", str(origin))
    return {int: "an integer", float: "a number", bool: "true/false", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def coerce(value: Any, tp: Any, field: str) -> Any:
    """Check ``value`` against the annotation ``tp``; ints widen to floats, lists to tuples."""
    if tp is Any:
        return value
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        for arg in get_args(tp):
            try:
                return coerce(value, arg, field)
            except ConfigError:
                continue
        raise ConfigError(field, value, f"expected {describe(tp)}")
    if tp is type(None):
        if value is None:
            return None
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:  # numbers.Integral: numpy and torch integers from a sweep count too
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
    elif tp is float:
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif origin in (list, tuple):
        if isinstance(value, (list, tuple)):
            args = get_args(tp)
            inner = args[0] if args else Any
            items = [coerce(v, inner, f"{field}[{i}]") for i, v in enumerate(value)]
            return tuple(items) if origin is tuple else items
    elif origin is dict:
        if isinstance(value, dict):
            _, vt = get_args(tp) or (str, Any)
            return {str(k): coerce(v, vt, f"{field}.{k}") for k, v in value.items()}
    else:
        return value
    raise ConfigError(field, value, f"expected {describe(tp)}")


def parse_text(text: str, tp: Any, field: str) -> Any:
    """Parse the right-hand side of ``--set key=value`` by the field's type.

    Scalars parse directly (``12``, ``3e-4``, ``true``, ``none``); anything else
    (lists, tables) is read as a TOML value, e.g. ``'["post","pre"]'``.
    """
    low = text.strip().lower()
    if low in ("none", "null") and _accepts_none(tp):
        return None
    try:
        literal = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as e:
        if text.strip().startswith(("{", "[")) and (_accepts(tp, dict) or _accepts(tp, list)):
            # meant as a table or a list: read as a name, it would be blamed as an unknown one
            why = str(e).split(" (at ")[0]  # its column counts the "v = " prepended above
            form = ('a TOML table: {key = value, ...}, strings quoted, e.g. {name = "keel", alpha = 2.0}'
                    if text.strip()[0] == "{" else 'a TOML list: [value, ...], strings quoted, e.g. ["post", "pre"]')
            raise ConfigError(field, text, f"malformed ({why}); write {form}, the whole quoted for the shell") from None
        literal = text  # a bare word: treat as a string
    if isinstance(literal, str) and _accepts(tp, int) and not _accepts(tp, str):
        try:
            literal = int(literal)
        except ValueError:
            pass
    if _accepts(tp, str) and not isinstance(literal, str) and not _accepts(tp, type(literal)):
        literal = text
    try:
        return coerce(literal, tp, field)
    except ConfigError:
        example = ""
        if _accepts(tp, list) and not isinstance(literal, (list, dict)):  # a bare word for a list
            import json

            item = json.dumps(literal) if isinstance(literal, str) else text.strip()
            example = f", e.g. --set '{field}=[{item}]' (quoted for the shell)"
        raise ConfigError(field, text, f"expected {describe(tp)}{example}") from None


def _accepts(tp: Any, kind: type) -> bool:
    if get_origin(tp) in (Union, types.UnionType):
        return any(_accepts(a, kind) for a in get_args(tp))
    return tp is kind or get_origin(tp) is kind


def _accepts_none(tp: Any) -> bool:
    return _accepts(tp, type(None))
