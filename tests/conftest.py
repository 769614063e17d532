"""Shared fixtures. Tests never touch the network: the corpus comes from NORMLAB_DATA_DIR,
or from the shared copy beside the checkout (../shared/data) when it exists.

The suite runs in parallel (``make test``: pytest-xdist, one worker more than the machine has
cores, ``--dist loadgroup``), so:

- ``shared_dir(name, build)`` builds an expensive read-only output once per session, for every
  worker (a file lock beside the workers' temp dirs); a test that changes what it gets copies it;
- every ``netns`` test (a Ray cluster in its own namespace) runs in one ``xdist_group``, on one
  worker at a time: each cluster already keeps both cores busy; the netns tests of one module run
  together in one namespace (tests/netns.py), so clusters a class shares start once;
- every test taking ``slurm_cluster`` runs in a namespace too, in the ``slurm`` group: one Slurm
  cluster at a time, beside the Ray one (its daemons idle but for the jobs it runs);
- tests that read one expensive fixture share an ``xdist_group`` too (the quick claims run), so
  no worker waits on the lock while another builds it;
- tests marked ``slow`` (and the netns group) are handed out first, so that no long test
  starts last while the other worker sits idle.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

import pytest
import torch

_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
NETNS_GROUP = "netns"  # the xdist_group of every Ray test (one cluster at a time)
SLURM_GROUP = "slurm"  # ... and of every test taking the slurm_cluster fixture (tests/study/slurm_cluster.py)


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("NORMLAB_DATA_DIR") and (_SHARED / "tinyshakespeare.txt").exists():
        os.environ["NORMLAB_DATA_DIR"] = str(_SHARED)
    torch.set_num_threads(1)  # tiny models: one thread is faster and keeps runs reproducible
    # ... in the processes tests start too (normlab train, study workers): with one pytest worker
    # per core, a second thread each would only fight the other worker for the cores
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups when it runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long tests first (a stable sort: the rest keep their order), netns tests in one group,
    Slurm tests in theirs, each in its network namespace: its cluster's ports clash with nothing,
    and what a test leaves running dies with the namespace."""
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            if item.get_closest_marker("netns") is None:
                item.add_marker(pytest.mark.netns)
            if item.get_closest_marker("xdist_group") is None:
                item.add_marker(pytest.mark.xdist_group(SLURM_GROUP))
        if item.get_closest_marker("netns") is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(NETNS_GROUP))

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("netns") is not None:
            return 0  # the longest unit of work: one worker runs the whole group
        return 1 if item.get_closest_marker("slow") is not None else 2

    items.sort(key=rank)


@pytest.fixture
def data_dir() -> Path:
    """Directory holding tinyshakespeare.txt; skips the test when the corpus is absent."""
    d = os.environ.get("NORMLAB_DATA_DIR")
    if not d or not (Path(d) / "tinyshakespeare.txt").exists():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    return Path(d)


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory,
               request: pytest.FixtureRequest) -> Callable[[str, Callable[[Path], None]], Path]:
    """``shared_dir(name, build)``: the directory ``build(path)`` fills, built once per session.

    Under pytest-xdist each worker has its own session, so the directory lives beside the
    workers' temp dirs and a file lock makes one worker build it while the others wait (the
    pytest-xdist docs' pattern). ``build`` fills a temporary sibling that is renamed into place
    when complete, so a build that fails is retried by the next test that asks, never half
    read. Tests must not change what they get (copy it first).
    """
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if hasattr(request.config, "workerinput") else base  # xdist worker: the run's dir

    def get(name: str, build: Callable[[Path], None]) -> Path:
        done = root / f"shared-{name}"
        with FileLock(str(root / f"shared-{name}.lock")):
            if not done.is_dir():
                tmp = root / f"shared-{name}.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                tmp.mkdir()
                build(tmp)
                tmp.rename(done)
        return done

    return get


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """``@pytest.mark.netns(timeout=S)``: run the test in its own network namespace (tests/netns.py)."""
    from netns import INSIDE, run_inside

    mark = pyfuncitem.get_closest_marker("netns")
    if mark is None or os.environ.get(INSIDE):
        return None
    if "tmp_path" not in pyfuncitem.funcargs:
        raise pytest.UsageError(f"{pyfuncitem.nodeid}: a netns test takes tmp_path (Ray's files go there)")
    run_inside(pyfuncitem, float(mark.kwargs.get("timeout", 600)))
    return True
