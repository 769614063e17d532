"""Tiny runs for the training tests: a 2-layer d=32 model, tens of steps, one thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.core.fsutil import read_jsonl
from normlab.run.resolve import resolve

TIMING = ("time/", "tokens_per_s")  # fields that legitimately differ between identical runs

TINY = ["model.n_layer=2", "model.d_model=32", "model.n_head=2", "model.context=16",
        "train.batch_size=4", "train.steps=30", "train.eval_every=10", "train.eval_batches=2",
        "train.log_every=5", "train.checkpoint_every=10", "train.threads=1", "optim.warmup_steps=5"]


def tiny_args(*extra: str) -> list[str]:
    """--set arguments for a tiny run (later ones win)."""
    out: list[str] = []
    for item in [*TINY, *extra]:
        out += ["--set", item]
    return out


def tiny_cfg(*extra: str, placement: str | None = None):
    return resolve(None, None, placement, [*TINY, *extra])


def comparable(run_dir: Path) -> list[dict]:
    """metrics.jsonl without wall-clock fields."""
    return [{k: v for k, v in row.items() if not k.startswith(TIMING)}
            for row in read_jsonl(Path(run_dir) / "metrics.jsonl")]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Token caches go to a per-session temp dir, never the user's ~/.cache.
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    _no_network(monkeypatch)


def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.data import source

    def refuse(url: str, dest: Path, timeout: float = 30.0) -> None:
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(source, "download", refuse)


@pytest.fixture
def tiny(data_dir: Path):
    """Helpers (the runs need the corpus: skipped without it) for tiny runs: ``tiny.args(...)``, ``tiny.cfg(...)``, ``tiny.comparable(run)``."""
    import types

    return types.SimpleNamespace(args=tiny_args, cfg=tiny_cfg, comparable=comparable)
