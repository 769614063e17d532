"""The store's reads for code outside it (nobody else opens study.sqlite): ``span``,
``running`` and ``peek``, which reads a store without writing anything in its folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.core.errors import UserError
from normlab.study.runner import open_store
from normlab.study.spec import StudySpec
from normlab.study.store import Store, peek


def _files(root: Path) -> dict[str, bytes]:
    return {name: (root / name).read_bytes() for name in ("spec.json", "study.sqlite")}


def test_span_running_and_started_at_read_what_the_claims_wrote(tmp_path, fake_path) -> None:
    store = open_store(StudySpec(name="fake", trial=f"{fake_path}:ok", seeds=[0, 1]), tmp_path / "s")
    assert store.span() is None and store.running() == []
    lease = store.claim("me:1", lease_s=60)
    assert lease is not None
    assert store.running() == [(lease.id, lease.params)] and store.span() is None  # started, none finished
    store.finish(lease, "me:1", summary={"status": "completed"})
    done = {t.id: t for t in store.trials()}[lease.id]
    assert done.started_at is not None and done.finished_at is not None and done.started_at <= done.finished_at
    assert store.span() == (done.started_at, done.finished_at) and store.running() == []
    other = [t for t in store.trials() if t.id != lease.id]
    assert [t.started_at for t in other] == [None]  # never claimed


def test_peek_reads_the_trials_and_writes_nothing(tmp_path, fake_path) -> None:
    root = tmp_path / "s"
    store = open_store(StudySpec(name="fake", trial=f"{fake_path}:ok", seeds=[0, 1]), root)
    lease = store.claim("me:1", lease_s=60)
    store.finish(lease, "me:1", summary={"status": "completed"})
    want = store.trials()
    store.close()
    before = _files(root)
    spec, trials = peek(root)
    assert spec["name"] == "fake" and trials == want
    assert _files(root) == before  # no WAL switch, no check written: not a byte changed
    assert Store.is_store(root) and Store.is_made(root) and Store.has_db(root)


def test_peek_refuses_what_is_not_a_store_it_reads(tmp_path) -> None:
    with pytest.raises(UserError, match="spec.json: missing"):
        peek(tmp_path)
    (tmp_path / "spec.json").write_text('{"name": "x"}')
    with pytest.raises(UserError, match="study.sqlite: missing"):
        peek(tmp_path)
    (tmp_path / "study.sqlite").write_bytes(b"not a database at all, just text" * 4)
    with pytest.raises(UserError, match="not a study database"):
        peek(tmp_path)
    assert not Store.has_db(tmp_path / "elsewhere") and not Store.is_store(tmp_path / "elsewhere")
