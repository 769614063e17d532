"""The floors pyproject.toml declares are the oldest versions the code can run on.

Only the pinned torch (the Makefile's) and this interpreter are exercised here: no older torch
can be installed offline. So the floors are checked against the sources instead:

* torch: every torch API newer than 2.0 that the package uses is looked up in ``NEWER`` (the
  release that first shipped it, from torch's release notes), and ``torch>=X`` must be the
  newest of them: not lower (the code would fail there), not higher (a promise kept for
  nothing). A new API from the table raises the floor in the same change, or fails here.
* Python: no module of the standard library newer than ``requires-python`` is imported
  without a ``sys.version_info`` (or ``ImportError``) guard, in src, tests or benchmarks (the
  first Python of each module is read from typeshed's table, which mypy ships); ruff's and
  mypy's target versions equal the floor, so both check the code against it.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import normlab

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

ROOT = Path(normlab.__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# API -> the torch release that first shipped it, for APIs newer than torch 2.0 (torch.func,
# functional_call, vmap, torch.compile and scaled_dot_product_attention itself are 2.0).
# "f(kw)": a call of f with keyword kw; ".name": a method of any object (a tensor, a module).
NEWER: dict[str, str] = {
    "torch.nn.utils.get_total_norm": "2.6",
    "torch.nn.utils.clip_grads_with_norm_": "2.6",
    "torch.accelerator": "2.6",
    "torch.nn.attention.flex_attention": "2.5",
    "torch.nn.functional.scaled_dot_product_attention(enable_gqa)": "2.5",
    "torch.nn.RMSNorm": "2.4",
    "torch.nn.functional.rms_norm": "2.4",
    "torch.optim.AdamW(fused)": "2.4",  # fused on CPU; the lab passes fused=True on CPU too
    "torch._fused_adamw_": "2.4",  # that kernel, which the batched loop calls (CPU since 2.4)
    "torch.serialization.add_safe_globals": "2.4",
    "torch.compiler.is_compiling": "2.3",
    "torch.get_default_device": "2.3",
    "torch.amp.GradScaler": "2.3",
    "torch.nn.functional.scaled_dot_product_attention(scale)": "2.1",
    ".register_post_accumulate_grad_hook": "2.1",
    "torch.utils.flop_counter": "2.1",
    "torch.export": "2.1",
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def _sources(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py"))


def torch_uses(source: str) -> set[str]:
    """The torch names ``source`` uses, spelled in full (``F.rms_norm`` -> ``torch.nn.functional.rms_norm``),
    each call with a keyword also as ``name(kw)``, and every method name as ``.name``."""
    tree = ast.parse(source)
    alias: dict[str, str] = {}
    for node in ast.walk(tree):  # module- and function-level imports alike
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "torch":
                    alias[a.asname or "torch"] = a.name if a.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "torch":
            for a in node.names:
                alias[a.asname or a.name] = f"{node.module}.{a.name}"

    def full(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return alias.get(node.id)
        if isinstance(node, ast.Attribute):
            base = full(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    uses = set(alias.values())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            uses.add(f".{node.attr}")
            if (name := full(node)) is not None:
                uses.add(name)
        elif isinstance(node, ast.Call) and (name := full(node.func)) is not None:
            uses.update(f"{name}({k.arg})" for k in node.keywords if k.arg)
    return uses


def needs(uses: set[str]) -> dict[str, str]:
    """The entries of ``NEWER`` among ``uses`` (a use of ``torch.export.export`` is one of ``torch.export``)."""
    return {api: v for api, v in NEWER.items()
            if api in uses or (not api.startswith(".") and "(" not in api
                               and any(u.startswith(api + ".") for u in uses))}


def test_the_scan_reads_aliases_keywords_and_methods() -> None:
    code = ("import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
            "def f(x, p):\n    from torch.nn import utils as U\n    U.get_total_norm([x])\n"
            "    p.register_post_accumulate_grad_hook(print)\n    torch.optim.AdamW([p], fused=True)\n"
            "    return F.scaled_dot_product_attention(x, x, x, scale=1.0), nn.RMSNorm(4)\n")
    assert needs(torch_uses(code)) == {
        "torch.nn.utils.get_total_norm": "2.6", "torch.optim.AdamW(fused)": "2.4", "torch.nn.RMSNorm": "2.4",
        "torch.nn.functional.scaled_dot_product_attention(scale)": "2.1",
        ".register_post_accumulate_grad_hook": "2.1"}
    assert needs(torch_uses("import torch\ntorch.optim.AdamW([], lr=1.0)\nclip_grad_norm_ = 1\n")) == {}


def test_every_api_of_the_table_is_in_the_torch_here() -> None:
    import importlib

    import torch

    for api in NEWER:  # a misspelt entry would never match the code
        if api.startswith("."):
            assert hasattr(torch.Tensor, api[1:]) or hasattr(torch.nn.Module, api[1:]), api
            continue
        path = api.split("(")[0].split(".")
        obj = importlib.import_module("torch")
        for i, part in enumerate(path[1:], 1):
            if not hasattr(obj, part):
                obj = importlib.import_module(".".join(path[: i + 1]))
            else:
                obj = getattr(obj, part)
        assert _version(NEWER[api]) <= _version(torch.__version__.split("+")[0])[:2], api


def test_the_torch_floor_is_the_newest_api_the_package_uses() -> None:
    (floor,) = [m[1] for d in PYPROJECT["project"]["dependencies"] if (m := re.fullmatch(r"torch>=([\d.]+)", d))]
    used: dict[str, str] = {}
    for path in _sources("src"):
        for api, v in needs(torch_uses(path.read_text(encoding="utf-8"))).items():
            used[f"{api} ({path.relative_to(ROOT)})"] = v
    assert used, "the scan found no torch API of the table: it reads nothing"
    newest = max(_version(v) for v in used.values())
    why = ", ".join(f"{api}: {v}" for api, v in sorted(used.items(), key=lambda kv: _version(kv[1]), reverse=True))
    assert _version(floor) == newest, (f"pyproject.toml says torch>={floor}, but the newest API the package uses "
                                       f"first shipped in torch {'.'.join(map(str, newest))} ({why})")


# ------------------------------------------------------------------------------------ Python
def _typeshed_versions() -> dict[str, tuple[int, ...]]:
    """stdlib module -> the first Python that has it (typeshed's VERSIONS, shipped with mypy)."""
    mypy = pytest.importorskip("mypy")
    table = Path(mypy.__file__).parent / "typeshed" / "stdlib" / "VERSIONS"
    out = {}
    for line in table.read_text(encoding="utf-8").splitlines():
        if m := re.match(r"^([\w.]+):\s*(\d+\.\d+)-", line):
            out[m[1]] = _version(m[2])
    assert out["tomllib"] == (3, 11) and len(out) > 100  # read as expected
    return out


def unguarded_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import not under ``if sys.version_info ...`` or ``try/except ImportError``."""
    out: list[tuple[int, str]] = []

    def walk(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.If) and "version_info" in ast.unparse(node.test):
            guarded = True
        if isinstance(node, ast.Try) and any("ImportError" in ast.unparse(h.type or ast.Name("BaseException"))
                                             for h in node.handlers):
            guarded = True
        if not guarded and isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        if not guarded and isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
        for child in ast.iter_child_nodes(node):
            walk(child, guarded)

    walk(ast.parse(source), False)
    return out


def test_the_python_floor_is_the_one_every_tool_checks() -> None:
    floor = re.fullmatch(r">=(\d+\.\d+)", PYPROJECT["project"]["requires-python"])
    assert floor is not None
    assert PYPROJECT["tool"]["mypy"]["python_version"] == floor[1]  # mypy reads src as that Python
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py" + floor[1].replace(".", "")


def test_no_module_newer_than_the_python_floor_is_imported_unguarded() -> None:
    floor = _version(PYPROJECT["project"]["requires-python"].removeprefix(">="))
    first = _typeshed_versions()
    assert [m for _, m in unguarded_imports("import sys\nimport tomllib\n") if first.get(m, ()) > floor] == ["tomllib"]
    assert not unguarded_imports("import sys\nif sys.version_info >= (3, 11):\n    import tomllib\n"
                                 "else:\n    import tomli as tomllib\n")[1:]
    bad = []
    for path in _sources("src", "tests", "benchmarks"):
        for line, module in unguarded_imports(path.read_text(encoding="utf-8")):
            parts = module.split(".")
            since = max((first.get(".".join(parts[:i]), ()) for i in range(1, len(parts) + 1)), default=())
            if since > floor:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module} (Python {'.'.join(map(str, since))})")
    assert not bad, ("imports newer than requires-python, without a sys.version_info guard (tomllib: fall back "
                     "to tomli as src/normlab/config.py does): " + "; ".join(bad))
