"""The CUDA checks (``pytest -m cuda tests/cuda``; ``benchmarks/gpu_check.py`` runs them first).

Without a CUDA device every test here is skipped with the reason "no CUDA device". With
``NORMLAB_TEST_DEVICE=cpu`` they run on the CPU instead: ``gpu_check.py --dry-run`` does
that inside the test suite, so the checks themselves cannot rot on machines without a GPU.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

# cuBLAS is deterministic only with a fixed workspace; the variable is read when the first
# handle is made, so it is set here, before any test touches CUDA.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


@pytest.fixture(scope="session")
def device() -> torch.device:
    if os.environ.get("NORMLAB_TEST_DEVICE") == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False); "
                    "NORMLAB_TEST_DEVICE=cpu runs these checks on the CPU")
    return torch.device("cuda")


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded 60 kB text file standing in for Tiny Shakespeare (a GPU box may lack it)."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 8)))
             for _ in range(300)]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))).capitalize() + rng.choice(".,;!?")
             for _ in range(2000)]
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
