"""What `normlab train` prints while it works: the run directory first, then plain lines
(no carriage-return frames) when stderr is a file or pipe, with the val loss once known."""

from __future__ import annotations

import io

from normlab.cli import main


def test_train_to_a_pipe_prints_plain_lines_with_val_loss(tmp_path, tiny, capsys):
    run = tmp_path / "run"
    assert main(["train", "--out", str(run), *tiny.args()]) == 0   # 30 steps, log every 5, eval every 10
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err
    assert lines[0] == f"normlab: training into {run} (starting, 30 steps)"
    progress = [ln for ln in lines if ln.startswith("step ")]
    assert [ln.split()[1] for ln in progress] == [f"{s}/30" for s in range(5, 31, 5)]
    assert "val" not in progress[0] and "val " in progress[1]  # first eval at step 10
    assert lines[-1].startswith(f"{run}: completed, 30 steps")


def test_plain_lines_are_spaced_for_about_twenty_per_run():
    from normlab.train.progress import Progress

    out = io.StringIO()
    p = Progress(total=2000, initial=0, run_dir="r", log_every=10, enabled=True, stream=out)
    for s in range(10, 2001, 10):
        p.logged(s, {"train/loss": 1.0, "tokens_per_s": 12345.6, **({"val/loss": 0.5} if s == 500 else {})})
    lines = out.getvalue().splitlines()[1:]
    assert len(lines) == 20 and lines[0].startswith("step 100/2000  loss 1.0000  tok/s 12,346")
    assert "val" not in lines[3] and "val 0.5000" in lines[4]  # step 500 on: the last known val loss


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_with_the_val_loss():
    from normlab.train.progress import Progress

    out = _Tty()
    p = Progress(total=100, initial=0, run_dir="r", log_every=10, enabled=True, stream=out)
    for s in range(1, 101):
        p.step()
        if s % 10 == 0:
            p.logged(s, {"train/loss": 2.0, "tokens_per_s": 100.0, "val/loss": 1.5})
    p.close()
    text = out.getvalue()
    assert "\r" in text and "val=1.5000" in text and "100/100" in text
