"""The lazy public API is typed and listed: a type checker run from outside the package sees
``normlab.TransformerLM`` as the class (not ``Any``), and ``dir()`` lists the public names
without importing them (``import normlab`` stays free of torch: tests/config/test_cli.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import normlab

SRC = Path(normlab.__file__).resolve().parents[1]
LAZY_PACKAGES = ("normlab", "normlab.model", "normlab.study")

USER_CODE = """\
import normlab
import normlab.study
from normlab import ModelConfig, TransformerLM

reveal_type(TransformerLM)
reveal_type(normlab.study.load)
model = TransformerLM(ModelConfig())
broken = TransformerLM(42)
"""

# The user's view of an installed package: its modules are analysed for their types, their own
# errors are not the user's (silent); torch and the other libraries are skipped to keep it short.
MYPY_INI = """\
[mypy]
follow_imports = skip
ignore_missing_imports = True
[mypy-normlab.*]
follow_imports = silent
"""


def test_a_type_checker_outside_the_package_sees_the_classes(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    (tmp_path / "use.py").write_text(USER_CODE)
    (tmp_path / "mypy.ini").write_text(MYPY_INI)
    env = {**os.environ, "MYPYPATH": str(SRC)}  # this checkout's normlab, before any installed one
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir",
                           str(tmp_path / "cache"), "use.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    out = done.stdout
    assert 'use.py:5: note: Revealed type is "def (cfg: normlab.model.config.ModelConfig, plan: ' \
           'normlab.model.build.ResolvedModel | None =) -> normlab.model.transformer.TransformerLM"' in out, out
    assert 'use.py:6: note: Revealed type is "def (store: str | pathlib.Path) -> ' \
           'normlab.study.frame.StudyTables"' in out, out
    # Any would accept this call: the class's own signature refuses it
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and errors[0].startswith("use.py:8: error: Argument 1 to \"TransformerLM\" has "
                                                     "incompatible type \"int\"; expected \"ModelConfig\""), out


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_dir_lists_the_public_names_and_type_checkers_import_each(package: str) -> None:
    init = SRC / Path(*package.split(".")) / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    checked = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.If)
               and ast.unparse(node.test) == "TYPE_CHECKING" for imp in node.body
               if isinstance(imp, ast.ImportFrom) for a in imp.names}
    code = (f"import sys, {package} as p\n"
            "print(sorted(p._LAZY)); print(sorted(p.__all__)); print(sorted(dir(p)))\n"
            "print(sorted(m for m in sys.modules if m.startswith(('torch', 'numpy'))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr
    lazy, public, listed, heavy = (ast.literal_eval(x) for x in done.stdout.splitlines())
    assert set(lazy) == checked  # every lazy name has its import for type checkers, and no other
    assert set(public) - {"__version__"} == set(lazy)  # __all__ is the lazy names, spelled out
    assert set(lazy) <= set(listed)
    assert set(public) <= set(listed)  # __version__ too
    assert heavy == []  # dir() lists them without importing any of them
