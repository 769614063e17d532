"""Owners nobody bypasses: every name of a file or folder the lab writes, every ``step_`` name,
the study store's SQL tables and ``sqlite3.connect`` are spelled in src/ only by their owners.

The names are read from the owners' own constants (``RunDir.OWNED``, ``OutDir``'s ``ENTRIES``,
``model.io``, ``run.checkpoint``, the store, the claims folder), so a file a new owner constant
names is searched for without editing this test. Readers import the constant or ask the owner
(``Store.has_db``, ``OutDir.file``, ``RunDir.step_name``, ``model.io.is_model_dir``, ...).

What counts as a spelling: a string literal (an f-string's text included) without whitespace
that has the name as one of its ``/``-separated parts, or is a ``step_`` pattern; an SQL
statement naming a store table; a ``sqlite3.connect`` call. Prose (messages, help texts,
docstrings) names files for people and is not searched: it cannot open one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from normlab.claims import folder as claims_folder
from normlab.model import io as model_io
from normlab.run import checkpoint, outdir
from normlab.run import dir as rundir
from normlab.study import store
from normlab.train.loggers import logger_folders

SRC = Path(__file__).resolve().parents[2] / "src" / "normlab"


def _names(*entries: str) -> set[str]:
    return {e.rstrip("/") for e in entries}


def owners() -> dict[str, set[str]]:
    """{owned name: the modules (relative to src/normlab) that may spell it}."""
    out: dict[str, set[str]] = {}

    def own(module: str, names: set[str]) -> None:
        for n in names:
            out.setdefault(n, set()).add(module)

    own("run/dir.py", _names(*rundir.OWNED) - {rundir.REPORT, rundir.ANALYSIS})  # (the bare words: below)
    own("run/outdir.py", _names(*(e for kind in outdir.ENTRIES.values() for e in kind))
        - {outdir.PAGE, outdir.ANALYSIS, outdir.STEPS})
    own("model/io.py", {model_io.WEIGHTS, model_io.CONFIG, model_io.HF_CONFIG})
    own("run/checkpoint.py", {checkpoint.OPTIMIZER, checkpoint.RNG, checkpoint.STATE, checkpoint.MANIFEST})
    own("study/store.py", {store.SPEC, store.DB})
    own("claims/folder.py", {claims_folder.CLAIMS_JSON, claims_folder.HISTORY})
    builtin = set(logger_folders()) & {"tensorboard", "wandb"}
    assert builtin == {"tensorboard", "wandb"}, "the built-in loggers declare their folders"
    own("train/loggers.py", builtin)  # where each built-in logger declares its folder
    own("train/catalogue.py", builtin)  # ... also the loggers' registry names
    # Files of other formats that share a name with one of ours, each with its own single owner:
    own("data/hf_source.py", {checkpoint.STATE})  # a datasets ``save_to_disk`` folder's state.json
    own("data/shards.py", {checkpoint.MANIFEST})  # a token-shard folder's manifest.json
    # "report", "analysis" and "steps" are also the words of a command, an OutDir kind and a
    # config key, so the bare words are not searched: ``default_page``, ``RunDir.analysis_dir`` and
    # ``OutDir.step_dir`` are the ways to those folders, and the files inside are searched above.
    return out


STEP = re.compile(r"step_(\(|\\d|\{|%)")  # a pattern or template of a kept step's folder name
SQL = re.compile(r"\b(FROM|INTO|UPDATE|JOIN|TABLE(?: IF NOT EXISTS)?)\s+(trials|events)\b")


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}


def _prose(tree: ast.AST) -> set[int]:
    """The text parts of f-strings whose text has whitespace (a message: f"wrote {out}/x.csv")."""
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            parts = [v for v in n.values if isinstance(v, ast.Constant)]
            if re.search(r"\s", "".join(str(v.value) for v in parts)):
                out |= {id(v) for v in parts}
    return out


def spellings(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, what) of every owned spelling in ``source`` (the rules in the module docstring)."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _prose(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # f"step_{n:06d}": text then a formatted value
            parts = node.values
            for a, b in zip(parts, parts[1:]):
                if (isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.endswith("step_")
                        and isinstance(b, ast.FormattedValue)):
                    found.append((node.lineno, "step_ name"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
            if SQL.search(text):
                found.append((node.lineno, f"SQL on a store table: {text[:40]}"))
            if STEP.search(text):
                found.append((node.lineno, "step_ pattern"))
            if not re.search(r"\s", text):
                found += [(node.lineno, part) for part in text.split("/") if part in names]
        elif ((isinstance(node, ast.Attribute) and node.attr == "connect" and isinstance(node.value, ast.Name)
               and node.value.id == "sqlite3")
              or (isinstance(node, ast.ImportFrom) and node.module == "sqlite3"
                  and any(a.name == "connect" for a in node.names))):
            found.append((node.lineno, "sqlite3.connect"))
    return found


# the store, its lease protocol and its SQLite layer: one owner in three files
STORE = {"study/store.py", "study/store_leases.py", "study/store_db.py"}
OWNER_OF = {"step_ name": {"run/dir.py"}, "step_ pattern": {"run/dir.py"}, "sqlite3.connect": {"study/store_db.py"}}


def _owner(what: str, table: dict[str, set[str]]) -> set[str]:
    return STORE if what.startswith("SQL") else OWNER_OF.get(what) or table[what]


def _stray(module: str, source: str, table: dict[str, set[str]]) -> list[str]:
    """The spellings in ``module``'s ``source`` that belong to another module."""
    return [f"{module}:{line}: {what} (owner: {', '.join(sorted(_owner(what, table)))})"
            for line, what in spellings(source, set(table)) if module not in _owner(what, table)]


def test_every_owned_name_is_spelled_only_by_its_owner() -> None:
    table = owners()
    assert {"config.json", "model.safetensors", "model_config.json", "study.sqlite", "spec.json", "checkpoints",
            "state.json", "claims.json", "history.jsonl", "probe.csv", "series.json", "tensorboard"} <= set(table)
    stray = [s for path in sorted(SRC.rglob("*.py"))
             for s in _stray(path.relative_to(SRC).as_posix(), path.read_text(encoding="utf-8"), table)]
    assert stray == []


def test_the_search_finds_a_planted_spelling_and_passes_over_prose() -> None:
    planted = '''
"""Reads RUN/metrics.jsonl and the store's study.sqlite (a docstring: prose)."""
import sqlite3
a = run / "metrics.jsonl"
b = f"{root}/study.sqlite"
c = run / "checkpoints" / f"step_{step:06d}"
d = re.compile(r"step_(\\d+)")
e = conn.execute("SELECT id FROM trials WHERE status = 'running'")
f = sqlite3.connect(path)
g = "cannot read metrics.jsonl: it is damaged"
h = f"wrote {out}/metrics.jsonl and {out}/study.sqlite"
'''
    got = sorted(spellings(planted, set(owners())))
    assert [line for line, _ in got] == [4, 5, 6, 6, 7, 8, 9]  # not the docstring (2) nor the messages (10, 11)
    assert sorted(what for _, what in got) == sorted(["metrics.jsonl", "study.sqlite", "checkpoints", "step_ name",
                                                      "step_ pattern", "sqlite3.connect", got[5][1]])
    assert got[5][1].startswith("SQL on a store table")
    # ... and the real search reports a planted spelling as stray in any module but the owner's
    assert _stray("report/load.py", planted, owners()) and not _stray("run/dir.py", 'a = run / "metrics.jsonl"', owners())
