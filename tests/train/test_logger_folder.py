"""A logger declares its folder under RUN/ (``Logger.folder``), and RunDir learns the folders
from the loggers registry: a plugin-style logger registered here gets RUN/<its folder>/, the run
owns it like tensorboard/, and a resumed run writes on in the same folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.core.errors import UserError
from normlab.core.fsutil import read_jsonl
from normlab.run.dir import RunDir
from normlab.train import run_training
from normlab.train.loggers import LOGGERS, Logger, logger_folders


class LinesLogger(Logger):
    """What a plugin writes: one line per logged step, in its own folder."""

    folder = "plugin_lines"

    def log(self, metrics, step):
        with open(self.folder_path() / "lines.txt", "a", encoding="utf-8") as fh:
            fh.write(f"{step}\n")


@pytest.fixture
def registered():
    LOGGERS.add("lines", LinesLogger)
    try:
        yield
    finally:
        LOGGERS.remove("lines")


def test_a_plugin_logger_gets_its_folder_and_a_resumed_run_writes_on_in_it(tmp_path: Path, tiny, registered) -> None:
    run = tmp_path / "run"
    run_training(tiny.cfg('train.loggers=["lines", "tensorboard"]', "train.steps=20"), run, quiet=True)
    assert (run / "plugin_lines" / "lines.txt").read_text().split() == ["5", "10", "15", "20"]
    run_training(None, run, resume=True, quiet=True, steps=30)  # a second session of the same run
    lines = [int(s) for s in (run / "plugin_lines" / "lines.txt").read_text().split()]
    assert lines == [r["step"] for r in read_jsonl(run / "metrics.jsonl")] == list(range(5, 31, 5))
    assert logger_folders() == {"tensorboard": "tensorboard", "wandb": "wandb", "plugin_lines": "lines"}
    files = [p.relative_to(run) for p in run.rglob("*") if p.is_file()]
    assert Path("plugin_lines/lines.txt") in files and any(f.parts[0] == "tensorboard" for f in files)
    assert [f for f in files if not RunDir.owns(f, logger_folders())] == []  # the plugin's folder is the run's, as tensorboard/ is


def test_an_unregistered_folder_is_no_entry_of_a_run(tmp_path: Path) -> None:
    folders = logger_folders()
    assert not RunDir.owns("plugin_lines/lines.txt", folders) and RunDir.owns("tensorboard/events", folders)
    with pytest.raises(ValueError, match="declared: tensorboard, wandb"):
        RunDir(tmp_path).logger_dir("plugin_lines", folders)


@pytest.mark.parametrize("folder, why", [("checkpoints", "an entry of every run"), ("tensorboard", "logger 'tensorboard'"),
                                         ("a/b", "not one plain folder name"), (".hidden", "not one plain folder name")])
def test_a_folder_a_logger_cannot_have_is_refused_naming_the_logger(folder: str, why: str) -> None:
    bad = type("BadLogger", (Logger,), {"folder": folder})
    LOGGERS.add("bad", bad)
    try:
        with pytest.raises(UserError, match=f"logger 'bad': folder '{folder}' is {why}"):
            logger_folders()
    finally:
        LOGGERS.remove("bad")
