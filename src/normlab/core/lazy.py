"""Lazy public names for package ``__init__`` modules: importing the package stays cheap
(``normlab --help`` never loads torch) and has no side effects.

It is also the one place that turns a name into a module (:func:`load_object`): a registry's
catalogue (always a module of the registry's own package), a model implementation (always in
``normlab.model``), a trial function the user names as ``module:function``, and the optional
package a logger declares (a plugin's entry point is loaded by importlib.metadata). Each of those
names is either the user's or stays inside one package (tests/architecture/
test_no_string_imports.py), so no dependency between packages hides in a string."""

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


def load_object(name: str) -> Any:
    """The module ``name``, or its attribute for ``"module:attribute"``, imported by name (the
    callers say why each name is not a hidden dependency). Raises ImportError or AttributeError
    for the caller to word."""
    module, _, attr = name.partition(":")
    found = importlib.import_module(module)
    return getattr(found, attr) if attr else found
