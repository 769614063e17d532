"""The lock (requirements/lock.txt) holds everything the two commands and CI install.

`make setup` installs the lock with ``--require-hashes --no-deps``: a distribution the code
imports but the lock lacks would be missing on a fresh clone, and one the lock pins outside
pyproject.toml's range would be a lock the package itself refuses. These tests read the lock as
text and the installed metadata; they hold in any venv made from the lock.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version
from test_declared_imports import PROJECT, ROOT, _norm, distributions, imported

LOCK = ROOT / "requirements" / "lock.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*\\?$")


def locked() -> dict[str, tuple[Version, list[str]]]:
    """Distribution -> (version, its sha256 hashes), from the lock's ``name==version`` entries."""
    out: dict[str, tuple[Version, list[str]]] = {}
    name = ""
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if m := PIN.match(line):
            name = _norm(m.group(1))
            out[name] = (Version(m.group(2)), [])
        elif (h := re.match(r"^\s+--hash=sha256:([0-9a-f]{64})", line)) and name:
            out[name][1].append(h.group(1))
    return out


def local_modules() -> set[str]:
    """Modules the tests and benchmarks import from their own folders (helpers, not packages)."""
    found = set()
    for folder in ("tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            found.add(path.stem)
            found.update(p.name for p in path.relative_to(ROOT / folder).parents if p.name)
    return found


def imports_of(*folders: str) -> dict[str, str]:
    """Top-level third-party module -> where it is first imported, over the folders' .py files."""
    skip = set(sys.stdlib_module_names) | {"normlab", "__future__"} | local_modules()
    out: dict[str, str] = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for module, line in imported(path.read_text(encoding="utf-8")).items():
                if module not in skip:
                    out.setdefault(module, f"{path.relative_to(ROOT)}:{line}")
    return out


def requirements() -> list[tuple[str, Requirement]]:
    """(where, requirement) for every dependency and every extra's entry, normlab's own excluded."""
    out = [("dependencies", Requirement(s)) for s in PROJECT["dependencies"]]
    for extra, specs in PROJECT["optional-dependencies"].items():
        out += [(f"extra {extra}", Requirement(s)) for s in specs]
    return [(w, r) for w, r in out if _norm(r.name) != "normlab"]


def test_the_lock_parses_and_every_pin_is_hashed() -> None:
    pins = locked()
    assert len(pins) > 50, f"{LOCK}: only {len(pins)} pins read; is the file a pip-compile lock?"
    unhashed = sorted(n for n, (_, hashes) in pins.items() if not hashes)
    assert not unhashed, f"pins without a hash (pip --require-hashes refuses them): {unhashed}"
    assert "normlab" not in pins, "the lock pins normlab itself; the checkout is installed editable on top"
    assert str(pins["torch"][0]).endswith("+cpu"), "the lock's torch must be the CPU build (torch==2.13.0+cpu)"


def test_the_lock_covers_every_import_of_the_package_its_tests_and_benchmarks() -> None:
    modules = imports_of("src", "tests", "benchmarks")
    assert {"torch", "pytest", "transformers", "ray", "pandas"} <= set(modules)  # the scan sees all three trees
    pins, env = locked(), default_environment()
    # a distribution declared only for other interpreters (tomli before 3.11) is imported only there
    elsewhere = {_norm(r.name) for _, r in requirements() if r.marker is not None and not r.marker.evaluate(env)}
    missing = [f"{m} ({where})" for m, where in sorted(modules.items())
               if not distributions(m) & (set(pins) | elsewhere)]
    assert not missing, f"imported but not in {LOCK.relative_to(ROOT)} (run make lock): " + "; ".join(missing)


def test_every_declared_requirement_and_extra_is_locked_inside_its_range() -> None:
    pins, env = locked(), default_environment()
    problems = []
    for where, req in requirements():
        if req.marker is not None and not req.marker.evaluate(env):
            continue  # tomli on Python < 3.11: not this interpreter's
        pin = pins.get(_norm(req.name))
        if pin is None:
            problems.append(f"{req} ({where}) is not in the lock")
        elif not req.specifier.contains(pin[0], prereleases=True):
            problems.append(f"{req} ({where}) but the lock pins {pin[0]}")
    assert not problems, "; ".join(problems)


def test_the_lock_is_closed_under_its_packages_own_requirements() -> None:
    """What each locked distribution asks for (no extras) is locked too, in its range; otherwise
    ``pip install --no-deps -r lock.txt`` leaves a hole that only shows at import time."""
    pins, env = locked(), default_environment()
    holes = []
    for name, (version, _) in sorted(pins.items()):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a venv other than the lock's (make test-latest): nothing to read
        if Version(dist.version) != version:
            continue
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
                continue
            pin = pins.get(_norm(req.name))
            if pin is None or not req.specifier.contains(pin[0], prereleases=True):
                holes.append(f"{name} {version} needs {req}; the lock has {pin[0] if pin else 'nothing'}")
    assert not holes, "; ".join(holes)


def test_the_lock_reader_sees_a_missing_pin_and_a_range_the_lock_breaks(tmp_path: Path, monkeypatch) -> None:
    """The checks above can fail: a lock without numpy, and one pinning numpy below the floor."""
    text = LOCK.read_text(encoding="utf-8")
    dropped = re.sub(r"(?ms)^numpy==.*?(?=^\S)", "", text)
    lowered = re.sub(r"(?m)^numpy==\S+", "numpy==1.0.0", text)
    for body, needle in ((dropped, "numpy"), (lowered, "1.0.0")):
        lock = tmp_path / "lock.txt"
        lock.write_text(body, encoding="utf-8")
        monkeypatch.setattr(sys.modules[__name__], "LOCK", lock)
        try:
            test_every_declared_requirement_and_extra_is_locked_inside_its_range()
        except AssertionError as e:
            assert needle in str(e)
        else:
            raise AssertionError(f"a lock with {needle!r} broken passed the range check")
