"""A throwaway git repository for the pre-registration tests: commits at chosen times."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def need_git() -> None:
    """Skip without git, unless NORMLAB_REQUIRE_GIT=1 (CI), where a missing git fails."""
    if shutil.which("git") is None:
        if os.environ.get("NORMLAB_REQUIRE_GIT") == "1":
            pytest.fail("git is not installed, and NORMLAB_REQUIRE_GIT=1 says these checks must run")
        pytest.skip("git is not installed (NORMLAB_REQUIRE_GIT=1 makes this a failure)")


def git(repo: Path, *args: str, at: int | None = None) -> str:
    """Run git in ``repo`` (committer and author time ``at``, seconds since the epoch)."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    if at is not None:
        env["GIT_COMMITTER_DATE"] = env["GIT_AUTHOR_DATE"] = f"{at} +0000"
    done = subprocess.run(["git", "-c", "user.name=Lab", "-c", "user.email=lab@example.org", "-C", str(repo), *args],
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    return path


def commit(path: Path, file: Path, at: int) -> str:
    """Commit ``file`` at time ``at``; returns the commit hash."""
    git(path, "add", str(file.relative_to(path)))
    git(path, "commit", "-q", "-m", f"register {file.name}", at=at)
    return git(path, "rev-parse", "HEAD")
