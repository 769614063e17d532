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
