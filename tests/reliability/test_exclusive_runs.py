"""Exclusive run directories (issue 32): one writer per folder, held by an OS lock.

Writers are real processes: each is forked from this one (torch already imported, so a
child costs a fork, not an interpreter), runs the CLI's ``main`` with its own stdout and
stderr files, and waits at a barrier so that the two of a round really start together.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Callable

import pytest

from normlab.cli import main
from normlab.core.fsutil import read_jsonl

ROUNDS = 20
# the smallest run: 4 steps, a metrics line each, one validation batch at the end
SMOKE = ["--preset", "smoke", "--quiet", "--set", "train.steps=4", "--set", "train.log_every=1",
         "--set", "train.eval_batches=1", "--set", "train.checkpoint_every=4"]
RUN_FILES = {"config.json", "env.json", "metrics.jsonl", "summary.json", "checkpoints", "normlab.json", "data.json"}
PROBE = ["probe", "--placements", "pre", "--depths", "1", "--d-model", "16", "--n-head", "2", "--seeds", "1",
         "--batch-size", "2", "--context", "8", "--n-proj", "0", "--quiet"]


def race(argvs: list[list[str]], cwd: Path, tag: str, before: Callable[[], None] | None = None
         ) -> list[tuple[int, list[str], list[str]]]:
    """Run ``main(argv)`` for each argv in its own forked process, all released at once;
    (exit status, stdout lines, stderr lines) per argv."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    kids = []
    for i, argv in enumerate(argvs):
        out, err = cwd / f".{tag}-{i}.out", cwd / f".{tag}-{i}.err"
        pid = os.fork()
        if pid == 0:  # the child never returns into pytest
            code = 70
            try:
                os.chdir(cwd)
                sys.argv = ["normlab", *argv]  # as the console script has it (env.json records it)
                sys.stdout, sys.stderr = open(out, "w"), open(err, "w")  # noqa: SIM115 - closed by _exit's flush
                os.dup2(sys.stdout.fileno(), 1)
                os.dup2(sys.stderr.fileno(), 2)
                if before is not None:
                    before()
                os.write(ready_w, b"r")
                os.read(go_r, 1)  # the barrier
                code = main(argv)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        kids.append((pid, out, err))
    for _ in kids:
        os.read(ready_r, 1)  # every child is at the barrier
    os.write(go_w, b"g" * len(kids))
    results = []
    for pid, out, err in kids:
        _, status = os.waitpid(pid, 0)
        results.append((os.waitstatus_to_exitcode(status), out.read_text().splitlines(), err.read_text().splitlines()))
        out.unlink()
        err.unlink()
    for fd in (ready_r, ready_w, go_r, go_w):
        os.close(fd)
    return results


