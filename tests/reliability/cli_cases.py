"""Run CLI commands in one process and report how each ended (imported by test_paths.py, and run
as a script inside a private mount namespace for the read-only cases).

``python cli_cases.py CASES.json RESULTS.json``: CASES is a list of argv lists; RESULTS gets,
per case, the exit status, stderr, and the traceback text when one escaped ``normlab.cli.main``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import traceback
from pathlib import Path


def run_case(argv: list[str]) -> dict:
    """``normlab ARGV`` in this process: {"rc", "err", "traceback"} (traceback None when none escaped)."""
    from normlab.cli import main

    err, out = io.StringIO(), io.StringIO()
    tb = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: B036 (a traceback is exactly what the test looks for)
            rc, tb = 1, traceback.format_exc()
    return {"argv": argv, "rc": rc, "err": err.getvalue(), "traceback": tb}


def digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (SQLite's -wal/-shm side files excepted: they come and go)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    cases = json.loads(open(sys.argv[1], encoding="utf-8").read())
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump([run_case(argv) for argv in cases], fh)


def cli_arguments() -> list[tuple[tuple[str, ...], argparse.Action]]:
    """(the command's words, the argument) for every argument of every subcommand of the CLI."""
    from normlab.cli import build_parser

    found: list[tuple[tuple[str, ...], argparse.Action]] = []

    def walk(p: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    walk(sub, (*prefix, name))
            else:
                found.append((prefix, a))

    walk(build_parser(), ())
    return found


def trained_run(tmp_path_factory, name: str, *overrides: str) -> Path:
    """ROOT/run: a tiny run trained on Tiny Shakespeare under a fresh ROOT (a module's world),
    its token cache in the session's temp dir; skips without the corpus."""
    import os

    import pytest

    from normlab.train import run_training

    from .conftest import tiny_cfg

    d = os.environ.get("NORMLAB_DATA_DIR")
    if not d or not (Path(d) / "tinyshakespeare.txt").exists():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    root = tmp_path_factory.mktemp(name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        run_training(tiny_cfg(*overrides), root / "run", quiet=True)
    return root / "run"
