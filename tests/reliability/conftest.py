"""Tiny runs for fault injection: a 2-layer d=32 model, 40 steps, dropout on (so RNG state matters)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Callable

import pytest

from normlab.core.fsutil import read_jsonl
from normlab.run.resolve import resolve

TIMING = ("time/", "tokens_per_s")  # fields that legitimately differ between identical runs

TINY = ["model.n_layer=2", "model.d_model=32", "model.n_head=2", "model.context=16", "model.dropout=0.1",
        "train.batch_size=4", "train.steps=40", "train.eval_every=20", "train.eval_batches=2",
        "train.log_every=5", "train.checkpoint_every=10", "train.threads=1", "optim.warmup_steps=5"]


def tiny_cfg(*extra: str):
    return resolve(None, None, None, [*TINY, *extra])


def comparable(run_dir: Path) -> list[dict]:
    """metrics.jsonl without wall-clock fields."""
    return [{k: v for k, v in row.items() if not k.startswith(TIMING)}
            for row in read_jsonl(Path(run_dir) / "metrics.jsonl")]


def die() -> None:
    """SIGKILL this process: no finally blocks, no atexit, no flush (what the OOM killer does)."""
    os.kill(os.getpid(), signal.SIGKILL)


def in_child(fn: Callable[[], None]) -> int:
    """Run ``fn`` in a forked child (torch already imported: ~0.1 s, not a new interpreter).

    Returns the signal that ended the child, 0 if ``fn`` returned, -1 if it raised.
    """
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            fn()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Token caches go to a per-session temp dir, never the user's ~/.cache; no downloads.
    monkeypatch.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    from normlab.data import source

    def refuse(url: str, dest: Path, timeout: float = 30.0) -> None:
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(source, "download", refuse)


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, shared_dir) -> list[dict]:
    """Metrics of the uninterrupted tiny run (computed once per session, for every worker)."""
    from normlab.train import run_training

    d = os.environ.get("NORMLAB_DATA_DIR")
    if not d or not (Path(d) / "tinyshakespeare.txt").exists():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")

    def build(out: Path) -> None:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
            run_training(tiny_cfg(), out / "run", quiet=True)

    return comparable(shared_dir("reliability-reference", build) / "run")
