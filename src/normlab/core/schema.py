"""Dataclass configs: strict loading from dicts, typed ``--set`` overrides, JSON dumps.

Every config section is a dataclass whose fields carry ``metadata={"help": ...}`` and
whose ``__post_init__`` validates values with :func:`check`. This module holds the
generic machinery so that each section (model, data, optim, train) can live next to
the code it configures. It walks sections, fields and dotted keys; what one value may be
(its coercion, the text of ``--set``) is asked of :mod:`normlab.core.coerce`.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, ClassVar, TypeVar

from normlab.core.coerce import coerce, describe, parse_text
from normlab.core.errors import NO_VALUE, ConfigError, closest_key
from normlab.core.registry import Registry

C = TypeVar("C", bound="Section")


def doc(help: str, default: Any = dataclasses.MISSING, *, names: Registry[Any] | None = None,
        exclude: tuple[str, ...] = (), omit_default: bool = False, **kw: Any) -> Any:
    """A dataclass field with a help string (shown by ``normlab config --explain``).

    ``names=REGISTRY`` lists that registry's names where the help says ``{names}``,
    read when the help is shown, so the text never falls behind the registry (or a plugin);
    ``exclude`` leaves out names the help speaks of apart. ``omit_default``: ``to_dict``
    writes the field only when it differs from its default, for a field added after configs
    were stored: every config that leaves it alone keeps its JSON, so its study trial id
    (a hash of that JSON) and its saved files stay as they were."""
    meta: dict[str, Any] = {"help": help, "names": names, "exclude": exclude} if names is not None else {"help": help}
    if omit_default:
        meta["omit_default"] = True
    if isinstance(default, (list, dict)):
        value = default
        kw["default_factory"] = lambda: typing.cast(Any, type(value))(value)
        return dataclasses.field(metadata=meta, **kw)
    return dataclasses.field(default=default, metadata=meta, **kw)


def help_text(f: dataclasses.Field[Any]) -> str:
    """A field's help, its ``{names}`` filled from its registry (looked up only now)."""
    help = str(f.metadata.get("help", ""))
    registry = f.metadata.get("names")
    if registry is None:
        return help
    exclude = set(f.metadata.get("exclude", ()))
    names = [n for n in registry.names() if n not in exclude]
    return help.replace("{names}", ", ".join(names))


class Section:
    """Base of every config dataclass. ``section`` is its dotted prefix (e.g. ``"model"``).

    Every field is also checked against its annotation, so ``ModelConfig(n_layer="4")``
    from Python is the same one-line ConfigError as ``--set model.n_layer=four``, never a
    TypeError from deep inside a comparison. The section's own validation runs first (its
    messages for structured fields are more specific); a TypeError or AttributeError it
    trips over is replaced by the type error of the field that caused it.
    """

    section: ClassVar[str] = ""
    if typing.TYPE_CHECKING:  # every subclass is a dataclass: what dataclasses.fields(cls) needs
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        own = cls.__dict__.get("__post_init__")
        if own is None or getattr(own, "_typed", False):
            return

        @functools.wraps(own)
        def __post_init__(self: Section) -> None:
            try:
                own(self)
            except (TypeError, AttributeError):
                self.check_types()  # names the wrongly typed field; if none is, the bug surfaces
                raise
            self.check_types()

        __post_init__._typed = True  # type: ignore[attr-defined]
        cls.__post_init__ = __post_init__  # type: ignore[method-assign]

    def __post_init__(self) -> None:  # sections without validation of their own
        self.check_types()

    def check_types(self) -> None:
        """Coerce every field to its annotation (ints widen to floats) or raise naming it."""
        prefix = f"{self.section}." if self.section else ""
        hints = _hints(type(self))
        for f in dataclasses.fields(self):
            tp, value = hints[f.name], getattr(self, f.name)
            if _nested(tp):
                if not isinstance(value, tp):
                    raise ConfigError(prefix + f.name, value, f"expected a {tp.__name__} "
                                      f"(or a table of its options via from_dict)")
                continue
            object.__setattr__(self, f.name, coerce(value, tp, prefix + f.name))

    def fail(self, name: str, fix: str) -> ConfigError:
        """The error for field ``name`` holding its current value; message says the fix."""
        prefix = f"{self.section}." if self.section else ""
        return ConfigError(prefix + name, getattr(self, name), fix)

    def check(self, ok: bool, name: str, fix: str) -> None:
        if not ok:
            raise self.fail(name, fix)

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


