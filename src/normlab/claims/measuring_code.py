"""The measuring code of a claim: the source of every module that computes its quantities, hashed.

A rule hash covers what a claim declares and the decision code (``claims/decision.py``) what
turns effects into verdicts; neither covers the helpers that compute a part's quantity (the
spike and Welch helpers, the horizons and outcomes of ``study/``, the extra measurements of
``diagnostics/``, the frontier fits of ``stats/``). A registration records them too
(``claims/registration.py``), so that a run from another revision is refused unless the code
that measures is the registered code.

**The rule.** A claim's measuring code is the set of modules reachable from its *roots* along
normlab imports, where every module on the way is a *measuring module*; each is hashed by
the bytes of its source file.

- Roots: the module that defines the claim's ``measure``; a quick claim adds
  ``claims/measure.py`` and ``claims/quickrun.py`` (its ``Needs``: the probe cells and the
  extra measurements); a training claim adds ``claims/studies.py`` (its studies, trained and
  read) and ``study/catalogue.py`` (the study presets and trial functions they run).
- Measuring modules (:data:`MEASURING`): ``claims/catalogue/*``, ``claims/studies.py``,
  ``claims/measure.py``, ``claims/quickrun.py`` and the packages ``study``, ``train``, ``run``,
  ``diagnostics``, ``model``, ``data`` and ``stats``. Training code counts: it makes the runs a
  training part's quantity is read from. Not counted, and not followed: ``cli``, ``report``,
  ``inspect``, ``bench``, ``core`` (config machinery, registries, errors, logs, files, progress,
  signals, plugins: no arithmetic; what config machinery does to a trial shows in its trial id,
  which the registration's ``trials_hash`` covers) and the rest of ``claims`` (publishing,
  registration, the ledger, the cache, and the decision code, which has its own hash).
- Imports: read from the source with :mod:`ast`, never from ``sys.modules`` (what happens to be
  imported depends on the process): every ``import normlab.X`` and ``from normlab.X import
  name`` (an edge to ``normlab.X.name`` when that is a module, else to ``normlab.X``), in any
  function, except under ``if TYPE_CHECKING:`` (never run); and every string constant that is
  exactly a normlab module name, or ``module:attribute`` (a registry's ``catalogue=``, a builder
  named by string, a package's lazy names): the imports Python makes by name at run time. A
  submodule's import does not count its parent package's ``__init__``.

:func:`measuring_code` gives ``{module: sha256 of its source (16 hex digits)}`` in sorted
order, :func:`combined` one hash over it (``module sha`` lines, sorted). Both depend only on
the files' bytes.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from pathlib import Path
from typing import Any, Callable

import normlab

Reader = Callable[[str], "bytes | None"]

# Module prefixes whose modules compute a claim's quantities (see the module's docstring).
MEASURING = ("normlab.claims.catalogue", "normlab.claims.studies", "normlab.claims.measure",
             "normlab.claims.quickrun", "normlab.study", "normlab.train", "normlab.run", "normlab.diagnostics",
             "normlab.model", "normlab.data", "normlab.stats")
QUICK_ROOTS = ("normlab.claims.measure", "normlab.claims.quickrun")
TRAINING_ROOTS = ("normlab.claims.studies", "normlab.study.catalogue")
CHANGED = "measuring code changed"  # how a reason for post-hoc begins (registration.changes, registered.mark)
_NAMED = re.compile(r"^(normlab(?:\.[A-Za-z_]\w*)+)(?::[A-Za-z_][\w.]*)?$")
SRC = Path(normlab.__file__).resolve().parent


def measuring(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in MEASURING)


def module_file(module: str) -> Path | None:
    """The source file of normlab module ``module`` (None: no such module)."""
    parts = module.split(".")
    if parts[0] != "normlab":
        return None
    base = SRC.joinpath(*parts[1:])
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def read_source(module: str) -> bytes | None:
    """The bytes of ``module``'s source file (None: no such module)."""
    f = module_file(module)
    return None if f is None else f.read_bytes()


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or
                                         (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


class Graph:
    """The import graph of normlab's source, read through ``read`` (module -> bytes), each
    module parsed once."""

    def __init__(self, read: Reader = read_source) -> None:
        self.read = read
        self._nodes: dict[str, tuple[str, tuple[str, ...]]] = {}

    def _exists(self, module: str) -> bool:
        return module in self._nodes or self.read(module) is not None

    def node(self, module: str) -> tuple[str, tuple[str, ...]]:
        """(sha of ``module``'s source, the normlab modules it imports); KeyError: no such module."""
        if module not in self._nodes:
            src = self.read(module)
            if src is None:
                raise KeyError(module)
            self._nodes[module] = (hashlib.sha256(src).hexdigest()[:16], tuple(sorted(self._edges(module, src))))
        return self._nodes[module]

    def _edges(self, module: str, src: bytes) -> set[str]:
        out: set[str] = set()
        f = module_file(module)
        package = module if f is not None and f.name == "__init__.py" else module.rpartition(".")[0]
        todo: list[ast.AST] = [ast.parse(src)]
        while todo:
            n = todo.pop()
            if _type_checking(n):
                todo.extend(getattr(n, "orelse", []))  # the else branch runs
                continue
            todo.extend(ast.iter_child_nodes(n))
            if isinstance(n, ast.Import):
                out.update(a.name for a in n.names if a.name.split(".")[0] == "normlab")
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:  # relative: from the module's package up
                    up = package.split(".")[: len(package.split(".")) - (n.level - 1)]
                    base = ".".join([*up, *([base] if base else [])])
                if base.split(".")[0] != "normlab":
                    continue
                for a in n.names:
                    sub = f"{base}.{a.name}"
                    out.add(sub if a.name != "*" and self._exists(sub) else base)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                m = _NAMED.match(n.value)
                if m and self._exists(m.group(1)):
                    out.add(m.group(1))
        out.discard(module)
        return out

    def closure(self, roots: tuple[str, ...]) -> dict[str, str]:
        """{module: sha} of every measuring module reachable from ``roots`` through measuring modules."""
        seen: dict[str, str] = {}
        todo = [r for r in roots if measuring(r)]
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            sha, edges = self.node(m)
            seen[m] = sha
            todo.extend(e for e in edges if measuring(e) and e not in seen)
        return dict(sorted(seen.items()))


@functools.lru_cache(maxsize=1)
def _default() -> Graph:
    # once per process: the source a run checks at its start is the code it imported then
    return Graph()


def roots(claim: Any) -> tuple[str, ...]:
    """Where a claim's measuring code starts (see the module's docstring)."""
    return (claim.measure.__module__, *(QUICK_ROOTS if claim.quick else TRAINING_ROOTS))


def set_name(claim: Any) -> str:
    """The name of a claim's module set in a registration: its roots follow from it alone."""
    return f"{claim.measure.__module__} ({'quick' if claim.quick else 'training'})"


def measuring_code(claim: Any, graph: Graph | None = None) -> dict[str, str]:
    """{module: sha256 of its source, 16 hex digits} of ``claim``'s measuring code, sorted by module."""
    return (graph or _default()).closure(roots(claim))


def combined(code: dict[str, str]) -> str:
    """One hash over a measuring code (``module sha`` lines in module order)."""
    return hashlib.sha256("".join(f"{m} {s}\n" for m, s in sorted(code.items())).encode()).hexdigest()[:16]


def measuring_hash(claim: Any, graph: Graph | None = None) -> str:
    return combined(measuring_code(claim, graph))


def differing(was: dict[str, str], now: dict[str, str]) -> list[str]:
    """The modules whose source differs between two measuring codes: changed, added or gone."""
    return [m + ("" if m in was and m in now else " (new)" if m in now else " (gone)")
            for m in sorted({*was, *now}) if was.get(m) != now.get(m)]


def section(claims: list[Any], graph: Graph | None = None) -> dict[str, Any]:
    """A registration's ``measuring_code``: every module's sha (``modules``) and each claim set's
    module names (``sets``, by :func:`set_name`)."""
    modules: dict[str, str] = {}
    sets: dict[str, list[str]] = {}
    for c in claims:
        code = measuring_code(c, graph)
        modules.update(code)
        sets[set_name(c)] = list(code)
    return {"modules": dict(sorted(modules.items())), "sets": dict(sorted(sets.items()))}


def registered(doc: dict[str, Any], entry: dict[str, Any]) -> dict[str, str] | None:
    """The measuring code a registration ``doc`` recorded for a claim's ``entry`` (None: a
    registration older than measuring code, format 1 or 2)."""
    got, table = entry.get("measuring_code"), doc.get("measuring_code")
    if not isinstance(got, dict) or not isinstance(table, dict):
        return None
    names = table.get("sets", {}).get(got.get("set"), [])
    return {m: table.get("modules", {}).get(m, "") for m in names}


def change(doc: dict[str, Any], entry: dict[str, Any], claim: Any, graph: Graph | None = None) -> str:
    """Why ``claim``'s measuring code is not the one registered in ``doc`` for its ``entry``:
    "measuring code changed: modules ..." naming each module whose source differs; "" when it
    is the same, or when the registration predates measuring code (see :func:`registered`)."""
    was = registered(doc, entry)
    if was is None:
        return ""
    now = measuring_code(claim, graph)
    return "" if now == was else f"{CHANGED}: modules {', '.join(differing(was, now))}"
