"""A tiny name -> object registry shared by placements, norms, inits, schedules, ...

Every switch in normlab is a lowercase name looked up here; an unknown name fails
with the list of valid ones, so typos never fall back silently to a default.
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from normlab.errors import unknown_name

T = TypeVar("T")


class Registry(Generic[T]):
    """Ordered mapping of names to objects with a decorator for registration."""

    def __init__(self, kind: str, field: str) -> None:
        self.kind = kind      # human word, e.g. "placement"
        self.field = field    # the config field that selects from it, e.g. "model.placement"
        self._items: dict[str, T] = {}
        self._later: Callable[[Registry[T]], None] | None = None

    def fill_later(self, fill: Callable[[Registry[T]], None]) -> None:
        """Run ``fill(self)`` at the first lookup, not now: installed plugins join a catalogue
        this way (``normlab.plugins``), so importing a catalogue never imports a plugin."""
        self._later = fill

    def _fill(self) -> None:
        fill, self._later = self._later, None  # cleared first: lookups made by fill see the built-ins
        if fill is not None:
            try:
                fill(self)
            except BaseException:
                self._later = fill  # a failed fill (a broken plugin) fails again, never half-applied
                raise

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise KeyError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return deco

    def add(self, name: str, obj: T) -> T:
        return self.register(name)(obj)

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
