"""The run directory has one owner: ``normlab.run.dir``. No other module builds a path to a run's
config.json, env.json, metrics.jsonl or checkpoints, or probes a checkpoint's swap twin, or
names the lock file and the marker of the folders the lab writes (``normlab.run.outdir`` imports them)."""

from __future__ import annotations

import ast
from pathlib import Path

import normlab

SRC = Path(normlab.__file__).parent
OWNER = "run/dir.py"
# the run's file names, as they appear in a path expression (a string literal of its own)
NAMES = {"config.json", "env.json", "metrics.jsonl", "diagnostics.jsonl", "diagnostics_ref.safetensors",
         "data.json", "checkpoints", ".old", ".normlab.lock", "normlab.json"}  # the last two: every lab folder's lock and marker
ALLOWED = {  # (module, name): why this is not a run directory's file
    ("run/checkpoint.py", ".old"): "the checkpoint folder's own swap twin, inside the folder format it owns",
    ("model/io.py", "config.json"): "a Hugging Face model directory's config.json (HF_CONFIG: same file name)",
}


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """String literals that are whole values (docstrings and the text of messages left out)."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    in_fstring = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and id(n) not in in_fstring]


def offenders() -> list[str]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == OWNER:
            continue
        for line, value in _literals(ast.parse(path.read_text(encoding="utf-8"))):
            if value in NAMES and (rel, value) not in ALLOWED:
                out.append(f"{rel}:{line}: {value!r}")
    return out


def test_only_the_run_directory_module_names_run_files() -> None:
    assert offenders() == [], "go through normlab.run.dir.RunDir instead"


def test_the_check_sees_a_path_literal(tmp_path, monkeypatch) -> None:
    """The scan is not vacuous: a module joining a run's config.json path is caught."""
    bad = "from pathlib import Path\n\ndef f(run):\n    return Path(run) / 'config.json'\n"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "bad.py").write_text(bad, encoding="utf-8")
    monkeypatch.setattr(__import__(__name__, fromlist=["SRC"]), "SRC", tmp_path / "pkg")
    assert offenders() == ["bad.py:4: 'config.json'"]


def test_every_exception_is_still_needed() -> None:
    """An allowance nobody uses any more is removed, so the list stays the truth."""
    used = set()
    for rel, name in ALLOWED:
        values = {v for _, v in _literals(ast.parse((SRC / rel).read_text(encoding="utf-8")))}
        if name in values:
            used.add((rel, name))
    assert used == set(ALLOWED)
