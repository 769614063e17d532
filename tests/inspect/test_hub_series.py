"""`normlab inspect --series hf:REPO@REV,...`: the revisions of one Hub repository, read from a
local Hugging Face cache built here in huggingface_hub's layout (refs/<rev> -> commit,
snapshots/<commit>/ linking into blobs/), three revisions of a tiny GPT-2 with different
weights. Nothing is downloaded: HF_HUB_OFFLINE is set and opening a socket fails the test.
The series has one row set per revision in step order, each the measurement of that
revision's own weights; a missing revision is one line naming it and its download, status 2."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

from normlab.cli import main  # noqa: E402
from normlab.core.errors import UserError  # noqa: E402

pytest.importorskip("transformers")

REPO = "normlab-tests/tiny-gpt2"
SEEDS = {"step100": 1, "step200": 2, "step300": 3}  # revision -> the seed of its weights
ARGS = ["--context", "32", "--max-tokens", "64", "--quiet"]
WORDS = "the king my lord shall come to night and speak of war with her good brother now".split()


def _put(cache: Path, rev: str, folder: Path) -> str:
    """``folder``'s files as revision ``rev`` of REPO in ``cache``, as a download leaves them."""
    root = cache / f"models--{REPO.replace('/', '--')}"
    commit = hashlib.sha1(rev.encode()).hexdigest()
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True)
    (root / "blobs").mkdir(exist_ok=True)
    for f in sorted(folder.iterdir()):
        data = f.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / f.name).symlink_to(os.path.relpath(blob, snap))
    (root / "refs").mkdir(exist_ok=True)
    (root / "refs" / rev).write_text(commit)  # no newline, as huggingface_hub writes it
    return commit


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The cache, the text file and each revision's plain save_pretrained folder."""
    tmp = tmp_path_factory.mktemp("hub")
    rng = random.Random(0)
    text = tmp / "text.txt"
    text.write_text(" ".join(rng.choice(WORDS) for _ in range(4000)), encoding="utf-8")
    tok = tiny.tokenizer(text.read_text(encoding="utf-8"), "gpt2")
    plain, commits = {}, {}
    for rev, seed in SEEDS.items():
        plain[rev] = tmp / "plain" / rev
        tiny.hf_model("gpt2", seed=seed).save_pretrained(plain[rev])
        tok.save_pretrained(plain[rev])
        commits[rev] = _put(tmp / "cache", rev, plain[rev])
    return {"cache": tmp / "cache", "text": str(text), "plain": plain, "commits": commits}


