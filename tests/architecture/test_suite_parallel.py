"""The suite's parallel machinery (tests/conftest.py): ``shared_dir`` builds once and never
hands out half a build; every netns test is in one xdist group; long tests are handed out first;
`make test` runs the workers and prints the slowest tests."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_shared_dir_builds_once_and_a_failed_build_leaves_nothing(shared_dir) -> None:
    name = f"selftest-{uuid.uuid4().hex}"  # unique: the shared root is the whole run's, every worker's
    calls: list[str] = []

    def broken(path: Path) -> None:
        calls.append("broken")
        (path / "half").write_text("a file of a build that then fails")
        raise RuntimeError("the build failed")

    def build(path: Path) -> None:
        calls.append("build")
        (path / "whole").write_text("done")

    with pytest.raises(RuntimeError, match="the build failed"):
        shared_dir(name, broken)
    got = shared_dir(name, build)  # the failed build is not handed out: built again, whole
    assert shared_dir(name, lambda path: calls.append("again")) == got  # then never rebuilt
    assert calls == ["broken", "build"] and os.listdir(got) == ["whole"]


def test_netns_tests_share_one_group_and_long_tests_come_first(request: pytest.FixtureRequest) -> None:
    items = request.session.items
    netns = [i for i in items if i.get_closest_marker("netns")]

    def group(item: pytest.Item) -> str:  # the Ray tests' cluster group, or the Slurm tests' own
        return "slurm" if "slurm_cluster" in getattr(item, "fixturenames", ()) else "netns"

    assert all(i.get_closest_marker("xdist_group").args == (group(i),) for i in netns), netns
    if getattr(request.config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        # pytest-xdist schedules by the "@group" it appends to the node id when it collects: a
        # marker added after that is ignored, and the netns tests would spread over the workers
        assert all(i.nodeid.endswith(f"@{group(i)}") for i in netns), [i.nodeid for i in netns]

    def rank(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("netns") else 1 if item.get_closest_marker("slow") else 2

    ranks = [rank(i) for i in items]
    assert ranks == sorted(ranks), "a long test comes after a short one"


def test_the_groups_are_marked_before_pytest_xdist_reads_them(request: pytest.FixtureRequest) -> None:
    """The suite's collection hook runs first (tryfirst): pytest-xdist's own, which turns the
    xdist_group markers into the groups it schedules by, then sees the netns group. Without it
    the netns tests of one module ran on both workers, each starting the module's clusters."""
    hook = request.config.pluginmanager.hook.pytest_collection_modifyitems
    (ours,) = [i for i in hook.get_hookimpls() if getattr(i.plugin, "__file__", "") == str(ROOT / "tests" / "conftest.py")]
    assert ours.tryfirst


def test_make_test_runs_workers_and_prints_the_slowest_tests() -> None:
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe is not None
    pytest_line = " ".join(line.strip().rstrip("\\") for line in recipe[1].splitlines() if "pytest" in line
                           or line.strip().startswith("--"))
    for option in ("-n $(TEST_WORKERS)", "--dist loadgroup", "--durations=15"):
        assert option in pytest_line, (option, pytest_line)
