"""No dependency hides in a string: an ``importlib.import_module`` or ``__import__`` call is an
import that lint-imports and the import graph cannot see, so the package allows one only at the
sites listed here, each for a name that is not a dependency of the code that holds it."""

from __future__ import annotations

import ast
from pathlib import Path

import normlab

SRC = Path(normlab.__file__).parent

# (module, function holding the call) -> why that name is not a hidden dependency
ALLOWED = {
    ("normlab.core.lazy", "__getattr__"): "the package's lazy public face: a package's own names",
    ("normlab.core.lazy", "load_object"): "the one place a name becomes a module: a registry's catalogue "
                                          "(always in the registry's own package), a model implementation "
                                          "(always in normlab.model), a trial function the user names, a "
                                          "logger's optional package",
}


def string_imports(source: str) -> list[tuple[str, int]]:
    """(enclosing function, line) of every call of ``import_module`` or ``__import__`` in
    ``source``, however it is spelled (``importlib.import_module``, an alias, ``from importlib
    import import_module``); ``<module>`` at module level."""
    tree = ast.parse(source)
    aliases = {"import_module", "__import__"}
    for node in ast.walk(tree):  # `from importlib import import_module as im`
        if isinstance(node, ast.ImportFrom) and node.module == "importlib":
            aliases |= {a.asname or a.name for a in node.names if a.name == "import_module"}
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name in aliases:
                    found.append((where, child.lineno))
            visit(child, where)

    visit(tree, "<module>")
    return found


def _sites(root: Path) -> dict[tuple[str, str], list[int]]:
    """(module, function) -> lines of its string imports, over the package at ``root``."""
    out: dict[tuple[str, str], list[int]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for where, line in string_imports(path.read_text(encoding="utf-8")):
            out.setdefault((module, where), []).append(line)
    return out


def offenders(root: Path) -> dict[tuple[str, str], list[int]]:
    return {site: lines for site, lines in _sites(root).items() if site not in ALLOWED}


def test_the_scanner_finds_every_spelling() -> None:
    planted = ("import importlib\nfrom importlib import import_module as im\n"
               "X = importlib.import_module('normlab.train')\n"
               "def load(name):\n    return im(name)\n"
               "class C:\n    def m(self):\n        return __import__('normlab.train.loop')\n"
               "def fine():\n    return importlib.reload(X)\n")
    assert string_imports(planted) == [("<module>", 3), ("load", 5), ("m", 8)]


def test_only_the_listed_sites_import_by_string() -> None:
    assert offenders(SRC) == {}
    sites = _sites(SRC)
    assert set(ALLOWED) <= set(sites), set(ALLOWED) - set(sites)  # a site removed leaves the list too
    assert all(len(lines) == 1 for lines in sites.values()), sites  # one call per site


def test_a_planted_string_import_is_refused(tmp_path) -> None:
    """The check fails on a module that reaches training through a string."""
    (tmp_path / "normlab" / "run").mkdir(parents=True)
    (tmp_path / "normlab" / "run" / "planted.py").write_text(
        "import importlib\n\ndef schedules():\n    return importlib.import_module('normlab.train.catalogue')\n")
    assert offenders(tmp_path / "normlab") == {("normlab.run.planted", "schedules"): [4]}


def _registries(source: str, module: str) -> list[tuple[str, str]]:
    """(registry variable, catalogue) for every ``Registry(..., catalogue="...")`` in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Registry":
            for kw in node.keywords:
                if kw.arg == "catalogue":
                    assert isinstance(kw.value, ast.Constant), f"{module}: a catalogue is named by a literal"
                    out.append((node.args[0].value if node.args else "?", kw.value.value))
    return out


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_a_named_catalogue_is_in_its_registrys_package() -> None:
    """A registry imports its catalogue at its first lookup, by name: that is allowed only inside
    one package (the catalogue imports the components, which may name the registry), so no
    import across packages, which import-linter checks, hides in a string."""
    named = []
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__")
        for kind, catalogue in _registries(path.read_text(encoding="utf-8"), module):
            named.append(kind)
            assert _package(catalogue) == _package(module), f"{module}: {kind} names {catalogue}"
    assert {"placement", "logger", "statistic", "claim"} <= set(named)  # the scan sees them
    planted = _registries('SCHEDULES = Registry("schedule", "optim.schedule", catalogue="normlab.train.catalogue")\n',
                          "normlab.run.registries")
    assert [_package(c) for _, c in planted] == ["normlab.train"] != [_package("normlab.run.registries")]


def test_an_implementation_is_in_the_model_package() -> None:
    """``model.impls`` names each implementation's builder and check as "module:attribute", so
    that the model modules (which import the catalogue, which lists the implementations) are
    imported only when built: each such name stays inside ``normlab.model``."""
    from normlab.model.catalogue import IMPLS

    paths = [p for _, impl in IMPLS.items() for p in (impl.builder, impl.checker) if p is not None]
    assert len(paths) >= 3
    for p in paths:
        assert p.startswith("normlab.model."), p
