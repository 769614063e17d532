"""Progress of long work: the display's plain lines (rate-limited, heartbeat, ETA per kind),
and `normlab study run` printing them when piped, a resume saying at once what it found."""

from __future__ import annotations

import io
import os
import subprocess

from normlab.core.progress import Progress, plain

from .conftest import cli


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _lines(buf: io.StringIO) -> list[str]:
    return buf.getvalue().splitlines()


def test_plain_lines_per_item_rate_limited_heartbeat_and_final() -> None:
    clock, buf = Clock(), io.StringIO()
    p = plain("study", buf, clock=clock, gap_s=5.0, every_s=30.0)
    p.add("trial", 10, done=2)
    p.note("resuming: 2/10 trials done")
    p.start("trial")
    clock.t = 6.0
    p.item("t3 seed=1")
    p.advance("trial")                      # 6 s since the last line: printed
    clock.t = 7.0
    p.advance("trial")                      # 1 s later: held back (no flood)
    assert _lines(buf) == ["study: resuming: 2/10 trials done",
                           "study: 3/10 trials, now t3 seed=1; 6 s elapsed, ETA 42 s"]
    clock.t = 20.0
    p.tick()                                # 14 s of silence: not yet
    clock.t = 37.0
    p.tick()                                # 30 s of silence on a long item: a heartbeat line
    assert _lines(buf)[-1] == "study: 4/10 trials, now t3 seed=1; 37 s elapsed, ETA 1m51s"
    clock.t = 38.0
    p.advance("trial", 6)                   # the last items: always printed
    p.close()
    p.close()
    assert _lines(buf)[-1] == "study: done 10/10 trials in 38 s"
    assert len(_lines(buf)) == 4            # the final line once, though closed twice


def test_eta_per_kind_and_untimed_kinds() -> None:
    clock, buf = Clock(), io.StringIO()
    p = plain("claims", buf, clock=clock)
    p.add("model", 10)
    p.add("trial", 4, done=1)
    assert p.eta() == "ETA ?"
    p.start("model")
    clock.t = 5.0
    p.advance("model", 5)                   # 1 s a model; trials not timed: said, not guessed
    assert p.eta() == "ETA 5 s + 3 trials not timed yet"
    assert p.status().startswith("6/14 (models 5/10, trials 1/4)")
    p.advance("model", 5)
    p.start("trial")
    clock.t = 65.0
    p.advance("trial")                      # 60 s a trial (the resumed one does not count)
    assert p.eta() == "ETA 2m00s"


def test_a_terminal_gets_a_bar_with_the_item_and_notes_above_it() -> None:
    clock, buf = Clock(), io.StringIO()
    p = Progress("study", stream=buf, tty=True, ticker=False, clock=clock)
    p.add("trial", 4, done=1)
    p.note("resuming: 1/4 trials done")
    p.start("trial")
    clock.t = 10.0
    p.item("pre seed=2")
    p.advance("trial")
    assert "\r" in buf.getvalue() and "2/4" in buf.getvalue() and "pre seed=2" in buf.getvalue()
    assert "study: resuming: 1/4 trials done\n" in buf.getvalue()
    p.advance("trial", 2)
    p.close()
    assert buf.getvalue().rstrip().endswith("study: done 4/4 trials in 10 s")


def test_disabled_display_prints_nothing() -> None:
    buf = io.StringIO()
    p = Progress("x", stream=buf, enabled=False, ticker=False)
    p.add("trial", 2)
    p.note("hello")
    p.advance("trial", 2)
    p.close()
    assert buf.getvalue() == ""


def _fake_spec(path, fake_path: str) -> None:
    path.write_text(f'name = "piped"\ntrial = "{fake_path}:ok"\nseeds = [0, 1, 2]\n'
                    '[axes]\n"model.placement" = ["post", "pre"]\n')


def test_study_run_prints_progress_lines_when_piped_and_a_resume_says_what_it_found(tmp_path, fake_path) -> None:
    from normlab.study.runner import open_store
    from normlab.study.spec import load_spec
    from normlab.study.store import worker_id

    spec = tmp_path / "s.toml"
    _fake_spec(spec, fake_path)
    store = open_store(load_spec(spec), tmp_path / "s")      # one trial finished by an earlier run
    first = store.claim(worker_id(), lease_s=60)
    store.finish(first, worker_id(), summary={"status": "completed", "best_val_loss": 1.0})
    store.close()
    env = {**os.environ, "NORMLAB_FAKE_SLEEP": "0.2"}
    r = subprocess.run(cli("study", "run", str(spec), "--store", str(tmp_path / "s"), "--workers", "1"),
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("normlab: ")]
    assert lines[0] == f"normlab: resuming study 'piped' in {tmp_path / 's'}: 1/6 trials done (completed 1)", lines
    assert lines[-1].startswith("normlab: done 6/6 trials in "), lines
    assert "\r" not in r.stderr                               # plain lines, no bar, when piped
    assert len(lines) <= 8                                    # not one line per poll
    again = subprocess.run(cli("study", "run", "--store", str(tmp_path / "s"), "--workers", "1"),
                           capture_output=True, text=True, timeout=120)
    assert "6/6 trials done (completed 6); nothing to run" in again.stderr.splitlines()[0]
