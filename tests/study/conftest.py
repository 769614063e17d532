"""Study test helpers: fake trials importable from worker processes, tiny real-training specs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


@pytest.fixture
def fake_path(monkeypatch: pytest.MonkeyPatch) -> str:
    """Makes ``fake_trials`` importable here and in spawned workers; returns the trial prefix."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), str(SRC), os.environ.get("PYTHONPATH", "")]))
    return "fake_trials"


TINY_BASE = """
[base.model]
n_layer = 2
d_model = 32
n_head = 2
context = 32
[base.optim]
lr = 3e-3
min_lr = 3e-4
warmup_steps = 2
[base.train]
steps = {steps}
batch_size = 8
eval_every = {every}
eval_batches = 2
log_every = 2
checkpoint_every = {ckpt}
"""


def tiny_spec(path: Path, *, name: str = "tiny", steps: int = 12, every: int = 6, ckpt: int = 6,
              seeds: str = "[0, 1]", axes: str = '"model.placement" = ["post", "pre"]', extra: str = "") -> Path:
    """Writes a study TOML of tiny real trainings (2 blocks, d=32) and returns its path."""
    path.write_text(f'name = "{name}"\nseeds = {seeds}\n{extra}\n'
                    + TINY_BASE.format(steps=steps, every=every, ckpt=ckpt) + f"\n[axes]\n{axes}\n")
    return path


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "normlab", *args]


@pytest.fixture(scope="module")
def _slurm_daemons():
    """One Slurm cluster per test module, started in the module's network namespace."""
    from netns import INSIDE

    from .slurm_cluster import REQUIRE, SlurmCluster, add_loopback_address, unavailable

    reason = unavailable()  # outside the namespace: installs Slurm where it is missing (apt needs the network)
    if reason:
        if os.environ.get(REQUIRE):
            pytest.fail(reason)
        pytest.skip(reason)
    if not os.environ.get(INSIDE):  # the test body runs in its namespace (tests/netns.py), not here
        yield None
        return
    add_loopback_address()
    with SlurmCluster() as cluster:
        yield cluster


@pytest.fixture
def slurm_cluster(_slurm_daemons, tmp_path: Path):
    """A running one-node Slurm cluster (tests/study/slurm_cluster.py), shared by the module's tests.

    A test that takes it runs in its own network namespace, in the ``slurm`` xdist_group
    (tests/conftest.py marks it); ``tmp_path`` is what tests/netns.py keeps the inner run's files in.
    After each test its jobs are cancelled and the node is back up, so no test sees another's."""
    yield _slurm_daemons
    if _slurm_daemons is not None:
        _slurm_daemons.clean()
