"""A 50-step training run on the device: checkpoints, a Ctrl-C stop at step 25 (no kill),
resume, and metrics equal bit for bit to the uninterrupted run on the same device.

The runs use torch's deterministic algorithms in strict mode
(``torch.use_deterministic_algorithms(True)``; with ``warn_only=True`` the flash and
memory-efficient attention backward kernels stay non-deterministic): the resume contract
is exact given deterministic kernels, and torch's default CUDA kernels are not all
deterministic (docs/training.md). Dropout is on, so the CUDA generator state must
round-trip through the checkpoint too.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
from pathlib import Path

import pytest
import torch

from normlab.core.fsutil import read_jsonl
from normlab.run.resolve import resolve
from normlab.train import run_training

pytestmark = pytest.mark.cuda

TIMING = ("time/", "tokens_per_s")  # wall-clock fields differ between identical runs
STEPS, STOP = 50, 25


def _cfg(device: torch.device, corpus: Path, dtype: str):
    sets = ["model.n_layer=2", "model.d_model=64", "model.n_head=4", "model.context=32", "model.dropout=0.1",
            "train.batch_size=8", f"train.steps={STEPS}", "train.eval_every=25", "train.eval_batches=2",
            "train.log_every=5", "train.checkpoint_every=10", "optim.warmup_steps=10",
            f"train.device={device.type}", f"train.dtype={dtype}", f"data.corpus={corpus}"]
    if device.type == "cpu":
        sets.append("train.threads=1")
    return resolve(None, None, None, sets)


def _metrics(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in read_jsonl(run / "metrics.jsonl")]


def _first_difference(a: list[dict], b: list[dict]) -> str:
    for x, y in zip(a, b):
        if x != y:
            keys = [k for k in x if x.get(k) != y.get(k)]
            return f"step {x.get('step')}: " + ", ".join(f"{k} {x.get(k)!r} vs {y.get(k)!r}" for k in keys)
    return f"{len(a)} vs {len(b)} rows"


@pytest.fixture(scope="module", autouse=True)
def _deterministic():
    was, warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(was, warn_only=warn)


@pytest.fixture(scope="module")
def reference(device, corpus, tmp_path_factory) -> dict[str, Path]:
    """One uninterrupted run per dtype, shared by the tests below."""
    out = {}
    for dtype in ("float32", "bfloat16"):
        run = tmp_path_factory.mktemp(f"ref-{dtype}") / "run"
        s = run_training(_cfg(device, corpus, dtype), run, quiet=True)
        assert s["status"] == "completed" and s["steps"] == STEPS, s
        out[dtype] = run
    return out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_run_is_on_the_device_and_reproducible(dtype, device, corpus, reference, tmp_path) -> None:
    env = json.loads((reference[dtype] / "env.json").read_text())
    assert env["device"].startswith(device.type), env["device"]
    run_training(_cfg(device, corpus, dtype), tmp_path / "again", quiet=True)
    a, b = _metrics(reference[dtype]), _metrics(tmp_path / "again")
    assert a == b, f"two identical {dtype} runs on {device.type} differ: {_first_difference(a, b)}"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ctrl_c_then_resume_is_bitwise_equal(dtype, device, corpus, reference, tmp_path, monkeypatch) -> None:
    import normlab.train.batches as batches

    real = batches.train_batch  # what Batches.get draws each micro-batch with
    params = inspect.signature(real)

    def batch_then_sigint(*args, **kw):  # Ctrl-C during step STOP: that step is dropped, the run stops at once
        if params.bind(*args, **kw).arguments["step"] == STOP - 1:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kw)

    run = tmp_path / "run"
    monkeypatch.setattr(batches, "train_batch", batch_then_sigint)
    first = run_training(_cfg(device, corpus, dtype), run, quiet=True)
    monkeypatch.setattr(batches, "train_batch", real)
    assert first["status"] == "interrupted" and first["steps"] == STOP - 1, first
    state = json.loads((run / "checkpoints" / "latest" / "state.json").read_text())
    assert state["loop"]["step"] == STOP - 1
    done = run_training(None, run, resume=True, quiet=True)
    assert done["status"] == "completed" and done["steps"] == STEPS, done
    got, want = _metrics(run), _metrics(reference[dtype])
    assert [r["step"] for r in got] == [r["step"] for r in want]
    assert got == want, f"resumed {dtype} run on {device.type} differs: {_first_difference(got, want)}"
