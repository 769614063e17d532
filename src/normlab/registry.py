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
        """Take ``name`` out again (tests that register a throwaway entry clean up with it)."""
        return self._items.pop(name)

    def get(self, name: str, field: str | None = None) -> T:
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise unknown_name(field or self.field, name, self.names()) from None

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(self._items.items())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __len__(self) -> int:
        return len(self._items)