def to_dict(obj: Any) -> Any:
    """Plain JSON/TOML-able data (tuples become lists)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if not (f.metadata.get("omit_default") and getattr(obj, f.name) == f.default)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def _hints(cls: type) -> dict[str, Any]:
    return _cached_hints(cls)  # a plain function to type checkers (a dataclass type counts as unhashable)


@functools.cache
def _cached_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _nested(tp: Any) -> bool:
    """Whether annotation ``tp`` is a nested section (a dataclass type) rather than a value."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def dotted_keys(cls: type, prefix: str = "") -> list[str]:
    """All leaf keys of a (nested) config dataclass, e.g. ``model.n_layer``."""
    keys: list[str] = []
    for f in dataclasses.fields(cls):
        tp = _hints(cls)[f.name]
        if _nested(tp):
            keys += dotted_keys(tp, f"{prefix}{f.name}.")
        else:
            keys.append(prefix + f.name)
    return keys


def _moved(cls: type, name: str, key: str) -> ConfigError | None:
    """The error for an option that moved (a section's ``moved`` table), naming its new spelling."""
    new = getattr(cls, "moved", {}).get(name)
    return ConfigError(key, NO_VALUE, f"no longer an option of its own; write {new}") if new else None


def _unknown_key(key: str, valid: list[str]) -> ConfigError:
    close = closest_key(key, valid)
    hint = f"did you mean {close!r}?" if close else f"valid keys: {', '.join(valid)}"
    return ConfigError(key, NO_VALUE, f"no such option; {hint}")


def from_dict(cls: type[C], data: dict[str, Any], prefix: str = "") -> C:
    """Build ``cls`` from plain data, refusing unknown keys and wrongly typed values."""
    if not isinstance(data, dict):
        raise ConfigError(prefix.rstrip(".") or "config", data, "expected a table of options")
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            moved = _moved(cls, key, prefix + key)
            if moved:
                raise moved
            level = [prefix + n for n in names]  # sections (e.g. "model") as well as leaves
            raise _unknown_key(prefix + key, level + dotted_keys(cls, prefix))
    kwargs = {}
    for name, value in data.items():
        tp = hints[name]
        if _nested(tp):
            kwargs[name] = from_dict(tp, value, f"{prefix}{name}.")
        else:
            kwargs[name] = coerce(value, tp, prefix + name)
    return cls(**kwargs)


def field_type(cls: type, key: str) -> Any:
    """The annotation of dotted ``key`` inside ``cls`` (raises for unknown keys)."""
    parts = key.split(".")
    tp: Any = cls
    for part in parts:
        if not _nested(tp) or part not in {f.name for f in dataclasses.fields(tp)}:
            moved = _moved(tp, part, key) if _nested(tp) else None
            raise moved or _unknown_key(key, dotted_keys(cls))
        tp = _hints(tp)[part]
    if _nested(tp):
        raise ConfigError(key, NO_VALUE, f"is a section; name a field inside it, e.g. {dotted_keys(tp, key + '.')[0]}")
    return tp


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Set ``a.b.c`` in nested dicts, creating intermediate tables."""
    *heads, last = key.split(".")
    node = data
    for h in heads:
        node = node.setdefault(h, {})
    node[last] = value


def apply_overrides(cls: type, data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``key=value`` strings onto plain ``data`` (parsed by the type of ``key`` in ``cls``)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError("--set", item, "write it as dotted.key=value, e.g. model.n_layer=12")
        key, text = item.split("=", 1)
        key = key.strip()
        tp = field_type(cls, key)
        set_dotted(data, key, parse_text(text, tp, key))
    return data


def merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict merge; ``top`` wins."""
    out = dict(base)
    for k, v in top.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def explain(cls: type, prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """(key, type, default, help) for every field: the documentation of a config."""
    rows = []
    for f in dataclasses.fields(cls):
        tp = _hints(cls)[f.name]
        if _nested(tp):
            rows += explain(tp, f"{prefix}{f.name}.")
            continue
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        rows.append((prefix + f.name, describe(tp), default, help_text(f)))
    return rows