@pytest.fixture
def offline(hub: dict, monkeypatch: pytest.MonkeyPatch) -> dict:
    from huggingface_hub import constants

    def no_network(*a: object, **k: object) -> None:
        raise AssertionError("the network was used")

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub["cache"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", no_network)
    return hub


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_layout_is_huggingface_hubs(hub: dict) -> None:
    from huggingface_hub import scan_cache_dir

    (repo,) = scan_cache_dir(hub["cache"]).repos
    assert repo.repo_id == REPO and {r for rev in repo.revisions for r in rev.refs} == set(SEEDS)


def test_a_series_of_cached_revisions(offline: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.inspect import inspect_model

    monkeypatch.chdir(tmp_path)  # the default --out: inspect/<repository name>-over-training
    src = f"hf:{REPO}@step300,step100,step200"  # listed out of order: rows in step order
    assert main(["inspect", "--series", src, "--text", offline["text"], *ARGS]) == 0
    out = tmp_path / "inspect" / "tiny-gpt2-over-training"
    page = out / "report" / "index.html"
    assert capsys.readouterr().out.strip() == str(page.relative_to(tmp_path))
    rows = _rows(out / "series.csv")
    steps = [int(r["step"]) for r in rows]
    assert steps == sorted(steps) and sorted(set(steps)) == [100, 200, 300]
    meta = json.loads((out / "series.json").read_text())
    assert meta["name"] == "tiny-gpt2"
    assert meta["revisions"] == {str(s): f"{REPO}@step{s}" for s in (100, 200, 300)}
    for s in (100, 200, 300):  # each step is its own revision's snapshot
        assert Path(meta["sources"][str(s)]).name == offline["commits"][f"step{s}"]
    loss = {int(r["step"]): float(r["value"]) for r in rows if r["metric"] == "loss"}
    assert len(set(loss.values())) == 3  # three different models
    # step 200 measures what a plain inspect of that revision's save_pretrained folder measures
    inspect_model(str(offline["plain"]["step200"]), tmp_path / "plain", offline["text"], context=32,
                  max_tokens=64, quiet=True)
    own = _rows(tmp_path / "plain" / "probe.csv")
    assert [r["value"] for r in rows if r["step"] == "200"] == [r["value"] for r in own]
    html = page.read_text()
    assert "Over 3 checkpoints from step 100 to 300" in html
    assert all(f"{REPO}@step{s}" in html for s in (100, 200, 300))  # the checkpoint table names revisions
    assert (page.parent / "figures" / "series_rms_stream.png").is_file()
    # the branch moved to another commit: its measured step is no longer that revision, refused
    ref = offline["cache"] / f"models--{REPO.replace('/', '--')}" / "refs" / "step100"
    ref.write_text(offline["commits"]["step200"])
    try:
        assert main(["inspect", "--series", src, "--text", offline["text"], *ARGS]) == 2
    finally:
        ref.write_text(offline["commits"]["step100"])
    assert "step 100 was measured from" in capsys.readouterr().err


def _fails(argv: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["inspect", *argv, "--out", str(out), *ARGS]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert not out.exists()  # nothing written
    return err


@pytest.mark.usefixtures("offline")
def test_missing_revisions_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = f"hf:{REPO}@step100,step400,step200,step500"
    err = _fails(["--series", src], tmp_path / "o", capsys).partition(f"{src}: ")[2]
    assert err.startswith("revisions step400, step500 of normlab-tests/tiny-gpt2 not in the local Hugging Face cache")
    assert "step100" not in err and "step200" not in err  # the cached ones are not named
    assert f"for r in step400 step500; do hf download {REPO} --revision $r; done" in err
    assert "HF_HUB_OFFLINE is set" in err
    err = _fails(["--series", f"hf:{REPO}@step100,step400"], tmp_path / "o", capsys)
    assert err.endswith(f"download it where the Hub is reachable (HF_HUB_OFFLINE is set here) with: "
                        f"hf download {REPO} --revision step400")
    err = _fails(["--series", "hf:normlab-tests/never-cached@step1,step2"], tmp_path / "o", capsys)
    assert "revisions step1, step2 of normlab-tests/never-cached not in" in err


@pytest.mark.usefixtures("offline")
def test_online_it_still_reads_only_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    err = _fails(["--series", f"hf:{REPO}@step100,step400"], tmp_path / "o", capsys)  # the socket guard holds
    assert err.endswith(f"download it with: hf download {REPO} --revision step400")


def test_a_partial_download_is_missing(offline: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    part = tmp_path / "part"
    part.mkdir()
    (part / "tokenizer.json").write_text("{}")  # stopped before config.json and the weights
    _put(offline["cache"], "step400", part)
    try:
        err = _fails(["--series", f"hf:{REPO}@step100,step400"], tmp_path / "o", capsys)
        assert "revision step400 of" in err and "--revision step400" in err
    finally:
        (offline["cache"] / f"models--{REPO.replace('/', '--')}" / "refs" / "step400").unlink()


def test_the_environment_names_the_cache(hub: dict, tmp_path: Path) -> None:
    """HF_HUB_CACHE and HF_HUB_OFFLINE as a user sets them, in a fresh process."""
    env = {**os.environ, "HF_HUB_CACHE": str(hub["cache"]), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    got = subprocess.run([sys.executable, "-m", "normlab", "inspect", "--series", f"hf:{REPO}@step100,step999",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True, env=env, timeout=300)
    assert got.returncode == 2 and len(got.stderr.strip().splitlines()) == 1, got.stderr
    assert f"({hub['cache']})" in got.stderr and "--revision step999" in got.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.usefixtures("offline")
def test_steps_of_revisions() -> None:
    from normlab.inspect.hub import hub_series, hub_series_name

    assert [s for s, _, _ in hub_series(f"hf:{REPO}@step200,step100")] == [200, 100]  # members() sorts
    commits = [hub_series(f"hf:{REPO}@{r}")[0][1].name for r in ("step300", "step100")]
    # names without a step (here commit hashes): their place in the list
    got = hub_series(f"hf:{REPO}@{commits[0]},{commits[1]}")
    assert [(s, f.name) for s, f, _ in got] == [(0, commits[0]), (1, commits[1])]
    assert hub_series_name(f"hf:{REPO}@step1") == "tiny-gpt2"
    cases = [
        (f"hf:{REPO}@step100,{commits[1]}", "has no step<N> in its name but step100 has"),
        (f"hf:{REPO}", "name the repository and its revisions.*cached here: step100, step200, step300"),
        (f"hf:{REPO}@step100,step100", "revision step100 is listed twice"),
        ("hf:not a repo!@step1", "is not a Hub repository id"),
    ]
    for src, match in cases:
        with pytest.raises(UserError, match=match):
            hub_series(src)
