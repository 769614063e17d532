"""Docs that run: every fenced code block of README.md and docs/*.md, at smoke size.

Each block carries a language:

- ``bash`` / ``sh``: each line is a ``normlab`` command, run in-process through
  ``normlab.cli.main`` (status 0 expected), in order, in one fresh directory per page;
- ``python``: run as a script (a fresh interpreter) in a temporary directory;
- ``toml``: parsed; a study spec (it has ``axes``) is also dry-run;
- ``text``: usage, output, file layouts; not run.

Smoke size comes from the explicit rewrites of ``SMOKE`` below, applied to a command's
text before it runs (each with its reason); nothing in the product changes its behaviour
for the docs. The directory of each page also holds what the docs name as already there:
``gpt2`` and ``my-llama`` (tiny random transformers models with their tokenizers, saved as
``save_pretrained`` writes them: a local path wins over a Hub id) and ``my_study.toml``
(the spec block of docs/studies.md); a python block that names a study store of ``STORES``
gets that store, made by the page's own command at smoke size. A block that cannot run here carries
``<!-- docs-test: skip (why) -->`` on the line before it; an unmarked block that fails
fails this test.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL, PYTHON, TOML, TEXT = {"bash", "sh", "shell"}, {"python"}, {"toml"}, {"text"}
FENCE = re.compile(r"^(\s*)(`{3,})(\S*)\s*$")
MARK = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*\((?P<why>[^)]+)\)\s*-->\s*$")

# (pattern, replacement, why): applied in order to each command (comments stripped).
# Appended options win: argparse keeps the last value and `--set` applies left to right.
SMOKE: list[tuple[str, str, str]] = [
    (r"^\. \.venv/bin/activate$", "", "the test runs the normlab it imports"),
    (r"^pip install .*$", "", "the extras are installed where the tests run"),
    (r"^(normlab train .*)$", r"\1 --set train.steps=2 --set train.batch_size=4 --set train.eval_batches=1 --quiet",
     "two optimizer steps of the same config"),
    (r"^(normlab probe .*)$", r"\1 --seeds 1 --d-model 32 --n-head 2 --context 16 --batch-size 2 --n-proj 0 --quiet",
     "one seed of a small model at the same placements and depths"),
    (r"^(normlab study run pre-vs-post .*)$", r"\1 --scale smoke --workers 1 --set train.steps=3",
     "the preset's smoke scale, three steps, in-process"),
    (r"^(normlab study run stability-map .*)$", r"\1 --scale smoke --workers 1 --set train.steps=3",
     "the preset's smoke grid, three steps, in-process"),
    (r"^normlab study run --store S$", "normlab study run --store studies/pvp",
     "S stands for a store started earlier: the one of the line before"),
    (r"^(normlab inspect .*)$", r"\1 --max-tokens 128 --quiet", "a short batch"),
    (r"^(normlab train .*keep_checkpoints=true.*)$", r"\1 --set train.checkpoint_every=1",
     "two steps keep two step checkpoints, a series"),
    (r"runs/20260101-120000", "{run}", "a lab run: the session's smoke run"),
]


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    skip: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, dedented, with the skip mark of the line before each."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = m.groups()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
        assert end is not None, f"{page.relative_to(ROOT)}:{i + 1}: unclosed code block"
        code = "\n".join(x[len(indent):] if x.startswith(indent) else x.lstrip() for x in lines[i + 1:end])
        mark = MARK.match(lines[i - 1]) if i else None
        out.append(Block(page, i + 1, lang, code, mark["why"].strip() if mark else None))
        i = end + 1
    return out


def marks(page: Path) -> int:
    return sum(bool(MARK.match(x)) for x in page.read_text(encoding="utf-8").splitlines())


ALL = [b for p in PAGES for b in blocks(p)]


def test_every_block_says_what_it_is_and_every_mark_has_its_block() -> None:
    assert len(PAGES) > 5 and len([b for b in ALL if b.lang in SHELL | PYTHON]) >= 8  # the reader found them
    untagged = [b.where for b in ALL if b.lang not in SHELL | PYTHON | TOML | TEXT]
    assert not untagged, (f"code blocks without a known language at {', '.join(untagged)}: tag them bash or "
                          "python (run by tests/docs/test_docs_run.py), toml, or text (not run)")
    for page in PAGES:  # a mark not right before a block would silently skip nothing
        marked = [b for b in ALL if b.page == page and b.skip]
        assert marks(page) == len(marked), f"{page.relative_to(ROOT)}: a docs-test mark is not right before a block"
    malformed = [f"{p.relative_to(ROOT)}:{i}" for p in PAGES
                 for i, x in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if "docs-test" in x and not MARK.match(x) and x.lstrip().startswith("<!--")]
    assert not malformed, f"write the mark as <!-- docs-test: skip (why) -->, with its reason: {malformed}"


def test_the_rewrites_are_used() -> None:
    # A rewrite that matches nothing is stale: the command it was for has changed.
    commands = [c for b in ALL if b.lang in SHELL and not b.skip for c in _commands(b.code)]
    for pattern, _, why in SMOKE:
        assert any(re.search(pattern, c) for c in commands), f"SMOKE rewrite {pattern!r} ({why}) matches no command"


# ---------------------------------------------------------------------------------- running
def _commands(code: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, comments dropped, && split."""
    out: list[str] = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        cmd: list[str] = []
        for w in [*words, "&&"]:
            if w == "&&":
                if cmd:
                    out.append(shlex.join(cmd))
                cmd = []
            else:
                cmd.append(w)
    return out


