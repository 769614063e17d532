"""A Hub id without network fails at once, in one line that names the local-directory way.

No network is used: HF_HUB_OFFLINE, or a Hub endpoint on a closed loopback port.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.core.errors import UserError

NAME = "normlab-tests/not-cached-anywhere"


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def _closed_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_line(err: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for what in (NAME, "local directory", "config.json", "model.safetensors", "tokenizer.json"):
        assert what in lines[0]


@pytest.mark.usefixtures("empty_cache")
def test_offline_flag_fails_fast(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    import transformers

    def no_download(*a: object, **k: object) -> None:
        raise AssertionError("transformers was asked for the model (its retries take ~25 s offline)")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", no_download)
    assert main(["inspect", NAME, "--out", str(tmp_path / "out")]) == 2
    _check_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()
    assert main(["import", NAME, str(tmp_path / "lab")]) == 2  # import reads the same way
    _check_line(capsys.readouterr().err)


@pytest.mark.usefixtures("empty_cache")
def test_unreachable_hub_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from normlab.inspect import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(UserError, match="Hub is unreachable .*ConnectionRefusedError"):
        hub.hub_source(NAME)


def test_a_directory_is_read_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.inspect import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.hub_source(str(tmp_path)) == {}
