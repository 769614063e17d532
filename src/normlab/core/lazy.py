"""Lazy public names for package ``__init__`` modules: importing the package stays cheap
(``normlab --help`` never loads torch) and has no side effects."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``names[attr]`` (a module path) on first use."""

    def __getattr__(name: str) -> Any:
        if name in names:
            # the package's own modules, named by its __init__: the lazy public face (no hidden edge)
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def lazy_dir(namespace: dict[str, Any], names: dict[str, str]) -> Callable[[], list[str]]:
    """A module ``__dir__`` (``dir(package)``, tab completion): what the module holds plus the
    lazy names, none of them imported to list it."""

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __dir__