def one_run_of(run: Path, placement: str) -> None:
    """``run`` is one complete run of ``placement``: its config, its summary, its argv, and a
    metrics.jsonl whose steps are 1..4 once each (two writers would repeat or interleave them)."""
    assert {p.name for p in run.iterdir()} == RUN_FILES  # no lock left, nothing of a second writer
    assert json.loads((run / "config.json").read_text())["model"]["placement"] == placement
    assert json.loads((run / "summary.json").read_text())["placement"] == placement
    env = json.loads((run / "env.json").read_text())
    assert placement in env["argv"] and "resumes" not in env
    assert [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == [1, 2, 3, 4]


@pytest.mark.slow
def test_two_trainings_into_one_directory_one_wins_the_other_exits_2(tmp_path, data_dir):
    outcomes = set()
    for k in range(ROUNDS):
        run = tmp_path / f"r{k}" / "run"
        run.parent.mkdir()
        got = race([["train", *SMOKE, "--placement", p, "--out", str(run)] for p in ("post", "pre")], run.parent, "t")
        assert sorted(rc for rc, _, _ in got) == [0, 2], got
        (winner,) = [p for p, (rc, _, _) in zip(("post", "pre"), got) if rc == 0]
        (_, out, _), (_, lout, lerr) = sorted(got, key=lambda g: g[0])
        assert out == [str(run)] and lout == []  # the winner's stdout is the run, the loser printed none
        assert len(lerr) == 1 and lerr[0].startswith(f"normlab train: error: --out {run}: "), lerr
        assert "being written by pid " in lerr[0] or "already holds a run" in lerr[0], lerr
        outcomes.add("held" if "being written" in lerr[0] else "finished")
        one_run_of(run, winner)
    print(f"refusals: {sorted(outcomes)}")  # which of the two ways the loser met the run


@pytest.mark.slow
def test_two_default_runs_in_one_second_get_two_folders(tmp_path, data_dir):
    def same_second() -> None:  # both children name their run in the same second: the worst case
        import normlab.train.run as run_mod

        run_mod.default_run_dir = lambda root="runs": Path(root) / "20250101-120000"

    for k in range(ROUNDS):
        cwd = tmp_path / f"d{k}"
        cwd.mkdir()
        got = race([["train", *SMOKE, "--placement", p] for p in ("post", "pre")], cwd, "t", same_second)
        assert [rc for rc, _, _ in got] == [0, 0], got
        dirs = [out for _, out, _ in got]
        assert all(len(d) == 1 for d in dirs), dirs  # one stdout line each: the run's path
        assert sorted(d[0] for d in dirs) == ["runs/20250101-120000", "runs/20250101-120000-1"]
        assert sorted(p.name for p in (cwd / "runs").iterdir()) == ["20250101-120000", "20250101-120000-1"]
        for (_, out, _), placement in zip(got, ("post", "pre")):
            one_run_of(cwd / out[0], placement)


def hold(folder: Path, kind: str) -> tuple[int, int]:
    """A forked process holding ``folder`` as a writer of ``kind`` until told to stop: (pid, fd
    to write to let it go)."""
    held_r, held_w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            from normlab.run.dir import RunDir
            from normlab.run.outdir import OutDir

            owner = RunDir(folder).writing("--resume") if kind == "run" else OutDir(folder, kind).writing()
            with owner:
                os.write(held_w, b"h")
                os.read(stop_r, 1)
        finally:
            os._exit(0)
    assert os.read(held_r, 1) == b"h"
    return pid, stop_w


def let_go(pid: int, stop_w: int) -> None:
    os.write(stop_w, b"s")
    os.waitpid(pid, 0)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def finished_run(tmp_path, data_dir, capsys) -> Path:
    run = tmp_path / "run"
    assert main(["train", *SMOKE, "--out", str(run)]) == 0
    assert capsys.readouterr().out == f"{run}\n"  # stdout is the run directory, nothing else
    return run


def test_train_prints_its_run_directory_on_stdout(tmp_path, data_dir, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["train", *SMOKE]) == 0
    out, err = capsys.readouterr()
    (line,) = out.splitlines()
    assert Path(line).parent == Path("runs") and (tmp_path / line / "summary.json").is_file()
    assert f"{line}: completed" in err  # status stays on stderr


def test_readers_of_a_run_being_written_say_so_and_writers_are_refused(finished_run, tmp_path, capsys):
    run = finished_run
    pid, stop = hold(run, "run")
    try:
        before = snapshot(run)
        assert main(["train", "--resume", str(run)]) == 2
        assert main(["analyze", str(run)]) == 2
        errs = capsys.readouterr().err.splitlines()
        assert len(errs) == 2 and all(f"being written by pid {pid}" in e for e in errs), errs
        assert "kill" in errs[0] and "give --out DIR outside the run" in errs[1]
        assert snapshot(run) == before  # nothing of the held run was touched
        assert main(["report", str(run), "--out", str(tmp_path / "page"), "--quiet"]) == 0
        assert f"still being written by pid {pid}" in capsys.readouterr().err
        page = (tmp_path / "page" / "index.html").read_text()
        assert f"Still being written by pid {pid}" in page and "skipped: the run is still being written" in page
        assert main(["inspect", str(run), "--out", str(tmp_path / "insp"), "--max-tokens", "64", "--quiet"]) == 0
        assert f"still being written by pid {pid}" in capsys.readouterr().err
        assert snapshot(run) == before
    finally:
        let_go(pid, stop)
    assert main(["report", str(run), "--out", str(tmp_path / "page2"), "--quiet"]) == 0
    assert "still being written" not in capsys.readouterr().err
    assert "Still being written" not in (tmp_path / "page2" / "index.html").read_text()


def test_a_killed_holder_leaves_no_stale_lock(finished_run, capsys):
    from normlab.run.dir import LOCK, writer

    pid = os.fork()
    if pid == 0:  # take the lock and die without letting go (SIGKILL: no finally, no atexit)
        from normlab.run.dir import RunDir

        with RunDir(finished_run).writing("--resume"):
            os.kill(os.getpid(), 9)
    os.waitpid(pid, 0)
    assert (finished_run / LOCK).is_file() and writer(finished_run) is None  # its record names a dead pid
    assert main(["train", "--resume", str(finished_run), "--steps", "6"]) == 0  # the kernel released it
    assert [r["step"] for r in read_jsonl(finished_run / "metrics.jsonl")] == [1, 2, 3, 4, 5, 6]
    assert not (finished_run / LOCK).exists()


@pytest.mark.parametrize("kind", ["probe", "inspect", "analysis"])
def test_a_second_writer_of_an_output_folder_is_refused(kind, finished_run, tmp_path, capsys):
    out = tmp_path / kind
    argv = {"probe": [*PROBE, "--out", str(out)],
            "inspect": ["inspect", str(finished_run), "--out", str(out), "--max-tokens", "64", "--quiet"],
            "analysis": ["analyze", str(finished_run), "--out", str(out), "--batches", "1", "--batch-size", "2"]}[kind]
    pid, stop = hold(out, kind)
    try:
        before = snapshot(out)
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert f"--out {out}: being written by pid {pid}" in line and "choose another --out" in line
        assert snapshot(out) == before
    finally:
        let_go(pid, stop)
    assert main(argv) == 0  # once it is let go, the folder is the next writer's
    assert json.loads((out / "normlab.json").read_text())["kind"] == kind


def test_the_marker_names_the_kind_report_reads(finished_run, tmp_path, capsys):
    from normlab.report.kinds import page_kind

    probe, insp = tmp_path / "probe", tmp_path / "insp"
    assert main([*PROBE, "--out", str(probe)]) == 0
    assert main(["inspect", str(finished_run), "--out", str(insp), "--max-tokens", "64", "--quiet"]) == 0
    assert json.loads((finished_run / "normlab.json").read_text())["kind"] == "run"
    assert (page_kind(probe), page_kind(insp), page_kind(finished_run)) == ("probe", "inspect", "run")
    # the marker decides, not summary.json: an inspect folder whose summary reads like a probe's
    (insp / "summary.json").write_text("{}")
    assert page_kind(insp) == "inspect"
    (insp / "normlab.json").unlink()  # a folder from before markers: told apart by its files, as before
    assert page_kind(insp) == "probe"
    # a folder of another kind is never written into
    assert main([*PROBE, "--out", str(finished_run)]) == 2
    assert "holds a run (normlab.json says so), not a probe" in capsys.readouterr().err
