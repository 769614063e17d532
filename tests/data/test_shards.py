"""`normlab data prepare`: token shards equal the tokens of the whole text, read back as one
stream, and every damaged or mismatched shard folder is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from normlab.cli import main
from normlab.data.config import DataConfig
from normlab.data.corpus import load_corpus
from normlab.data.shards import TokenStream
from normlab.data.unigram import unigram_ce

TEXT = "".join(f"line {i}: the quick brown fox é ß {'x' * (i % 7)}\n" for i in range(3000))


def _cli(capsys, *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    return rc, capsys.readouterr().err


def _prepare(capsys, src: Path | str, out: Path, *extra: str) -> dict:
    rc, err = _cli(capsys, "data", "prepare", str(src), "--out", str(out), "--quiet", *extra)
    assert rc == 0, err
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture
def text_file(tmp_path: Path) -> Path:
    p = tmp_path / "corpus.txt"
    p.write_text(TEXT, encoding="utf-8")
    return p


def test_token_stream_reads_shards_as_their_concatenation() -> None:
    rng = np.random.default_rng(0)
    parts = [rng.integers(0, 500, n).astype(np.uint16) for n in (7, 1, 30, 12)]
    whole, ts = np.concatenate(parts), TokenStream(parts)
    assert len(ts) == len(whole)
    idx = rng.integers(0, len(whole), (5, 9))   # windows that cross shard boundaries
    assert np.array_equal(ts[idx], whole[idx])
    view, sub = ts[3:41], whole[3:41]
    assert len(view) == len(sub) and np.array_equal(view[np.arange(len(sub))], sub)
    assert np.array_equal(np.asarray(view[5:20]), sub[5:20])
    with pytest.raises(IndexError):
        view[np.array([len(sub)])]
    assert unigram_ce(ts[:40], ts[40:], 500) == unigram_ce(whole[:40], whole[40:], 500)


def test_shards_of_a_file_are_the_corpus_of_the_file(tmp_path, text_file, capsys) -> None:
    m = _prepare(capsys, text_file, tmp_path / "shards", "--shard-tokens", "10000")
    assert len(m["shards"]) > 3 and m["dtype"] == "uint16" and m["tokens"] == len(TEXT)
    assert [s["tokens"] for s in m["shards"][:-1]] == [10000] * (len(m["shards"]) - 1)
    assert m["sha256"] == m["source"]["documents"][0]["sha256"]  # a single file is its bytes exactly
    ref = load_corpus(DataConfig(corpus=str(text_file)))
    got = load_corpus(DataConfig(corpus=str(tmp_path / "shards")))
    assert got.sha256 == ref.sha256 and got.tokenizer.state() == ref.tokenizer.state()
    for a, b in ((got.train, ref.train), (got.val, ref.val)):
        assert len(a) == len(b) and np.array_equal(a[np.arange(len(b))], b)


def test_bpe_on_a_sample_encodes_the_stream_as_the_whole_text(tmp_path, data_dir, capsys) -> None:
    pytest.importorskip("tokenizers")
    m = _prepare(capsys, "tinyshakespeare", tmp_path / "bpe", "--tokenizer", "bpe", "--bpe-vocab", "300",
                 "--sample-mb", "0.2")
    assert m["tokenizer"]["name"] == "bpe" and m["tokenizer"]["vocab_size"] == 300
    assert "sample" in m["tokenizer"]["fitted_on"]
    import tokenizers

    tok = tokenizers.Tokenizer.from_str(json.loads((tmp_path / "bpe" / "tokenizer.json").read_text())["json"])
    whole = tok.encode((data_dir / "tinyshakespeare.txt").read_text(encoding="utf-8")).ids
    shards = np.concatenate([np.fromfile(tmp_path / "bpe" / s["file"], dtype=np.uint16) for s in m["shards"]])
    assert shards.tolist() == whole  # pieces cut after newlines encode as the whole text does
    rc, err = _cli(capsys, "train", "--preset", "smoke", "--set", f"data.corpus={tmp_path / 'bpe'}", "--quiet",
                   "--set", "train.steps=1", "--out", str(tmp_path / "run"))
    assert rc == 2 and "data.tokenizer='char'" in err and "data.tokenizer=bpe" in err and not (tmp_path / "run").exists()
    cfg = DataConfig(corpus=str(tmp_path / "bpe"), tokenizer="bpe", bpe_vocab=512)
    with pytest.raises(Exception, match="data.bpe_vocab=512.*set data.bpe_vocab=300"):
        load_corpus(cfg)
    assert load_corpus(DataConfig(corpus=str(tmp_path / "bpe"), tokenizer="bpe", bpe_vocab=300)).vocab_size == 300


def test_a_given_tokenizer_json_must_be_the_one_the_shards_were_made_with(tmp_path, text_file, capsys) -> None:
    tk = pytest.importorskip("tokenizers")
    paths = []
    for vocab in (300, 301):
        tok = tk.Tokenizer(tk.models.BPE())
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.train_from_iterator([TEXT], tk.trainers.BpeTrainer(
            vocab_size=vocab, show_progress=False, initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet()))
        paths.append(tmp_path / f"tok{vocab}.json")
        tok.save(str(paths[-1]))
    m = _prepare(capsys, text_file, tmp_path / "s", "--tokenizer", str(paths[0]))
    assert m["tokenizer"]["name"] == "pretrained" and m["tokenizer"]["fitted_on"] == "given"
    assert load_corpus(DataConfig(corpus=str(tmp_path / "s"), tokenizer=str(paths[0]))).vocab_size == 300
    with pytest.raises(Exception, match=r"tok301.json'.*not the tokenizer of data.corpus"):
        load_corpus(DataConfig(corpus=str(tmp_path / "s"), tokenizer=str(paths[1])))


def test_a_folder_is_its_sorted_files_joined_by_newlines(tmp_path, capsys) -> None:
    src = tmp_path / "docs"
    (src / "b").mkdir(parents=True)
    (src / "b" / "two.txt").write_text("second\n", encoding="utf-8")
    (src / "a.txt").write_text("first", encoding="utf-8")         # no final newline: one is put between
    (src / "c.txt").write_text("", encoding="utf-8")              # empty: nothing, not a blank line
    (src / "d.md").write_text("not matched", encoding="utf-8")
    (src / ".hidden.txt").write_text("hidden", encoding="utf-8")
    m = _prepare(capsys, src, tmp_path / "s")
    chars = json.loads((tmp_path / "s" / "tokenizer.json").read_text())["chars"]
    ids = np.fromfile(tmp_path / "s" / m["shards"][0]["file"], dtype=np.uint16)
    assert "".join(chars[i] for i in ids) == "first\nsecond\n"
    assert [d["path"] for d in m["source"]["documents"]] == ["a.txt", "b/two.txt", "c.txt"]
    rc, err = _cli(capsys, "data", "prepare", str(src), "--out", str(tmp_path / "t"), "--glob", "*.rst")
    assert rc == 2 and "--glob '*.rst'" in err and not (tmp_path / "t").exists()


def test_an_interrupted_prepare_leaves_nothing(tmp_path, text_file, capsys, monkeypatch) -> None:
    from normlab.data import prepare

    real, calls = prepare._ShardWriter.add, []

    def add(self, ids):
        calls.append(len(self.done))
        if len(calls) == 3:  # Ctrl-C with shard files already written
            raise KeyboardInterrupt
        real(self, ids)

    monkeypatch.setattr("normlab.data.stream.CHUNK", 1000)
    monkeypatch.setattr(prepare._ShardWriter, "add", add)
    rc, err = _cli(capsys, "data", "prepare", str(text_file), "--out", str(tmp_path / "s"), "--shard-tokens", "500")
    assert rc == 130 and calls[-1] >= 2, err  # two shards were complete when it stopped
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]  # no DIR, no hidden partial folder


@pytest.mark.parametrize("setup, words", [
    (lambda p: p.write_bytes(b"caf\xe9 au lait\n"), "not UTF-8 text"),
    (lambda p: p.write_bytes(b""), "the corpus is empty"),
])
def test_bad_sources_are_one_line(tmp_path, capsys, setup, words) -> None:
    src = tmp_path / "in.txt"
    setup(src)
    rc, err = _cli(capsys, "data", "prepare", str(src), "--out", str(tmp_path / "s"), "--quiet")
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_an_occupied_out_and_a_missing_src_are_refused_before_reading(tmp_path, text_file, capsys) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    rc, err = _cli(capsys, "data", "prepare", str(text_file), "--out", str(tmp_path / "full"))
    assert rc == 2 and "not empty" in err and (tmp_path / "full" / "keep.txt").read_text() == "mine"
    rc, err = _cli(capsys, "data", "prepare", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "s"))
    assert rc == 2 and "no such file or folder" in err


def _damage_truncate(d: Path) -> None:
    f = d / "tokens-00001.bin"
    f.write_bytes(f.read_bytes()[:-2])


def _damage_flip(d: Path) -> None:
    f = d / "tokens-00000.bin"
    raw = bytearray(f.read_bytes())
    raw[10] ^= 1
    f.write_bytes(bytes(raw))


def _damage_tokenizer(d: Path) -> None:
    state = json.loads((d / "tokenizer.json").read_text())
    state["chars"] = state["chars"][::-1]  # another tokenizer of the same size
    (d / "tokenizer.json").write_text(json.dumps(state))


def _damage_manifest(d: Path) -> None:
    (d / "manifest.json").write_text('{"format": "normlab-token-shards", "version": 99}')


def _damage_json(d: Path) -> None:
    (d / "manifest.json").write_text('{"format": ')


def _no_manifest(d: Path) -> None:
    (d / "manifest.json").unlink()


@pytest.mark.parametrize("damage, words", [
    (_damage_truncate, "tokens-00001.bin holds"), (_damage_flip, "tokens-00000.bin has sha256"),
    (_damage_tokenizer, "is not the tokenizer the manifest names"), (_damage_manifest, "version-1"),
    (_damage_json, "damaged"), (_no_manifest, "without manifest.json"),
])
def test_damaged_shards_are_one_line_and_exit_2(tmp_path, text_file, capsys, damage, words) -> None:
    _prepare(capsys, text_file, tmp_path / "s", "--shard-tokens", "40000")
    damage(tmp_path / "s")
    rc, err = _cli(capsys, "train", "--preset", "smoke", "--set", f"data.corpus={tmp_path / 's'}",
                   "--set", "train.steps=1", "--quiet", "--out", str(tmp_path / "run"))
    assert rc == 2, err
    assert words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before RUN is made


@pytest.mark.parametrize("pattern", ["../*.txt", "sub/../../*.txt", "/etc/*", "**/../../*.txt"])
def test_a_glob_that_leaves_src_is_refused_naming_it(tmp_path, capsys, pattern) -> None:
    src = tmp_path / "docs"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "in.txt").write_text("inside\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside\n", encoding="utf-8")
    rc, err = _cli(capsys, "data", "prepare", str(src), "--out", str(tmp_path / "t"), "--glob", pattern)
    assert rc == 2 and err.count("\n") == 1 and f"--glob {pattern!r}: reaches outside SRC" in err, err
    assert not (tmp_path / "t").exists()


def test_a_glob_match_linking_out_of_src_is_refused(tmp_path, capsys) -> None:
    src = tmp_path / "docs"
    src.mkdir()
    (src / "in.txt").write_text("inside\n", encoding="utf-8")
    (tmp_path / "away").mkdir()
    (tmp_path / "away" / "secret.txt").write_text("outside\n", encoding="utf-8")
    (src / "link.txt").symlink_to(tmp_path / "away" / "secret.txt")
    (src / "linked").symlink_to(tmp_path / "away", target_is_directory=True)
    for pattern in ("*.txt", "linked/*.txt"):
        rc, err = _cli(capsys, "data", "prepare", str(src), "--out", str(tmp_path / "t"), "--glob", pattern)
        assert rc == 2 and err.count("\n") == 1 and f"--glob {pattern!r}: matches " in err, err
        assert "outside SRC" in err and not (tmp_path / "t").exists()
    (src / "link.txt").unlink()
    (src / "inner.txt").symlink_to(src / "in.txt")  # a link that stays inside is read
    rc, _ = _cli(capsys, "data", "prepare", str(src), "--out", str(tmp_path / "t"), "--glob", "*.txt", "--quiet")
    assert rc == 0
