"""Corpora bigger than memory: prepare a corpus several times larger than the memory it is
allowed, then train from its shards and resume bit for bit (issue 33, item 3)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from normlab.core.fsutil import read_jsonl

ALLOWED = 16 << 20        # bytes of peak RSS prepare may add to an idle interpreter's
CORPUS = 4 * ALLOWED      # the corpus is 4x that allowance (and larger than the whole bound)
IMPORTS = ("import normlab.cli, normlab.cli.data_cmd, normlab.data.prepare, normlab.data.stream, "
           "normlab.data.catalogue, normlab.core.progress")
# The peak RSS of this process image: Linux's VmHWM. (ru_maxrss would not do: a child spawned
# by pytest starts from the high-water mark of the pytest process it was forked from.)
PEAK = ("import sys\n"
        "hwm = [x for x in open('/proc/self/status') if x.startswith('VmHWM:')][0].split()\n"
        "print(int(hwm[1]) * 1024, 'torch' in sys.modules)\n")


def _corpus(path: Path) -> None:
    """CORPUS bytes of words and newlines (some non-ASCII), written a block at a time."""
    rng = np.random.default_rng(33)
    words = np.array(["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "naïve", "Œuvre", "\n"])
    with open(path, "w", encoding="utf-8") as fh:
        while fh.tell() < CORPUS:
            fh.write(" ".join(rng.choice(words, 100_000)))


def _peak(code: str) -> tuple[int, bool]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", f"{IMPORTS}\n{code}\n{PEAK}"], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    peak, torch = res.stdout.split()[-2:]
    return int(peak), torch == "True"


def _cfg(shards: Path, *extra: str):
    from normlab.run.resolve import resolve

    return resolve(None, None, None, [
        f"data.corpus={shards}", "model.n_layer=2", "model.d_model=32", "model.n_head=2", "model.context=16",
        "train.batch_size=4", "train.steps=12", "train.eval_every=4", "train.eval_batches=2", "train.log_every=1",
        "train.checkpoint_every=3", "train.threads=1", "optim.warmup_steps=2", "model.dropout=0.1", *extra])


def _losses(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "tokens_per_s"))} for r in read_jsonl(run / "metrics.jsonl")]


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads the peak RSS from /proc (Linux)")
@pytest.mark.slow
def test_a_corpus_larger_than_the_memory_bound_prepares_trains_and_resumes_bitwise(tmp_path, monkeypatch) -> None:
    src, shards = tmp_path / "big.txt", tmp_path / "shards"
    _corpus(src)
    base, _ = _peak("")
    bound = base + ALLOWED
    peak, torch = _peak(f"from normlab.cli import main\n"
                        f"assert main(['data', 'prepare', {str(src)!r}, '--out', {str(shards)!r}, '--quiet', "
                        f"'--shard-tokens', '20000000']) == 0")
    size = src.stat().st_size
    assert size >= 4 * (bound - base) and size > bound, "the corpus must be larger than the bound it is held to"
    assert not torch, "prepare imported torch: its RSS would swamp the bound"
    assert peak <= bound, f"prepare peaked at {peak >> 20} MiB, over the bound of {bound >> 20} MiB ({base >> 20} idle)"
    m = json.loads((shards / "manifest.json").read_text())
    assert len(m["shards"]) >= 3 and m["text_bytes"] == size

    from normlab.train import run_training
    from normlab.train.loop import Trainer

    assert run_training(_cfg(shards), tmp_path / "ref", quiet=True)["status"] == "completed"
    real = Trainer._batch

    def batch(self, s, m):
        if (s, m) == (7, 0):  # step 8's first micro-batch: the run stops after its step-6 checkpoint
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, s, m)

    monkeypatch.setattr(Trainer, "_batch", batch)
    s = run_training(_cfg(shards), tmp_path / "run", quiet=True)
    assert s["status"] == "interrupted" and s["steps"] == 7
    monkeypatch.setattr(Trainer, "_batch", real)
    assert run_training(None, tmp_path / "run", resume=True, quiet=True)["status"] == "completed"
    ref = _losses(tmp_path / "ref")
    assert len([r for r in ref if "train/loss" in r]) == 12 and _losses(tmp_path / "run") == ref
