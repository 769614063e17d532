"""A small corpus for the packaging tests' smoke runs (no download, no shared copy needed)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    words = "the quick brown fox jumps over a lazy dog while normalization keeps the stream steady".split()
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(" ".join(words[(i * 7 + j) % len(words)] for j in range(9)) for i in range(600)))
    return path
