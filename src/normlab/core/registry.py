"""A tiny name -> object registry shared by placements, norms, inits, schedules, ...

Every switch in normlab is a lowercase name looked up here; an unknown name fails
with the list of valid ones, so typos never fall back silently to a default.

Registries are filled one way only: a package's ``catalogue`` module adds every built-in
with one ``add`` line each, and nothing registers itself when imported. A registry that
names its catalogue (``Registry(..., catalogue="normlab.model.catalogue")``) imports it at
its first lookup, so the module that declares the registry needs no import of its catalogue.
The catalogue is always in the registry's own package (a test holds it): a name in a string
never hides an import across packages, which import-linter checks. A registry that names none
is filled where it is declared (``run/schedules.py``).
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from normlab.core.errors import unknown_name
from normlab.core.lazy import load_object

T = TypeVar("T")


class Registry(Generic[T]):
    """Ordered mapping of names to objects, filled by its catalogue (``add``)."""

    def __init__(self, kind: str, field: str, catalogue: str | None = None) -> None:
        self.kind = kind      # human word, e.g. "placement"
        self.field = field    # the config field that selects from it, e.g. "model.placement"
        self.catalogue = catalogue  # the module that fills it, imported at the first lookup
        self._items: dict[str, T] = {}
        self._later: Callable[[Registry[T]], None] | None = None
        self._catalogued = catalogue is None

    def fill_later(self, fill: Callable[[Registry[T]], None]) -> None:
        """Run ``fill(self)`` at the first lookup, not now: installed plugins join a catalogue
        this way (``normlab.plugins``), so importing a catalogue never imports a plugin."""
        self._later = fill

    def _fill(self) -> None:
        if not self._catalogued and self.catalogue is not None:
            self._catalogued = True  # first: the catalogue's own lookups see what it added so far
            # By name, not by import: the catalogue imports the components, which may name this
            # registry. Always the registry's own package (tests/architecture/test_no_string_imports).
            load_object(self.catalogue)
        fill, self._later = self._later, None  # cleared first: lookups made by fill see the built-ins
        if fill is not None:
            try:
                fill(self)
            except BaseException:
                self._later = fill  # a failed fill (a broken plugin) fails again, never half-applied
                raise

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` as ``name`` (a catalogue's line, a plugin's, a test's)."""
        if name in self._items:
            raise KeyError(f"{self.kind} {name!r} registered twice")
        self._items[name] = obj
        return obj

    def remove(self, name: str) -> T:
        """Drop ``name`` (for code that registered something temporarily, e.g. a test)."""
        self._fill()
        try:
            return self._items.pop(name)
        except KeyError:
            raise unknown_name(self.field, name, self.names()) from None

    def get(self, name: str, field: str | None = None) -> T:
        self._fill()
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise unknown_name(field or self.field, name, self.names()) from None

    def names(self) -> list[str]:
        self._fill()
        return list(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        self._fill()
        return iter(self._items.items())

    def __contains__(self, name: object) -> bool:
        self._fill()
        return name in self._items

    def __len__(self) -> int:
        self._fill()
        return len(self._items)
