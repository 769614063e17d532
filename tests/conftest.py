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
