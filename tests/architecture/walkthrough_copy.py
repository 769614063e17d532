"""A temporary copy of the checkout in which a walkthrough of docs/architecture.md is done for
real: its files changed by a scripted recipe, counted by git, and the tests that enforce the
change run there (``tests/architecture/test_walkthroughs.py``).

The copy holds the tracked files (and untracked ones git does not ignore, so that a change not
yet committed is copied too) except the published evidence (``docs/evidence/``, 17 MB that no
walkthrough reads or writes); it is its own git repository with one commit, so ``git status``
names exactly what the recipe touched, new files included. Its tests run in a fresh interpreter
with the copy's ``src`` first on the path and the copy as rootdir: its own conftest files, never
the checkout's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
LEFT_OUT = ("docs/evidence/",)  # published runs: no change of a walkthrough reads or writes them
TOP = {"src", "tests", "docs", "requirements", "benchmarks"}  # a heading's other paths are under src/normlab/
HEADING = re.compile(r"^#+ (?P<title>[^(\n]+?) \(files touched: (?P<n>\d+): (?P<files>.*)\)\s*$", re.M)
PATH = re.compile(r"`([\w./-]+\.(?:py|md|toml|txt|cfg))`")


def walkthrough(title: str) -> tuple[int, list[str]]:
    """(N, the files) of the heading of docs/architecture.md that starts with ``title``: each file a
    backticked path, written as the page writes paths (``model/catalogue.py`` for src/normlab/...)."""
    found = [m for m in HEADING.finditer(ARCHITECTURE.read_text(encoding="utf-8")) if m["title"] == title]
    assert len(found) == 1, f"docs/architecture.md: no single heading '{title} (files touched: N: ...)'"
    files = [f if f.split("/")[0] in TOP or "/" not in f else f"src/normlab/{f}" for f in PATH.findall(found[0]["files"])]
    return int(found[0]["n"]), files


def page_code(title: str) -> str:
    """The first python block of the walkthrough headed ``title``, without its imports: what the
    recipe puts into a module that has them (the page's block runs as it is in test_docs_run.py)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = next(m.end() for m in HEADING.finditer(text) if m["title"] == title)
    section = re.split(r"^#{1,3} ", text[start:], maxsplit=1, flags=re.M)[0]
    m = re.search(r"^( *)```python\n(.*?)^\1```", section, re.S | re.M)
    assert m, f"docs/architecture.md: no python block under '{title}'"
    lines = [x[len(m[1]):] for x in m[2].splitlines()]
    while lines and (not lines[0].strip() or lines[0].startswith(("from ", "import "))):
        lines.pop(0)
    return "\n".join(lines) + "\n"


def _sources() -> list[str]:
    """Repository-relative paths of what the copy holds."""
    if (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        paths = [p for p in out.split("\0") if p]
    else:  # an unpacked source tree: what the walkthroughs can touch
        paths = [p.relative_to(ROOT).as_posix() for top in ("src", "tests", "docs", "requirements")
                 for p in (ROOT / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        paths += [p for p in ("README.md", "pyproject.toml", ".gitignore") if (ROOT / p).is_file()]
    return [p for p in paths if not p.startswith(LEFT_OUT) and (ROOT / p).is_file()]


class Copy:
    """The checkout copied under ``tmp`` and committed there; ``edit`` methods fail unless their
    anchor is found exactly once, so a recipe that no longer fits the code says where."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.root = tmp, tmp / "repo"
        for rel in _sources():
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / rel, self.root / rel)
        self.git("init", "-q")
        self.git("add", "-A")
        self.git("-c", "user.name=walkthrough", "-c", "user.email=walkthrough@localhost", "-c", "commit.gpgsign=false",
                 "commit", "-q", "--no-verify", "-m", "the checkout")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True, check=True).stdout

    def text(self, rel: str) -> str:
        return (self.root / rel).read_text(encoding="utf-8")

    def write(self, rel: str, text: str) -> None:
        (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.root / rel).write_text(text, encoding="utf-8")

    def insert(self, rel: str, anchor: str, text: str, before: bool = False) -> None:
        """``text`` (whole lines, kept as given) after the line that matches the regex ``anchor``
        (or before it)."""
        src = self.text(rel)
        hits = list(re.finditer(anchor, src, re.M))
        assert len(hits) == 1, f"{rel}: the anchor {anchor!r} matches {len(hits)} times, not once"
        at = src.rfind("\n", 0, hits[0].start()) + 1 if before else src.find("\n", hits[0].end()) + 1
        self.write(rel, src[:at] + text + ("" if text.endswith("\n") else "\n") + src[at:])

    def between(self, rel: str, start: str, end: str, text: str) -> None:
        """``text`` in place of what lies between the markers ``start`` and ``end``."""
        src = self.text(rel)
        assert src.count(start) == 1 and src.count(end) == 1, f"{rel}: no single {start} ... {end}"
        head, rest = src.split(start)
        self.write(rel, head + start + "\n" + text.strip("\n") + "\n" + end + rest.split(end)[1])

    def replace(self, rel: str, old: str, new: str) -> None:
        src = self.text(rel)
        assert src.count(old) == 1, f"{rel}: {old!r} occurs {src.count(old)} times, not once"
        self.write(rel, src.replace(old, new))

    def append(self, rel: str, text: str) -> None:
        self.write(rel, self.text(rel).rstrip("\n") + "\n\n\n" + text.strip("\n") + "\n")

    def changed(self) -> set[str]:
        """Every file that differs from the commit, untracked ones included (``git status``)."""
        out = self.git("status", "--porcelain", "--untracked-files=all", "-z")
        return {entry[3:] for entry in out.split("\0") if entry}

    def undo(self, rel: str) -> None:
        """``rel`` back as committed (removed when the recipe created it)."""
        if self.git("ls-files", "--", rel).strip():
            self.git("checkout", "--", rel)
        else:
            (self.root / rel).unlink()

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
        env.update(PYTHONPATH=str(self.root / "src"), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYTHONDONTWRITEBYTECODE="1", NORMLAB_CACHE_DIR=str(self.tmp / "cache"))
        return env

    def python(self, *args: str) -> str:
        """``python args`` in the copy (its src first on the path); its stdout."""
        done = subprocess.run([sys.executable, *args], cwd=self.root, env=self.env(), capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout

    def pytest(self, *ids: str) -> tuple[dict[str, str], str]:
        """({test id: PASSED, FAILED or ERROR}, the output) of the tests ``ids`` run in the copy."""
        base = self.tmp / f"pytest-{len(list(self.tmp.glob('pytest-*')))}"
        done = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-q", "-rA",
                               f"--basetemp={base}", *ids], cwd=self.root, env=self.env(), capture_output=True,
                              text=True)
        out = done.stdout + done.stderr
        return dict((m[2], m[1]) for m in re.finditer(r"^(PASSED|FAILED|ERROR) (\S+)", out, re.M)), out
