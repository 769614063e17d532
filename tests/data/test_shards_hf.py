"""`normlab data prepare hf:...`: a Hugging Face dataset read from disk, never from the network."""

from __future__ import annotations

import json
import socket
import sys

import numpy as np
import pytest

from normlab.cli import main

ROWS = ["first row", "second row\n", "", "third"]


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))   # an empty user cache
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-home" / "datasets"))

    def refuse(self, *a, **k):
        raise AssertionError("a test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def _text(out) -> str:
    m = json.loads((out / "manifest.json").read_text())
    chars = json.loads((out / "tokenizer.json").read_text())["chars"]
    return "".join(chars[i] for s in m["shards"] for i in np.fromfile(out / s["file"], dtype=np.uint16))


def test_a_saved_dataset_split_is_its_rows_joined_by_newlines(tmp_path, capsys) -> None:
    ds = pytest.importorskip("datasets")
    ds.DatasetDict({"train": ds.Dataset.from_dict({"text": ROWS * 3, "n": list(range(12))}),
                    "validation": ds.Dataset.from_dict({"text": ["held out"], "n": [0]})}).save_to_disk(tmp_path / "d")
    assert main(["data", "prepare", f"hf:{tmp_path / 'd'}", "--out", str(tmp_path / "s"), "--quiet"]) == 0
    assert _text(tmp_path / "s") == "first row\nsecond row\nthird\n" * 2 + "first row\nsecond row\nthird"
    m = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert m["source"]["kind"] == "hf" and m["source"]["rows"] == 12 and m["source"]["split"] == "train"
    assert main(["data", "prepare", f"hf:{tmp_path / 'd'}", "--split", "validation", "--out", str(tmp_path / "v"),
                 "--quiet"]) == 0
    assert _text(tmp_path / "v") == "held out"
    for args, words in ((["--split", "test"], "choose --split from train, validation"),
                        (["--column", "n"], "not text"), (["--column", "body"], "choose --column from text, n")):
        capsys.readouterr()
        assert main(["data", "prepare", f"hf:{tmp_path / 'd'}", "--out", str(tmp_path / "x"), *args]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


def test_a_local_folder_of_json_lines_loads_without_the_network(tmp_path) -> None:
    pytest.importorskip("datasets")
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "part.jsonl").write_text("".join(json.dumps({"text": r}) + "\n" for r in ROWS))
    assert main(["data", "prepare", f"hf:{tmp_path / 'j'}", "--out", str(tmp_path / "s"), "--quiet"]) == 0
    assert _text(tmp_path / "s") == "first row\nsecond row\nthird"


def test_a_name_not_in_the_cache_is_refused_not_downloaded(tmp_path, capsys) -> None:
    pytest.importorskip("datasets")
    assert main(["data", "prepare", "hf:someone/not-cached", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "never downloads" in err and len(err.strip().splitlines()) == 1


def test_without_the_datasets_package_the_extra_is_named(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets -> ImportError
    assert main(["data", "prepare", "hf:anything", "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'normlab[datasets]'" in err and len(err.strip().splitlines()) == 1
