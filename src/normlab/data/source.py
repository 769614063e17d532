"""Where the corpus text comes from: a named corpus (downloaded, checksummed, cached) or a file.

Tiny Shakespeare is looked up in this order: ``data.data_dir`` (``--data-dir``), then
``$NORMLAB_DATA_DIR``, then the user cache (``$NORMLAB_CACHE_DIR``, else
``$XDG_CACHE_HOME/normlab``, else ``~/.cache/normlab``), downloading into the cache when
it is missing there. Every copy is verified against the published sha256.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_bytes


@dataclass(frozen=True)
class KnownCorpus:
    """A corpus normlab can fetch by name."""

    filename: str
    url: str
    sha256: str
    size: int


KNOWN = {
    # Karpathy's char-rnn copy: the file every Tiny Shakespeare result in the literature uses.
    "tinyshakespeare": KnownCorpus(
        filename="tinyshakespeare.txt",
        url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
        sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        size=1_115_394,
    ),
}


def cache_dir() -> Path:
    """The user cache of normlab (corpora and token arrays)."""
    if os.environ.get("NORMLAB_CACHE_DIR"):
        return Path(os.environ["NORMLAB_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "normlab"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download(url: str, dest: Path, timeout: float = 30.0) -> None:
    """Fetch ``url`` into ``dest`` atomically (tests replace this function; never the network)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (fixed https URL)
        atomic_write_bytes(dest, resp.read())


def _verified(path: Path, known: KnownCorpus) -> bytes:
    data = path.read_bytes()
    digest = sha256_bytes(data)
    if digest != known.sha256:
        raise UserError(f"{path}: sha256 {digest[:16]}... does not match the published "
                        f"{known.sha256[:16]}... ({len(data)} bytes, expected {known.size}); "
                        f"delete it or replace it with the file from {known.url}")
    return data


def read_corpus_bytes(corpus: str, data_dir: str | None) -> tuple[bytes, str]:
    """Raw bytes of the corpus and a description of where they came from."""
    known = KNOWN.get(corpus)
    if known is None:
        return _read_file(corpus), corpus
    if data_dir is not None:
        path = Path(data_dir).expanduser() / known.filename
        if not path.is_file():
            raise UserError(f"data.data_dir={data_dir!r}: no {known.filename} there; "
                            f"download it from {known.url} into that directory or drop --data-dir")
        return _verified(path, known), str(path)
    env = os.environ.get("NORMLAB_DATA_DIR")
    if env and (Path(env) / known.filename).is_file():
        path = Path(env) / known.filename
        return _verified(path, known), str(path)
    path = cache_dir() / "corpora" / known.filename
    if not path.is_file():
        try:
            download(known.url, path)
        except OSError as e:  # URLError, timeouts and DNS failures are all OSErrors
            raise UserError(f"cannot download {corpus} from {known.url} ({e}); put "
                            f"{known.filename} into {path.parent}, or into a directory named "
                            f"by --data-dir or $NORMLAB_DATA_DIR") from None
    return _verified(path, known), str(path)


def _read_file(corpus: str) -> bytes:
    path = Path(corpus).expanduser()
    if path.is_dir():
        raise UserError(f"data.corpus={corpus!r}: is a directory, not a text file; name one UTF-8 text file "
                        f"in it (e.g. {path / 'input.txt'}), or concatenate its files into one")
    if not path.is_file():
        names = ", ".join(KNOWN)
        raise UserError(f"data.corpus={corpus!r}: no such file; name a UTF-8 text file or a known corpus ({names})")
    return path.read_bytes()
