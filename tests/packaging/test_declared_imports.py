"""Every package the code imports is declared: in ``dependencies`` or in an extra.

The scan reads every import of src/normlab, function-level ones included, and the modules the
code imports by name (``importlib.import_module("x")``, ``find_spec("x")``, a logger's
``requires = ("x", extra)``). A module's distribution is found through the installed
packages' metadata, else taken to be spelled like the module (``x_y`` -> ``x-y``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import normlab

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

ROOT = Path(normlab.__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
BY_NAME = ("import_module", "find_spec")  # calls whose first argument is a module name


def _norm(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(spec: str) -> str:
    return _norm(re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0])


def imported(source: str) -> dict[str, int]:
    """Top-level module -> first line, for every module ``source`` imports (statements anywhere,
    constant names given to import_module/find_spec, and ``requires = ("module", "extra")``)."""
    out: dict[str, int] = {}
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func in BY_NAME and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        elif isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["requires"]:
            value = ast.literal_eval(node.value)
            names = [value[0]] if isinstance(value, tuple) and value else []
        for name in names:
            out.setdefault(name.split(".")[0], node.lineno)
    return out


def third_party() -> dict[str, str]:
    """Top-level module -> where src/normlab first imports it, for modules outside the standard
    library and normlab. (A module named by a string may be one of normlab's: dropped too.)"""
    out: dict[str, str] = {}
    for path in sorted((ROOT / "src" / "normlab").rglob("*.py")):
        for module, line in imported(path.read_text(encoding="utf-8")).items():
            if module not in sys.stdlib_module_names and module not in ("normlab", "__future__"):
                out.setdefault(module, f"{path.relative_to(ROOT)}:{line}")
    return out


def declared() -> dict[str, set[str]]:
    """Distribution -> where pyproject.toml declares it (``dependencies`` or the extras' names)."""
    out: dict[str, set[str]] = {}
    for spec in PROJECT["dependencies"]:
        out.setdefault(_requirement(spec), set()).add("dependencies")
    for extra, specs in PROJECT["optional-dependencies"].items():
        for spec in specs:
            out.setdefault(_requirement(spec), set()).add(extra)
    return out


def distributions(module: str) -> set[str]:
    found = importlib.metadata.packages_distributions().get(module)
    return {_norm(d) for d in found} if found else {_norm(module)}


def test_the_scan_finds_function_level_and_by_name_imports() -> None:
    code = ("import os, numpy as np\nfrom scipy import stats\ndef f():\n    import tokenizers.models\n"
            "    importlib.util.find_spec('transformers')\nclass L:\n    requires = ('wandb', 'wandb')\n"
            "from . import sibling\n")
    assert set(imported(code)) == {"os", "numpy", "scipy", "tokenizers", "transformers", "wandb"}


def test_every_third_party_import_is_declared() -> None:
    modules = third_party()
    assert {"torch", "numpy", "huggingface_hub", "tokenizers", "transformers"} <= set(modules)  # it reads them
    have = declared()
    missing = [f"{m} ({where}; distribution {' or '.join(sorted(distributions(m)))})"
               for m, where in sorted(modules.items()) if not distributions(m) & set(have)]
    assert not missing, "imported but declared neither in dependencies nor in an extra: " + "; ".join(missing)


def test_a_logger_needs_only_what_its_extra_declares() -> None:
    have = declared()
    pairs = []
    for path in sorted((ROOT / "src" / "normlab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["requires"]:
                module, extra = ast.literal_eval(node.value)
                pairs.append((module, extra))
                assert distributions(module.split(".")[0]) & {d for d, where in have.items() if extra in where}, (
                    f"{path.relative_to(ROOT)}: requires {module!r} from extra {extra!r}, which does not declare it")
    assert len(pairs) >= 2  # tensorboard, wandb


def test_every_extra_the_messages_name_exists() -> None:
    extras = set(PROJECT["optional-dependencies"])
    named = {}
    for path in sorted((ROOT / "src" / "normlab").rglob("*.py")):
        for extra in re.findall(r"normlab\[([a-z0-9_,-]+)\]", path.read_text(encoding="utf-8")):
            named.update({e: path.relative_to(ROOT) for e in extra.split(",")})
    assert {"hf", "pandas", "parquet"} <= set(named)
    assert not {e: str(p) for e, p in named.items() if e not in extras}
