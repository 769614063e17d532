"""`normlab train` / `normlab sample` on the command line: bad input is one line, exit 2, RUN untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.cli import main


def _snapshot(run: Path) -> dict:
    return {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}


@pytest.fixture
def existing_run(tmp_path, tiny, capsys) -> Path:
    run = tmp_path / "run"
    assert main(["train", "--quiet", "--out", str(run), *tiny.args("train.steps=5")]) == 0
    capsys.readouterr()
    return run


def _bad_inputs(tmp_path: Path, data_dir: Path) -> dict[str, tuple[list[str], str]]:
    (tmp_path / "empty").mkdir()
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "tinyshakespeare.txt").write_bytes((data_dir / "tinyshakespeare.txt").read_bytes()[:-1])
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "latin1.txt").write_bytes("Señor, ¿qué tal? ".encode("latin-1") * 50)
    (tmp_path / "short.txt").write_text("To be, or not to be, that is the question. " * 20)  # 86 val chars
    return {
        "missing data file": (["--data-dir", str(tmp_path / "empty")], "no tinyshakespeare.txt there"),
        "wrong checksum": (["--data-dir", str(wrong)], "sha256"),
        "empty text": (["--set", f"data.corpus={tmp_path / 'empty.txt'}"], "empty"),
        "non-UTF-8 text": (["--set", f"data.corpus={tmp_path / 'latin1.txt'}"], "not UTF-8"),
        "context > validation split": (["--set", f"data.corpus={tmp_path / 'short.txt'}",
                                        "--set", "model.context=128"], "validation split"),
        "negative warm-up": (["--set", "optim.warmup_steps=-5"], "optim.warmup_steps=-5"),
        "unknown logger": (["--set", 'train.loggers=["tensorbored"]'], "did you mean 'tensorboard'"),
        "unknown preset": (["--preset", "nanogtp-cpu"], "nanogpt-cpu"),
    }


def test_bad_inputs_exit_2_with_one_line_and_create_nothing(tmp_path, tiny, capsys, data_dir):
    for what, (flags, needle) in _bad_inputs(tmp_path, data_dir).items():
        out = tmp_path / f"out-{what.replace(' ', '_')}"
        rc = main(["train", "--quiet", "--out", str(out), *tiny.args(), *flags])
        err, printed = capsys.readouterr()[::-1]
        assert rc == 2, what
        assert printed == "", (what, printed)  # stdout is the run's path only once the run exists
        assert err.count("\n") == 1 and err.startswith("normlab train: error:"), (what, err)
        assert needle in err, (what, err)
        assert not out.exists(), what


def test_compile_without_a_cpp_compiler_is_one_line_before_anything_is_written(tmp_path, tiny, capsys,
                                                                               monkeypatch) -> None:
    from torch._inductor import cpp_builder

    def no_compiler():
        raise RuntimeError("No working C++ compiler found")

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    out = tmp_path / "run"
    rc = main(["train", "--quiet", "--out", str(out), *tiny.args("train.compile=true")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "train.compile" in err and "C++ compiler" in err, err
    assert not out.exists()


def test_bad_input_leaves_an_existing_run_untouched(existing_run, tmp_path, capsys, tiny):
    before = _snapshot(existing_run)
    for flags in (["--out", str(existing_run), *tiny.args()],                      # would overwrite
                  ["--resume", str(existing_run), "--set", "optim.lr=1"],          # mixes flags
                  ["--resume", str(existing_run / "nope")]):                       # not a run
        assert main(["train", "--quiet", *flags]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    assert _snapshot(existing_run) == before


def test_sample_continues_the_prompt(existing_run, capsys):
    assert main(["sample", str(existing_run), "--prompt", "ROMEO:", "--tokens", "20", "--seed", "1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("ROMEO:") and len(text) == len("ROMEO:") + 20 + 1  # + print newline
    assert main(["sample", str(existing_run), "--prompt", "ROMEO:", "--tokens", "20", "--seed", "1"]) == 0
    assert capsys.readouterr().out == text  # seeded
    assert main(["sample", str(existing_run), "--prompt", "ROMEO:", "--tokens", "20",
                 "--temperature", "0"]) == 0
    greedy = capsys.readouterr().out
    assert main(["sample", str(existing_run), "--prompt", "ROMEO:", "--tokens", "20",
                 "--temperature", "0", "--seed", "9"]) == 0
    assert capsys.readouterr().out == greedy  # greedy ignores the seed


def test_sample_rejects_unknown_characters(existing_run, capsys):
    assert main(["sample", str(existing_run), "--prompt", "ROMEO\u263a"]) == 2
    assert "not in the corpus vocabulary" in capsys.readouterr().err


def test_default_out_is_a_new_timestamped_dir_under_runs(tmp_path, tiny, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        assert main(["train", "--quiet", *tiny.args("train.steps=2", "train.eval_every=0")]) == 0
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all((r / "summary.json").is_file() for r in runs)
    assert "completed, 2 steps" in capsys.readouterr().err


def test_the_printed_run_path_exists_and_a_refused_corpus_prints_none(tmp_path, tiny, capsys, monkeypatch):
    """What `RUN=$(normlab train ...)` gets: nothing when the corpus is refused (it is read after
    the default folder is claimed), else one line naming the folder that holds the run."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.txt").write_text("")
    assert main(["train", "--quiet", *tiny.args(), "--set", f"data.corpus={tmp_path / 'empty.txt'}"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "empty" in out.err, out
    assert not any((tmp_path / "runs").glob("*"))
    assert main(["train", "--quiet", *tiny.args("train.steps=2", "train.eval_every=0")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and (Path(printed[0]) / "config.json").is_file(), printed
