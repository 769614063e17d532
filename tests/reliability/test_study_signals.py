"""``kill -INT`` and ``kill -TERM`` of a ``normlab study run`` process with two workers: real
signals to the study process alone (not its process group, as Ctrl-C would send them).

The study process passes the signal on: the workers checkpoint their trials and claim nothing
more, the command prints the line naming the command that resumes and exits 128 + the signal,
and that command finishes every trial exactly once.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normlab.core.fsutil import read_jsonl
from normlab.study.store import Store

STEPS = 200
SPEC = f"""name = "signals"
seeds = [0, 1, 2]
[base.model]
n_layer = 2
d_model = 32
n_head = 2
context = 32
[base.train]
steps = {STEPS}
batch_size = 8
eval_every = 100
eval_batches = 2
log_every = 5
checkpoint_every = 5
threads = 1
[axes]
"model.placement" = ["post", "pre"]
"""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "normlab", *args]


def test_the_first_stop_signal_is_acted_on_and_remembered_later_ones_only_noted() -> None:
    """A second signal (Ctrl-C to a group reaches a worker twice) must not cut the first one's
    bookkeeping short; the exit status is the first one's; the old handlers come back."""
    from normlab.core import stopping

    before = signal.getsignal(signal.SIGTERM)
    calls: list[tuple[str, int]] = []
    with stopping.handling(lambda signum: calls.append(("outer", signum))):
        assert stopping.received() is None
        with stopping.handling(lambda signum: calls.append(("inner", signum))):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
        assert stopping.received() == signal.SIGTERM and stopping.exit_status() == 143
        os.kill(os.getpid(), signal.SIGINT)  # the outer handler is back, and it too only notes it
    assert calls == [("inner", signal.SIGTERM)]
    assert signal.getsignal(signal.SIGTERM) is before
    with stopping.handling(stopping.interrupt):  # the outermost one starts afresh
        assert stopping.received() is None
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert stopping.exit_status() == 130
    stopping.forget()


def _workers(pid: int) -> set[int]:
    """The worker processes of the study process ``pid`` (its spawned children; not
    multiprocessing's resource tracker, which leaves on its own once its parent is gone)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat, cmd = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
            except OSError:  # it ended while we looked
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in cmd:
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _midway(root: Path, proc: subprocess.Popen) -> tuple[set[str], set[str]]:
    """Wait until some trials are done, two run with a checkpoint on disk and some wait; returns
    (done, running) as seen just before the signal."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if (root / "study.sqlite").exists() and (root / "spec.json").exists():
            store = Store(root)
            try:
                trials = store.trials()
            finally:
                store.close()
            done = {t.id for t in trials if t.status == "completed"}
            running = [t for t in trials if t.status == "running"]
            started = [t for t in running if (t.run_dir / "checkpoints" / "latest" / "state.json").exists()]
            if done and len(started) == 2 and any(t.status == "pending" for t in trials):
                return done, {t.id for t in running}
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"the study never had trials done, running and waiting at once: {proc.communicate()[1][-2000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_signal_to_the_study_process_stops_its_workers_and_the_rerun_finishes(tmp_path, data_dir, sig):
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    root = tmp_path / "store"
    env = {**os.environ, "NORMLAB_DATA_DIR": str(data_dir), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cli("study", "run", str(spec), "--store", str(root), "--workers", "2"), env=env,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    done, running = _midway(root, proc)
    workers = _workers(proc.pid)
    os.kill(proc.pid, sig)  # the study process only: its workers hear of it from it
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the study did not stop within 120 s of the signal")

    assert proc.returncode == 128 + sig, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last == (f"normlab study: interrupted; finished trials are kept; resume with: "
                    f"normlab study run --store {shlex.quote(str(root))} --workers 2"), err[-2000:]
    assert len(workers) == 2 and not [p for p in workers if _alive(p)], "a worker outlived the study process"

    store = Store(root)
    trials = {t.id: t for t in store.trials()}
    for tid, t in trials.items():  # the trials in flight stopped or ended; no other one started and ended
        events = [e["event"] for e in store.events(tid)]
        if tid in done:
            assert t.status == "completed"
        elif tid in running:
            assert t.status in ("completed", "interrupted"), (tid, t.status)
        else:
            assert t.status in ("pending", "interrupted") and "completed" not in events, (tid, events)
    interrupted = [t for t in trials.values() if t.status == "interrupted" and t.id in running]
    assert interrupted, "no trial in flight was stopped: the workers ran on"
    # a worker may claim a trial between the look above and the signal: it is stopped too, and a
    # rerun resumes every run the first one had opened (its env.json written), whichever it was
    opened = {t.id for t in trials.values() if t.status == "interrupted" and (t.run_dir / "env.json").is_file()}
    for t in interrupted:  # stopped at a checkpoint, as Ctrl-C to the process group leaves it
        summary = json.loads((t.run_dir / "summary.json").read_text())
        state = json.loads((t.run_dir / "checkpoints" / "latest" / "state.json").read_text())
        assert summary["status"] == "interrupted" and state["loop"]["step"] == summary["steps"] < STEPS
    store.close()

    argv = shlex.split(last.split("resume with: ", 1)[1])
    rerun = subprocess.run(cli(*argv[1:]), env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    store = Store(root)
    for t in store.trials():
        events = [e["event"] for e in store.events(t.id)]
        assert t.status == "completed" and events.count("completed") == 1, (t.id, events)
        steps = [r["step"] for r in read_jsonl(t.run_dir / "metrics.jsonl")]
        assert steps == sorted(set(steps)) and steps[-1] == STEPS  # no step twice, none lost
        resumed = "resumes" in json.loads((t.run_dir / "env.json").read_text())
        assert resumed == (t.id in opened), t.id  # from its checkpoint, not from 0
    store.close()
