"""Corrupt inputs: damaged safetensors and metadata, torn or corrupt logs, non-UTF-8 files.

Each is a clear one-line error or a correct recovery. Corpus (empty, non-UTF-8) and study
database (newer schema) cases are in tests/data/test_corpus.py::test_bad_text_files and
tests/study/test_study_store.py::test_newer_schema_and_other_study_are_refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.core.errors import UserError
from normlab.model.io import save_model
from normlab.model.transformer import TransformerLM
from normlab.train import run_training

from .conftest import comparable, tiny_cfg
from .test_kill import _kill_at_step, _run_and_die_at


@pytest.fixture
def saved(tmp_path) -> Path:
    from normlab.model.transformer import TransformerLM

    return save_model(TransformerLM(tiny_cfg("model.vocab_size=65").model), tmp_path / "m")


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
@pytest.mark.parametrize("how, words", [
    ("truncate-data", "sha256|cannot load"), ("truncate-header", "not a safetensors"),
    ("flip-data", "does not match its sha256"), ("flip-header", "corrupt safetensors header|cannot load"),
    ("empty", "not a safetensors")])
def test_damaged_model_safetensors_is_a_one_line_error(saved, how, words):
    f = saved / "model.safetensors"
    data = bytearray(f.read_bytes())
    n = int.from_bytes(data[:8], "little")
    if how == "truncate-data":
        data = data[:-1000]
    elif how == "truncate-header":
        data = data[: 8 + n // 2]
    elif how == "flip-data":
        data[8 + n + 123] ^= 0x04  # one bit in one float: safetensors alone would load it
    elif how == "flip-header":
        data[8 + 2] ^= 0x7F
    else:
        data = bytearray()
    f.write_bytes(bytes(data))
    with pytest.raises(UserError, match=words) as e:
        TransformerLM.load(saved)
    assert "\n" not in str(e.value)


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
@pytest.mark.parametrize("text, words", [
    ("{", "not valid JSON"), ('{"n_layer": -1}', "n_layer"), ('{"n_layerz": 2}', "n_layerz"),
    ("[]", "not a JSON object"), ("", "empty file"), ('{"placement": "nope"}', "placement")])
def test_damaged_model_config_is_a_one_line_error_naming_the_field(saved, text, words):
    (saved / "model_config.json").write_text(text)
    with pytest.raises(UserError, match=words) as e:
        TransformerLM.load(saved)
    assert "\n" not in str(e.value)


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_foreign_safetensors_without_a_hash_still_load(saved):
    """Interop: files from other tools carry no sha256 and are loaded (structure-checked only)."""
    import safetensors.torch as st

    m = TransformerLM.load(saved)
    st.save_model(m, str(saved / "model.safetensors"))  # no normlab metadata
    assert TransformerLM.load(saved).state_dict().keys() == m.state_dict().keys()


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_torn_last_metrics_line_resume_and_report_work(tmp_path, reference):
    run = tmp_path / "run"
    _run_and_die_at(run, _kill_at_step(27))
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 30, "train/lo')   # what a kill mid-write leaves
    assert main(["report", str(run)]) == 0   # the report reads the complete lines
    assert (run / "report" / "index.html").is_file()
    assert run_training(None, run, resume=True, quiet=True)["status"] == "completed"
    assert comparable(run) == reference


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_corruption_before_the_last_line_is_one_line_exit_2(tmp_path, capsys):
    run = tmp_path / "run"
    run_training(tiny_cfg("train.steps=10"), run, quiet=True)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    lines[0] = lines[0][:-5]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 1 is not valid JSON" in err


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_damaged_config_json_on_resume_is_one_line_exit_2(tmp_path, capsys):
    run = tmp_path / "run"
    _run_and_die_at(run, _kill_at_step(12))
    cfg = json.loads((run / "config.json").read_text())
    cfg["model"]["n_head"] = 5  # does not divide d_model
    (run / "config.json").write_text(json.dumps(cfg))
    before = sorted(p.name for p in run.rglob("*"))
    assert main(["train", "--quiet", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "model.n_head" in err
    assert sorted(p.name for p in run.rglob("*")) == before  # nothing created or removed


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
def test_non_utf8_files_are_one_line_errors(tmp_path, capsys):
    (tmp_path / "c.toml").write_bytes(b'[model]\nplacement = "pr\xe9"\n')
    assert main(["train", "--config", str(tmp_path / "c.toml"), "--out", str(tmp_path / "r")]) == 2
    assert "not UTF-8" in capsys.readouterr().err and not (tmp_path / "r").exists()
    (tmp_path / "s.toml").write_bytes(b'name = "\xff"\n')
    assert main(["study", "run", str(tmp_path / "s.toml"), "--store", str(tmp_path / "st"), "--dry-run"]) == 2
    assert "not UTF-8" in capsys.readouterr().err and not (tmp_path / "st").exists()
