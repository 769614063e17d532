from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Token caches go to a per-session temp dir, never the user's ~/.cache.
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    from normlab.data import source

    def refuse(url, dest, timeout=30.0):
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(source, "download", refuse)  # tests that need a download patch their own
