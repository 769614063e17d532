"""Runs that carry their data: a run trained on a relative corpus path is resumed, reported and
inspected from another working directory, on its own corpus; a moved corpus is one line with
its sha256, found again by --data-dir; a run older than data.json keeps working."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

import pytest

from normlab.core.fsutil import read_jsonl

from .cli_cases import run_case

TINY = ["--set", "model.n_layer=2", "--set", "model.d_model=32", "--set", "model.n_head=2", "--set",
        "model.context=32", "--set", "train.batch_size=8", "--set", "train.eval_every=20", "--set",
        "train.eval_batches=2", "--set", "train.threads=1", "--set", "train.checkpoint_every=20"]


def _corpus(path: Path) -> None:
    """A text unlike Tiny Shakespeare: six words in random order (a char model learns it fast)."""
    rng = random.Random(0)
    path.write_text(" ".join(rng.choice(["alpha", "beta", "gamma", "delta", "eps", "zeta"]) for _ in range(20000)),
                    encoding="utf-8")


def _train(where: Path, *extra: str) -> Path:
    """A 40-step run into WHERE/run on WHERE/mycorpus.txt, named relatively, from WHERE."""
    _corpus(where / "mycorpus.txt")
    case = run_case(["train", "--quiet", "--out", "run", "--steps", "40", "--set", "data.corpus=mycorpus.txt",
                     *TINY, *extra])
    assert case["rc"] == 0, case
    return where / "run"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    a = tmp_path_factory.mktemp("carry") / "a"
    a.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        mp.chdir(a)
        return _train(a, "--set", "train.keep_checkpoints=true")


def _val_loss(run: Path) -> float:
    return [r["val/loss"] for r in read_jsonl(run / "metrics.jsonl") if r.get("val/loss") is not None][-1]


def test_the_run_records_its_corpus_by_absolute_path_and_sha256(trained):
    corpus = trained.parent / "mycorpus.txt"
    cfg = json.loads((trained / "config.json").read_text())
    assert cfg["data"]["corpus"] == str(corpus.resolve())
    rec = json.loads((trained / "data.json").read_text())
    assert rec["corpus"]["path"] == str(corpus.resolve())
    assert rec["corpus"]["sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert rec["tokenizer"]["name"] == "char" and rec["tokenizer"]["vocab_size"] == 13  # 12 letters + space
    assert rec["split"]["train_tokens"] > rec["split"]["val_tokens"] > 0


def test_resume_report_and_inspect_from_another_directory(trained, tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(trained, run)  # the shared run stays at 40 steps for the other tests
    elsewhere = tmp_path / "b"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    case = run_case(["train", "--quiet", "--resume", str(run), "--steps", "60"])
    assert case["rc"] == 0, case
    assert read_jsonl(run / "metrics.jsonl")[-1]["step"] == 60
    case = run_case(["report", "--quiet", str(run), "--out", "page"])
    assert case["rc"] == 0 and "skipped" not in case["err"], case
    assert json.loads((run / "analysis" / "analysis.json").read_text())["deletion_loss"]
    case = run_case(["inspect", str(run), "--out", "ins", "--quiet"])
    assert case["rc"] == 0, case
    summary = json.loads((elsewhere / "ins" / "summary.json").read_text())
    assert "own validation split" in summary["text"] and str(trained.parent / "mycorpus.txt") in summary["text"]
    assert "tinyshakespeare" not in summary["text"]
    # the run's own data: its validation loss, within the sampling of other windows
    assert abs(summary["loss"] - _val_loss(run)) < 0.1 * _val_loss(run), (summary["loss"], _val_loss(run))


def test_a_series_of_a_run_is_measured_on_the_runs_data(trained, tmp_path):
    from normlab.inspect.series import inspect_series

    got = inspect_series([str(trained)], tmp_path / "series", quiet=True, page=False)
    assert got["steps"] == [0, 20, 40]  # step 0: the model at initialisation
    assert len(got["data"]) == 1 and "own validation split" in got["data"][0], got["data"]
    last = json.loads((tmp_path / "series" / "steps" / "step_000040" / "summary.json").read_text())
    assert abs(last["loss"] - _val_loss(trained)) < 0.1 * _val_loss(trained)


def test_a_moved_corpus_is_one_line_with_its_sha256_and_data_dir_finds_it(tmp_path, monkeypatch):
    a = tmp_path / "a"
    a.mkdir()
    monkeypatch.chdir(a)
    run = _train(a)
    sha = hashlib.sha256((a / "mycorpus.txt").read_bytes()).hexdigest()
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.move(a / "mycorpus.txt", moved / "mycorpus.txt")
    monkeypatch.chdir(tmp_path)
    for argv in (["inspect", str(run), "--out", "ins", "--quiet"], ["analyze", str(run), "--out", "an"],
                 ["train", "--quiet", "--resume", str(run), "--steps", "50"]):
        case = run_case(argv)
        lines = case["err"].strip().splitlines()
        assert case["rc"] == 2 and len(lines) == 1, case
        assert sha in lines[0] and "--data-dir" in lines[0] and "mycorpus.txt" in lines[0], lines[0]
    assert not (tmp_path / "ins").exists() and read_jsonl(run / "metrics.jsonl")[-1]["step"] == 40
    assert run_case(["inspect", str(run), "--out", "ins", "--quiet", "--data-dir", str(moved)])["rc"] == 0
    case = run_case(["train", "--quiet", "--resume", str(run), "--steps", "50", "--data-dir", str(moved)])
    assert case["rc"] == 0, case
    # the run now records where its corpus is
    assert json.loads((run / "data.json").read_text())["corpus"]["path"] == str(moved / "mycorpus.txt")
    # another text under the same name is not the run's corpus
    (moved / "mycorpus.txt").write_text("alpha beta " * 5000, encoding="utf-8")
    err = run_case(["analyze", str(run), "--out", "an2"])["err"]
    assert f"is not the run's corpus (sha256 {sha})" in err, err


def test_a_run_older_than_data_json_keeps_working(trained, tmp_path, monkeypatch):
    old = tmp_path / "old"
    shutil.copytree(trained, old / "run")
    shutil.copy(trained.parent / "mycorpus.txt", old / "mycorpus.txt")
    (old / "run" / "data.json").unlink()
    cfg = json.loads((old / "run" / "config.json").read_text())
    cfg["data"]["corpus"] = "mycorpus.txt"  # stored as typed, as before
    (old / "run" / "config.json").write_text(json.dumps(cfg))
    monkeypatch.chdir(old)
    case = run_case(["inspect", "run", "--out", "ins", "--quiet"])
    assert case["rc"] == 0, case
    assert "mycorpus.txt" in json.loads((old / "ins" / "summary.json").read_text())["text"]
    monkeypatch.chdir(tmp_path)  # and from elsewhere, --data-dir names the folder
    case = run_case(["analyze", str(old / "run"), "--out", "an"])
    assert case["rc"] == 2 and "no such file at mycorpus.txt" in case["err"] and "--data-dir" in case["err"], case
    assert run_case(["analyze", str(old / "run"), "--out", "an", "--data-dir", str(old)])["rc"] == 0
