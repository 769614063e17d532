"""Installed packages that add placements, norms, statistics or loggers (docs/plugins.md).

A package declares one entry point in the group ``normlab.plugins``::

    [project.entry-points."normlab.plugins"]
    scaled = "scaled_plugin:register"

and ``register(lab)`` adds its components with the registries' own spelling,
``lab.placements.add("scaled_pre", ScaledPre)``. Nothing is imported when normlab is:
each catalogue hands its registry :func:`filler` (``Registry.fill_later``), and the first
lookup of any registry loads every plugin once, in entry-point name order. A plugin that
fails to import, raises in ``register`` or reuses a name stops the command with one line
naming it (a ``UserError``); ``NORMLAB_NO_PLUGINS=1`` runs without any plugin.

This module is a leaf: it imports nothing of normlab at module level, so every catalogue
may use it without an import cycle.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from normlab.core.errors import UserError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from normlab.core.registry import Registry

GROUP = "normlab.plugins"
OFF_ENV = "NORMLAB_NO_PLUGINS"
KINDS = ("placements", "layouts", "norms", "qk_norms", "inits", "ffns", "statistics", "loggers")


class Shelf:
    """One registry as a plugin sees it: ``add(name, obj)``, applied at the first lookup."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any]] = []

    def add(self, name: str, obj: Any) -> Any:
        self.entries.append((name, obj))
        return obj


class Lab:
    """What a plugin's ``register`` receives: one :class:`Shelf` per registry it may add to."""

    def __init__(self) -> None:
        self.placements, self.layouts, self.norms, self.qk_norms = Shelf(), Shelf(), Shelf(), Shelf()
        self.inits, self.ffns, self.statistics, self.loggers = Shelf(), Shelf(), Shelf(), Shelf()


# kind -> [(name, object, "plugin 'x' (module:function)")], filled once per process
_loaded: dict[str, list[tuple[str, Any, str]]] | None = None
_loading = False


def discover() -> list[EntryPoint]:
    """The installed entry points of the group, in name order (one per name)."""
    from importlib.metadata import entry_points

    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    return [found[n] for n in sorted(found)]


def _fail(origin: str, what: str) -> Exception:
    what = " ".join(what.split())  # one line, whatever the plugin's message held
    return UserError(f"{origin}: {what} (fix or uninstall the plugin, or set {OFF_ENV}=1 to run without plugins)")


def _load() -> dict[str, list[tuple[str, Any, str]]]:
    out: dict[str, list[tuple[str, Any, str]]] = {k: [] for k in KINDS}
    for ep in discover():
        origin = f"plugin {ep.name!r} ({ep.value})"
        lab = Lab()
        try:
            ep.load()(lab)
        except Exception as e:  # the plugin's own bug or missing dependency: name it, no traceback
            raise _fail(origin, f"{type(e).__name__}: {e}") from None
        for kind in KINDS:
            out[kind] += [(name, obj, origin) for name, obj in getattr(lab, kind).entries]
    return out


def added(kind: str) -> list[tuple[str, Any, str]]:
    """(name, object, origin) of what the installed plugins add to ``kind`` (loads them once)."""
    global _loaded, _loading
    if os.environ.get(OFF_ENV, "") not in ("", "0"):
        return []
    if _loaded is None:
        if _loading:  # register() looked a name up: it would see a half-filled catalogue
            raise _fail("a plugin", "register() looked up a registry; it may only add to lab.<kind>")
        _loading = True
        try:
            _loaded = _load()
        finally:
            _loading = False
    return _loaded[kind]


def forget() -> None:
    """Load the plugins again at the next fill (for tests that install one)."""
    global _loaded
    _loaded = None


def filler(kind: str, base: type | None = None) -> Callable[[Registry[Any]], None]:
    """What a catalogue gives ``Registry.fill_later``: adds the plugins' ``kind`` entries, each an
    instance or subclass of ``base`` when given, all or none (a clash leaves the registry as it was)."""

    def fill(reg: Registry[Any]) -> None:
        entries = added(kind)
        seen: set[str] = set()
        for name, obj, origin in entries:
            if not isinstance(name, str) or not name:
                raise _fail(origin, f"lab.{kind}.add: the name must be a non-empty string, got {name!r}")
            if name in reg or name in seen:
                raise _fail(origin, f"{reg.kind} {name!r} is already registered; choose another name")
            if base is not None and not (isinstance(obj, base) or (isinstance(obj, type) and issubclass(obj, base))):
                raise _fail(origin, f"{reg.kind} {name!r} is {obj!r}, not a {base.__name__}")
            seen.add(name)
        for name, obj, _ in entries:
            reg.add(name, obj)

    return fill
