"""The package's shape, held by tests: no import cycles, one forward, no registration on import."""

from __future__ import annotations

import ast
from pathlib import Path

import normlab

SRC = Path(normlab.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the normlab modules it imports anywhere in its body (function-level imports and
    ``if TYPE_CHECKING`` blocks included). ``from pkg import name`` counts as an import of
    ``pkg.name`` when that is a module, else of ``pkg``."""
    mods = _modules()

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                o = owner(t) if t.startswith("normlab") else None
                if o and o != mod:
                    graph[mod].add(o)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_cycle_finder_finds_a_cycle() -> None:
    """The checker itself: a loop through a function-level import is found, a chain is not."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    graph = import_graph()
    assert "normlab.model.catalogue" in graph["normlab.model.build"]  # module-level import
    assert "normlab.model.io" in graph["normlab.model.transformer"]   # function-level import


def test_no_import_cycle_in_the_package() -> None:
    assert cycles(import_graph()) == []


def test_model_registries_are_a_leaf() -> None:
    graph = import_graph()
    assert not {m for m in graph["normlab.model.registries"] if m.startswith("normlab.model")}
    # Components never reach for the catalogue: they are given what they need.
    for comp in ("norms", "attention", "init", "placement", "placements", "streams", "layout", "config"):
        assert "normlab.model.catalogue" not in graph[f"normlab.model.{comp}"], comp


def test_no_import_only_to_register() -> None:
    offenders = [f"{p}:{i}" for root in (SRC, SRC.parent.parent / "tests") for p in root.rglob("*.py")
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "noqa: " + "F401" in line]
    assert offenders == []


PIECES = {"embed", "head"}  # TransformerLM's pieces; the stream's begin/end are checked below


def _pieces_called(tree: ast.AST) -> list[int]:
    """Line numbers where code calls ``x.embed(...)``, ``x.head(...)``, ``x.stream.begin/end(...)``
    or a block taken from ``x.blocks`` in a loop."""
    lines = []
    loop_vars: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Attribute) and node.iter.attr == "blocks" \
                and isinstance(node.target, ast.Name):
            loop_vars.add(node.target.id)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in PIECES and isinstance(f.value, ast.Name):
            lines.append(node.lineno)
        elif isinstance(f, ast.Attribute) and f.attr in ("begin", "end") and isinstance(f.value, ast.Attribute) \
                and f.value.attr == "stream":
            lines.append(node.lineno)
        elif isinstance(f, ast.Name) and f.id in loop_vars:
            lines.append(node.lineno)
    return lines


def test_piece_finder_sees_a_spelled_out_forward() -> None:
    code = "h = m.stream.begin(m.embed(x))\nfor b in m.blocks:\n    h = b(h)\ny = m.head(h)\n"
    assert sorted(set(_pieces_called(ast.parse(code)))) == [1, 3, 4]


def test_only_the_model_runs_its_pieces_in_sequence() -> None:
    """Outside model/, every caller goes through TransformerLM.run / forward (one forward)."""
    found = []
    for path in SRC.rglob("*.py"):
        if path.is_relative_to(SRC / "model"):
            continue
        found += [f"{path.relative_to(SRC)}:{n}" for n in _pieces_called(ast.parse(path.read_text(encoding="utf-8")))]
    assert found == []


def _registrations(tree: ast.Module) -> tuple[list[int], list[tuple[str, int]]]:
    """(lines of decorators that register, [(registry name, line)] of module-level ``X.add(...)``
    calls on an upper-case registry name, ``X`` or ``module.X``, also those in a module-level
    ``for`` loop: all run on import)."""
    decorators = [d.lineno for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                  for d in node.decorator_list
                  if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ("register", "add")]

    def at_import(body: list[ast.stmt]) -> list[ast.stmt]:
        return [s for stmt in body for s in ([stmt] + (at_import(stmt.body) if isinstance(stmt, ast.For) else []))]

    adds = []
    for stmt in at_import(tree.body):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add":
            owner = call.func.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name.isupper():
                adds.append((name, stmt.lineno))
    return decorators, adds


def _declared_registries() -> dict[str, str]:
    """Registry name -> the catalogue module that fills it, from every ``X = Registry(...)``:
    the one it names, else the declaring module itself (a registry and its built-ins in one
    module, such as ``run/schedules.py``, so no lookup can find it unfilled)."""
    out = {}
    for mod, path in _modules().items():
        for stmt in ast.parse(path.read_text(encoding="utf-8")).body:
            value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "Registry":
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
                assert isinstance(target, ast.Name), f"{mod}:{stmt.lineno}"
                given = [k.value.value for k in value.keywords
                         if k.arg == "catalogue" and isinstance(k.value, ast.Constant)]
                out[target.id] = given[0] if given else mod
    return out


def test_registration_finder_sees_decorators_and_catalogue_lines() -> None:
    code = ("@NAMES.register('a')\ndef a(): ...\n@x.add('b')\nclass B: ...\n"
            "NAMES.add('c', 1)\nmod.NAMES.add('d', 2)\nseen.add('e')\ndef f():\n    NAMES.add('g', 3)\n"
            "for m in ms:\n    for c in m:\n        NAMES.add(c, c)\n")
    assert _registrations(ast.parse(code)) == ([1, 3], [("NAMES", 5), ("NAMES", 6), ("NAMES", 12)])


def test_nothing_registers_itself_on_import() -> None:
    """No decorator registers (the one style is a catalogue's ``add`` lines)."""
    found = [f"{mod}:{line}" for mod, path in _modules().items()
             for line in _registrations(ast.parse(path.read_text(encoding="utf-8")))[0]]
    assert found == []


def test_each_registry_is_filled_only_by_its_catalogue() -> None:
    declared = _declared_registries()
    assert {"PLACEMENTS", "SCHEDULES", "LOGGERS", "TOKENIZERS", "PRESETS", "STUDY_PRESETS", "EXECUTORS",
            "TRIALS", "PEERS", "SIZES", "CLAIMS", "STATISTICS", "NORMS", "INITS"} <= set(declared)
    fills: dict[str, set[str]] = {}
    for mod, path in _modules().items():
        for name, _ in _registrations(ast.parse(path.read_text(encoding="utf-8")))[1]:
            fills.setdefault(name, set()).add(mod)
    assert set(fills) <= set(declared), set(fills) - set(declared)  # every module-level add is a registry's
    for name, catalogue in declared.items():
        owner = next(m for m, p in _modules().items() if f"{name}: Registry" in p.read_text(encoding="utf-8"))
        assert catalogue.rpartition(".")[2] == "catalogue" or catalogue == owner, f"{name}: {catalogue}"
        assert fills.get(name) == {catalogue}, f"{name} is filled by {sorted(fills.get(name, ()))}, not {catalogue}"


def test_a_registry_fills_from_its_catalogue_at_the_first_lookup() -> None:
    """Looking up a name needs no import of the catalogue: the registry brings it in (or, filled
    where it is declared, holds its built-ins from the start)."""
    import importlib

    for name, catalogue in _declared_registries().items():
        owner = next(m for m, p in _modules().items() if f"{name}: Registry" in p.read_text(encoding="utf-8"))
        reg = getattr(importlib.import_module(owner), name)
        assert reg.catalogue == (None if catalogue == owner else catalogue) and len(reg) > 0, name
