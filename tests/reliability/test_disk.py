"""A full or read-only disk mid-run: one clear error line, and the previous checkpoint intact and loadable."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.core.errors import UserError
from normlab.run import checkpoint
from normlab.train import run_training

from .conftest import comparable, in_child, tiny_cfg
from .test_kill import _kill_at_step, _run_and_die_at


def _failing_writer(mp: pytest.MonkeyPatch, code: int, when) -> None:
    """Make every file write under a checkpoint .tmp dir raise OSError(code) once ``when()`` is true."""
    import safetensors.torch as st

    for name in ("save_file", "save_model"):
        real = getattr(st, name)

        def fake(obj, path, *a, _real=real, **k):
            if when():
                raise OSError(code, os.strerror(code), str(path))
            return _real(obj, path, *a, **k)

        mp.setattr(st, name, fake)


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS])
def test_checkpoint_write_failure_is_one_line_exit_2_and_keeps_the_last_checkpoint(
        code, tmp_path, monkeypatch, capsys, reference):
    run = tmp_path / "run"
    _run_and_die_at(run, _kill_at_step(15))  # latest = step 10
    before = (run / "checkpoints" / "latest" / "model.safetensors").read_bytes()
    _failing_writer(monkeypatch, code, lambda: True)
    assert main(["train", "--quiet", "--resume", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and os.strerror(code) in err and "previous checkpoint is intact" in err
    latest = run / "checkpoints" / "latest"
    assert checkpoint.problem(latest) is None and checkpoint.read_state(latest)["loop"]["step"] == 10
    assert (latest / "model.safetensors").read_bytes() == before
    assert not (run / "checkpoints" / "latest.tmp").exists()  # partial copy removed
    monkeypatch.undo()
    # Once the disk is fixed, --resume finishes with the uninterrupted numbers.
    assert run_training(None, run, resume=True, quiet=True)["status"] == "completed"
    assert comparable(run) == reference


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_metrics_write_failure_is_a_user_error_and_summary_failure_does_not_mask_it(tmp_path, monkeypatch):
    from normlab.core.fsutil import atomic_write_bytes
    from normlab.run import dir as rundir

    def full(path, obj):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(rundir, "append_jsonl", full)
    # summary.json cannot be written either: the user must still see the first cause
    monkeypatch.setattr(rundir, "atomic_write_json", lambda p, o: (
        full(p, o) if Path(p).name == "summary.json" else atomic_write_bytes(p, b"{}")))
    with pytest.raises(UserError, match=r"No space left on device .*metrics.jsonl.*--resume"):
        run_training(tiny_cfg(), tmp_path / "run", quiet=True)


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_real_full_tmpfs(tmp_path, reference):
    """The same on a real full filesystem (skipped where ``mount`` is not allowed)."""
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "4m"):
        pytest.skip("cannot mount a tmpfs here (not root or no CAP_SYS_ADMIN)")
    try:
        run = mnt / "run"
        _run_and_die_at(run, _kill_at_step(15))
        free = os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize
        (mnt / "filler").write_bytes(b"\0" * (free - 64 * 1024))  # room for log lines, not a checkpoint

        def resume() -> None:
            with pytest.raises(UserError, match="No space left on device.*previous checkpoint is intact"):
                run_training(None, run, resume=True, quiet=True)

        assert in_child(resume) == 0  # a child, so the parent's state is not touched by the failure
        latest = run / "checkpoints" / "latest"
        assert checkpoint.problem(latest) is None and checkpoint.read_state(latest)["loop"]["step"] == 10
        (mnt / "filler").unlink()
        assert run_training(None, run, resume=True, quiet=True)["status"] == "completed"
        assert comparable(run) == reference
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)

