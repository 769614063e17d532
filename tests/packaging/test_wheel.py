"""normlab installs like a library: the sdist holds the sources, the wheel built from it holds the
package (with py.typed, without tests), and installed into a fresh virtual environment it answers
`normlab --help` and trains a smoke run, from outside the checkout with no PYTHONPATH.

The fresh environment takes torch & co. from this one through a .pth file (installing torch
anew takes tens of seconds); a .pth line only adds a directory to sys.path, so this
environment's editable normlab stays out, which the test checks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import normlab

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

pytestmark = pytest.mark.xdist_group("packaging-wheel")  # one worker builds the module's dists
ROOT = Path(normlab.__file__).resolve().parents[2]  # the checkout: pyproject.toml, README.md, src/
PACKAGE = ROOT / "src" / "normlab"
DATA = [PACKAGE / "py.typed", PACKAGE / "claims" / "catalogue" / "seen_priors.json"]  # pyproject's package-data
SOURCES = sorted(p.relative_to(ROOT / "src").as_posix() for p in [*PACKAGE.rglob("*.py"), *DATA])
VERSION = normlab.__version__
SDIST = "import sys\nfrom setuptools import build_meta as b\nprint(b.build_sdist(sys.argv[1]))\n"


def _run(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path]:
    """(sdist, wheel): the sdist from a copy of the checkout with setuptools' PEP 517 hook, the
    wheel by pip from that sdist, in the isolated build environment pyproject.toml asks for."""
    tmp = tmp_path_factory.mktemp("dist")
    tree = tmp / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "MANIFEST.in", "LICENSE", "CITATION.cff"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    sdist = tmp / "out" / _run([sys.executable, "-c", SDIST, str(tmp / "out")], tree).strip().splitlines()[-1]
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "out"), str(sdist)], tmp)
    return sdist, tmp / "out" / f"normlab-{VERSION}-py3-none-any.whl"


def test_the_sdist_holds_the_sources_and_the_wheel_the_package(dists) -> None:
    sdist, wheel = dists
    assert sdist.name == f"normlab-{VERSION}.tar.gz" and wheel.name == f"normlab-{VERSION}-py3-none-any.whl"
    with tarfile.open(sdist) as tar:
        in_sdist = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "LICENSE", "CITATION.cff"} <= in_sdist
    assert {f"src/{s}" for s in SOURCES} <= in_sdist

    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n for n in names if n.startswith("normlab/")) == SOURCES  # every module, and the package data
    info = f"normlab-{VERSION}.dist-info"
    assert {n.split("/")[0] for n in names} == {"normlab", info}  # no tests, nothing else at the top
    licenses = [n for n in names if n.startswith(f"{info}/") and n.rsplit("/", 1)[1] == "LICENSE"]
    assert len(licenses) == 1, names  # dist-info/LICENSE, or dist-info/licenses/LICENSE (PEP 639)
    assert zipfile.ZipFile(wheel).read(licenses[0]) == (ROOT / "LICENSE").read_bytes()
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert f"Version: {VERSION}" in metadata and "Provides-Extra: all" in metadata
    scripts = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    assert re.search(r"^normlab = normlab\.cli:main$", scripts, re.M)


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_venv_and_trains_there(dists, tmp_path, corpus) -> None:
    import torch

    _, wheel = dists
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "normlab-test-deps.pth").write_text(f"{Path(torch.__file__).resolve().parents[1]}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, capture_output=True, timeout=300)

    away = tmp_path / "elsewhere"  # outside the checkout, no PYTHONPATH: only the installed wheel
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("NORMLAB_")}
    env.update(OMP_NUM_THREADS="1", NORMLAB_CACHE_DIR=str(tmp_path / "cache"))

    def run(*argv: str | Path) -> str:
        done = subprocess.run([str(a) for a in argv], cwd=away, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    where, version = run(py, "-c", "import importlib.metadata as m, normlab\n"
                                   "print(normlab.__file__)\nprint(m.version('normlab'))").split()
    assert Path(where) == site / "normlab" / "__init__.py" and version == VERSION
    assert run(venv / "bin" / "normlab", "--version") == f"normlab {VERSION}\n"
    assert "train" in run(venv / "bin" / "normlab", "--help")

    run(venv / "bin" / "normlab", "train", "--preset", "smoke", "--set", "train.steps=3",
        "--set", f"data.corpus='{corpus}'", "--out", tmp_path / "run", "--quiet")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 3
    assert json.loads((tmp_path / "run" / "env.json").read_text())["normlab"] == VERSION


def test_the_changelog_releases_this_version() -> None:
    """The version is written once (normlab.__version__, read by pyproject.toml); the newest
    release heading of CHANGELOG.md must name it."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    top = re.search(r"^## \[(\d+\.\d+\.\d+)\]", text, re.M)
    assert top is not None, "CHANGELOG.md has no '## [x.y.z] - date' release heading"
    assert top.group(1) == VERSION
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'dynamic = ["version"]' in pyproject and 'version = { attr = "normlab.__version__" }' in pyproject


def test_the_license_and_the_citation_say_what_pyproject_says() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == {"text": "MIT"}
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the normlab developers\n")
    citation = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    cff = dict(re.findall(r"^([a-z-]+): *(\S.*)$", citation, re.M))  # the top-level one-line values
    # the keys CFF 1.2.0 requires, and the facts pyproject.toml also states (the whole file was
    # checked against the CFF 1.2.0 JSON schema when written; `cffconvert --validate` does it)
    assert cff["cff-version"] == "1.2.0" and cff["message"] and cff["title"]
    assert re.search(r"^authors:\n  - name: \S", citation, re.M)
    assert cff["version"] == VERSION and cff["license"] == "MIT" and cff["type"] == "software"


def test_the_all_extra_is_every_optional_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    (only,) = extras["all"]
    named = re.fullmatch(r"normlab\[([a-z,]+)\]", only)
    assert named is not None and set(named.group(1).split(",")) == set(extras) - {"all", "dev"}