def _smoke(cmd: str, run: Path) -> str:
    for pattern, repl, _ in SMOKE:
        cmd = re.sub(pattern, repl, cmd)
    return cmd.replace("{run}", str(run)).strip()


def _run(cmd: str, where: str) -> None:
    from normlab.cli import main

    argv = shlex.split(cmd)
    assert argv[0] == "normlab", (f"{where}: no way to run `{cmd}` here: add a SMOKE rewrite in "
                                  "tests/docs/test_docs_run.py or mark the block <!-- docs-test: skip (why) -->")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            rc = main(argv[1:])
        except SystemExit as e:  # argparse: unknown options, bad values
            rc = e.code if isinstance(e.code, int) else 1
    assert rc == 0, f"{where}: `{cmd}` exited {rc}:\n{out.getvalue()[-3000:]}"


@pytest.fixture(scope="session")
def models(shared_dir) -> Path:
    """Tiny stand-ins for the models the docs name: ./gpt2, ./my-llama (and a smoke run), built
    once for every worker; the pages copy the models and only read the run."""
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "tests" / "inspect"))
    import tiny

    from normlab.cli import main

    corpus = Path(os.environ.get("NORMLAB_DATA_DIR", "")) / "tinyshakespeare.txt"
    if not corpus.is_file():  # the convention of tests/conftest.py's data_dir
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")

    def build(d: Path) -> None:
        text = corpus.read_text(encoding="utf-8")
        tiny.save("gpt2", text, d / "gpt2")
        cfg = tiny.hf_config("llama")
        cfg.max_position_embeddings = 256  # docs/training.md trains it at model.context=256
        import transformers

        transformers.LlamaForCausalLM(cfg).save_pretrained(d / "my-llama")
        tiny.tokenizer(text, "llama").save_pretrained(d / "my-llama")
        argv = ["train", "--preset", "smoke", "--set", "train.steps=2", "--quiet", "--out", str(d / "run")]
        assert main(argv) == 0

    return shared_dir("doc-models", build)


SHELL_PAGES = [p for p in PAGES if any(b.lang in SHELL and not b.skip for b in blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", SHELL_PAGES, ids=[p.name for p in SHELL_PAGES])
def test_shell_blocks_run(page: Path, models: Path, data_dir: Path, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing here may reach for the network
    for name in ("gpt2", "my-llama"):
        shutil.copytree(models / name, tmp_path / name)
    spec = next((b for b in blocks(ROOT / "docs" / "studies.md") if b.lang in TOML), None)
    if spec is not None:
        (tmp_path / "my_study.toml").write_text(spec.code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    ran = 0
    for b in blocks(page):
        if b.lang not in SHELL or b.skip:
            continue
        for cmd in _commands(b.code):
            smoke = _smoke(cmd, models / "run")
            if smoke:
                _run(smoke, f"{b.where} (as `{smoke}`)")
                ran += 1
    assert ran


PY_BLOCKS = [b for b in ALL if b.lang in PYTHON and not b.skip]
# Study stores python blocks read as already there (a notebook after the page's shell lines):
# path in the block -> the docs' command that makes it (run through SMOKE, once per session).
STORES = {"studies/pvp": "normlab study run pre-vs-post --store studies/pvp"}


@pytest.fixture(scope="session")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding every store of ``STORES``, each made at smoke size."""
    corpus = Path(os.environ.get("NORMLAB_DATA_DIR", "")) / "tinyshakespeare.txt"
    if not corpus.is_file():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    d = tmp_path_factory.mktemp("doc-stores")
    for name, cmd in STORES.items():
        assert any(cmd in b.code for b in ALL if b.lang in SHELL), f"STORES: no docs page runs `{cmd}` any more"
        _run(_smoke(cmd, d).replace(f"--store {name}", f"--store {d / name}") + " --quiet", f"STORES[{name!r}]")
    return d


@pytest.mark.parametrize("block", PY_BLOCKS, ids=[b.where for b in PY_BLOCKS])
def test_python_blocks_run(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    for name in STORES:  # made only when some block needs it
        if name in block.code:
            shutil.copytree(request.getfixturevalue("stores") / name, tmp_path / name)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, f"{block.where}: the python block failed:\n{res.stderr[-3000:]}"


TOML_BLOCKS = [b for b in ALL if b.lang in TOML and not b.skip]


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=[b.where for b in TOML_BLOCKS])
def test_toml_blocks_parse(block: Block, tmp_path: Path, data_dir: Path) -> None:
    data = tomllib.loads(block.code)
    if "axes" in data:  # a study spec: it must validate and expand
        spec = tmp_path / "spec.toml"
        spec.write_text(block.code, encoding="utf-8")
        _run(f"normlab study run {spec} --store {tmp_path / 'S'} --dry-run", block.where)
