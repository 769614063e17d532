"""Shared fixtures. Tests never touch the network: the corpus comes from NORMLAB_DATA_DIR,
or from the shared copy beside the checkout (../shared/data) when it exists."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("NORMLAB_DATA_DIR") and (_SHARED / "tinyshakespeare.txt").exists():
        os.environ["NORMLAB_DATA_DIR"] = str(_SHARED)
    torch.set_num_threads(1)  # tiny models: one thread is faster and keeps runs reproducible


@pytest.fixture
def data_dir() -> Path:
    """Directory holding tinyshakespeare.txt; skips the test when the corpus is absent."""
    d = os.environ.get("NORMLAB_DATA_DIR")
    if not d or not (Path(d) / "tinyshakespeare.txt").exists():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    return Path(d)


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
