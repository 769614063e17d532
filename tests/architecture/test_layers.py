"""The package's layers are kept by import-linter contracts (pyproject.toml
[tool.importlinter], run by `make test`); these tests show the contracts can fail, and that
the package root holds only packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

import normlab

SRC = Path(normlab.__file__).parent
ROOT = SRC.parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(tmp_path: Path, plant: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """lint-imports over a copy of the package with ``plant`` (relative path -> source) added."""
    pkg = tmp_path / "normlab"
    shutil.copytree(SRC, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, text in plant.items():
        (pkg / rel).write_text(text, encoding="utf-8")
    # the contracts themselves, read from the project's pyproject.toml, nothing else
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([str(LINT), "--no-cache", "--config", str(tmp_path / "pyproject.toml")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def lint_available() -> None:
    if not LINT.exists():  # the dev extra installs it; CI runs `make test`, which calls it too
        pytest.fail(f"{LINT} missing: install the dev extra (pip install -e '.[dev]')")


def test_the_package_keeps_its_contracts(tmp_path, lint_available) -> None:
    out = _lint(tmp_path, {})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(("where", "line", "contract"), [
    ("model/planted.py", "import normlab.train\n", "Layers"),  # a low layer reaching up
    ("report/planted.py", "def f():\n    from normlab.claims import catalogue\n", "Layers"),  # inside a function
    ("inspect/planted.py", "from normlab.train import loop\n", "independent"),  # two independent packages
    ("core/planted.py", "from normlab.run import dir\n", "Layers"),
    ("run/planted.py", "def f():\n    from normlab.train import loggers\n", "run does not import train"),
    # claims measure through diagnostics, never by building or hooking a model themselves
    ("claims/planted.py", "def f():\n    from normlab.model.transformer import TransformerLM\n", "Claims decide"),
])
def test_a_planted_forbidden_import_fails(tmp_path, lint_available, where, line, contract) -> None:
    out = _lint(tmp_path, {where: line})
    assert out.returncode != 0
    planted = "normlab." + where.removesuffix(".py").replace("/", ".")
    assert planted in out.stdout, out.stdout
    assert contract in out.stdout


def test_the_root_holds_only_packages() -> None:
    """Every module lives in a package that names its role (docs/architecture.md)."""
    loose = sorted(p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert loose == []


def test_every_package_is_a_layer() -> None:
    """A new package must be placed in the layers contract, or nothing checks its imports."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    packages = {f"normlab.{p.parent.name}" for p in SRC.glob("*/__init__.py")}
    assert packages == named


def test_architecture_page_names_every_package_and_only_real_ones() -> None:
    """docs/architecture.md's package table and layer picture agree with the package."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `normlab/(\w+)/` \|", text, flags=re.M))
    picture = text.split("```text", 1)[1].split("```", 1)[0]
    drawn = {w for line in picture.splitlines() for w in re.findall(r"^\s*([\w |]+?)\s{2,}", line + "  ")
             for w in w.replace("|", " ").split()}
    packages = {p.parent.name for p in SRC.glob("*/__init__.py")}
    assert table == packages
    assert drawn == packages


def test_each_walkthrough_counts_the_files_it_names() -> None:
    """docs/architecture.md's walkthroughs say "(files touched: N: `a`, `b`, ...)": N is the
    number of files named, and each named file exists (the catalogue lines the registries and
    tests/architecture/test_structure.py hold to one place, so these are all a new one touches)."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    found = re.findall(r"\(files touched: (\d+): (.*?)[;)]", text, flags=re.S)
    assert len(found) == 4  # placement, statistic, training claim, logger
    for count, names in found:
        paths = [p for p in re.findall(r"`([^`]+)`", names) if "/" in p or p.endswith((".py", ".md"))]
        assert len(paths) == int(count), names
        for p in paths:
            where = [ROOT / p, SRC / p, ROOT / "src" / "normlab" / p]
            assert any(w.exists() for w in where), p
