"""Print how the running environment differs from the lock: `python drift.py requirements/lock.txt`.

`make test-latest` runs it in a venv of the newest versions in range, so a developer sees the
drift (a new transformers, say) before a user meets it. It reads the lock's `name==version` lines
and the installed distributions; standard library only, since it runs before anything is checked.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(path: str) -> dict[str, str]:
    pins = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", line)
            if m:
                pins[canonical(m.group(1))] = m.group(2)
    return pins


def installed() -> dict[str, str]:
    return {canonical(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python drift.py LOCKFILE", file=sys.stderr)
        return 2
    lock, have = locked(argv[0]), installed()
    have.pop("normlab", None)  # the checkout itself, installed editable
    if "torch" in have and "torch" in lock and have["torch"] != lock["torch"]:
        print(f"drift: torch is {have['torch']}, not the lock's {lock['torch']}: make test-latest holds torch at "
              "requirements/torch.in's pin; a venv with another torch measures something else")
    newer = [(n, lock[n], have[n]) for n in sorted(lock) if n in have and have[n] != lock[n]]
    extra = [(n, have[n]) for n in sorted(set(have) - set(lock)) if n not in ("pip", "wheel")]
    gone = [(n, lock[n]) for n in sorted(set(lock) - set(have)) if n not in ("pip",)]
    if not (newer or extra or gone):
        print(f"drift: the newest versions in range are the lock's ({len(lock)} packages)")
        return 0
    print(f"drift: {len(newer)} packages differ from {argv[0]}, {len(extra)} new, {len(gone)} no longer installed")
    for n, a, b in newer:
        print(f"  {n}: {a} (lock) -> {b}")
    for n, b in extra:
        print(f"  {n}: not in the lock -> {b}")
    for n, a in gone:
        print(f"  {n}: {a} (lock) -> not installed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
