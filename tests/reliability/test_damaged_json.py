"""A damaged JSON file of a run or a model directory, given to every command that reads one: one
line naming the file and the fix, exit 2, nothing changed.

config.json (malformed, empty, not an object) goes to every command that reads a run; the
commands are read off the CLI's parser, so a new one that takes a run (metavar RUN, PATH,
MODEL, SRC, or --init-from) fails :func:`test_every_run_reading_argument_has_a_case` until it
gets its case here. summary.json, env.json and data.json go to the commands that read them,
model_config.json to those that read a model directory.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from .cli_cases import cli_arguments, digest, run_case, trained_run

# {run}: a finished tiny run that kept step checkpoints, {model}: a model directory (its
# checkpoints/best), {new}: a path that does not exist. Each reads RUN/config.json (or, for
# --init-from and inspect/export of {model}, model_config.json) before its work.
RUN_READERS: dict[tuple[str, str], list[str]] = {
    ("train", "resume"): ["train", "--quiet", "--resume", "{run}"],
    ("sample", "run"): ["sample", "{run}", "--tokens", "2"],
    ("analyze", "run"): ["analyze", "{run}", "--out", "{new}"],
    ("lr-sensitivity", "runs"): ["lr-sensitivity", "{run}", "{run}"],
    ("export", "run"): ["export", "{run}", "{new}"],
    ("report", "paths"): ["report", "--quiet", "{run}", "--out", "{new}"],
    ("inspect", "model"): ["inspect", "{run}", "--out", "{new}", "--quiet"],
    ("inspect", "series"): ["inspect", "--series", "{run}", "--out", "{new}", "--quiet"],
    ("import", "model"): ["import", "{run}", "{new}"],  # a Hugging Face directory's config.json, same file name
}
COMPARE = ["report", "--quiet", "{run}", "{twin}", "--out", "{new}"]  # several PATHs: the comparison page
MODEL_READERS: dict[tuple[str, str], list[str]] = {
    ("train", "init_from"): ["train", "--quiet", "--init-from", "{model}", "--out", "{new}", "--steps", "2"],
    ("config", "init_from"): ["config", "--init-from", "{model}"],
    ("inspect", "model"): ["inspect", "{model}", "--out", "{new}", "--quiet"],
    ("export", "run"): ["export", "{model}", "{new}"],
}
DAMAGE = {"malformed": '{"model": {', "empty": "", "not-an-object": "[1, 2]"}
# the other JSON files of RUN/, each with the commands that read it (a finished run: --steps
# extends it, so that train --resume reads past summary.json)
OTHER_FILES = {
    "summary.json": [["train", "--quiet", "--resume", "{run}"], ["report", "--quiet", "{run}", "--out", "{new}"],
                     ["lr-sensitivity", "{run}", "{run}"]],
    "env.json": [["train", "--quiet", "--resume", "{run}", "--steps", "8"],
                 ["report", "--quiet", "{run}", "--out", "{new}"]],
    "data.json": [["train", "--quiet", "--resume", "{run}", "--steps", "8"], ["analyze", "{run}", "--out", "{new}"],
                  ["inspect", "{run}", "--out", "{new}", "--quiet"]],
}


def _reads_a_run(command: tuple[str, ...], a: argparse.Action) -> bool:
    meta = str(a.metavar or "").upper()
    # data prepare's SRC is a corpus, claims' --seen a claims output or a study store: no run there
    other = (command, a.dest) in ((("data", "prepare"), "src"), (("claims",), "seen"))
    return (meta in ("RUN", "PATH", "MODEL", "SRC") and a.dest != "out" and not other) or a.dest == "init_from"


def run_reading_arguments() -> set[tuple[str, str]]:
    return {(" ".join(prefix), a.dest) for prefix, a in cli_arguments() if _reads_a_run(prefix, a)}


def test_every_run_reading_argument_has_a_case():
    assert run_reading_arguments() == set(RUN_READERS) | set(MODEL_READERS)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trained_run(tmp_path_factory, "damaged-json", "train.steps=4", "train.eval_every=2",
                       "train.checkpoint_every=2", "train.keep_checkpoints=true", "model.dropout=0.0")


def _damaged_case(world: Path, tmp_path: Path, argv: list[str], file: str, text: str) -> tuple[dict, Path]:
    """``argv`` on a copy of the run whose ``file`` (relative to it) holds ``text``."""
    run = tmp_path / "run"
    shutil.copytree(world, run)
    shutil.copytree(world, tmp_path / "twin")
    (run / file).write_text(text)
    names = {"run": run, "twin": tmp_path / "twin", "model": run / "checkpoints" / "best", "new": tmp_path / "new"}
    before = digest(tmp_path)
    case = run_case([a.format(**{k: str(v) for k, v in names.items()}) for a in argv])
    assert digest(tmp_path) == before, f"{argv} changed files"
    assert not (tmp_path / "new").exists(), f"{argv} created {tmp_path / 'new'}"
    return case, run / file


def _one_damaged_line(case: dict, path: Path) -> None:
    assert case["traceback"] is None, f"{case['argv']}: a traceback\n{case['traceback']}"
    lines = case["err"].strip().splitlines()
    assert case["rc"] == 2 and len(lines) == 1, f"{case['argv']}: exit {case['rc']}, stderr:\n{case['err']}"
    command = case["argv"][0]
    assert lines[0].startswith(f"normlab {command}: error: {path}: damaged ("), lines[0]
    assert "); " in lines[0], f"{lines[0]}: no fix named"


def _label(key: tuple[str, str]) -> str:
    return f"{key[0]} {key[1]}"


CONFIG_CASES = [(_label(k), argv, how) for k, argv in [*RUN_READERS.items(), (("report", "compare"), COMPARE)]
                for how in DAMAGE]


@pytest.mark.parametrize("argv, how", [c[1:] for c in CONFIG_CASES], ids=[f"{k}:{h}" for k, _, h in CONFIG_CASES])
def test_a_damaged_config_json_is_one_line_for_every_run_reader(world, tmp_path, argv, how):
    _one_damaged_line(*_damaged_case(world, tmp_path, argv, "config.json", DAMAGE[how]))


MODEL_CASES = [(_label(k), argv, how) for k, argv in MODEL_READERS.items() for how in ("malformed", "empty")]


@pytest.mark.parametrize("argv, how", [c[1:] for c in MODEL_CASES], ids=[f"{k}:{h}" for k, _, h in MODEL_CASES])
def test_a_damaged_model_config_json_is_one_line_for_every_model_reader(world, tmp_path, argv, how):
    case, path = _damaged_case(world, tmp_path, argv, "checkpoints/best/model_config.json", DAMAGE[how])
    _one_damaged_line(case, path)


OTHER_CASES = [(file, argv) for file, argvs in OTHER_FILES.items() for argv in argvs]


@pytest.mark.parametrize("file, argv", OTHER_CASES, ids=[f"{f}:{' '.join(a[:3])}" for f, a in OTHER_CASES])
def test_the_other_damaged_json_files_of_a_run_are_one_line(world, tmp_path, file, argv):
    _one_damaged_line(*_damaged_case(world, tmp_path, argv, file, DAMAGE["malformed"]))


def test_a_damaged_best_checkpoint_is_not_passed_over_by_inspect(world, tmp_path):
    """inspect RUN reads checkpoints/best; a damaged one is named, never swapped for latest."""
    case, path = _damaged_case(world, tmp_path, ["inspect", "{run}", "--out", "{new}", "--quiet"],
                               "checkpoints/best/model_config.json", "")
    assert case["rc"] == 2 and "checkpoints/best is damaged" in case["err"], case["err"]
    assert "checkpoints/latest instead" in case["err"], case["err"]


def test_a_damaged_analysis_cache_is_recomputed_by_report(world, tmp_path):
    """RUN/analysis/analysis.json is a cache the page reads: damage, not-UTF-8 included, is measured again."""
    run = tmp_path / "run"
    shutil.copytree(world, run)
    (run / "analysis").mkdir()
    (run / "analysis" / "analysis.json").write_bytes(b"\xff\xfe{")
    case = run_case(["report", "--quiet", str(run)])
    assert case["traceback"] is None and case["rc"] == 0, case
    assert (run / "analysis" / "analysis.json").read_text(encoding="utf-8").startswith("{")
