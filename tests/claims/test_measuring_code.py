"""The measuring code is registered, and every launch is in history.jsonl.

A claim's measuring code (``claims/measuring_code.py``) changes with a helper it imports and not
with a module that only publishes; a registration from other measuring code refuses the run in
one line naming the claim and the module, or marks its parts post-hoc with --allow-post-hoc; a
registration of format 2 (none recorded) still loads and says so; a failed or interrupted run
leaves its launch and end lines, which the ledger of seen seeds skips."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gitrepo import commit, need_git, repo  # noqa: E402

from normlab.claims import history, ledger, registered, registration, run_claims  # noqa: E402
from normlab.claims import measuring_code as mc  # noqa: E402
from normlab.claims.claim import CLAIMS  # noqa: E402
from normlab.core import stopping  # noqa: E402
from normlab.core.errors import UserError  # noqa: E402
from normlab.stats.effects import Effect  # noqa: E402

QUICK, TRAINING, FRONTIER = "xiong-thm1", "zloss-logz", "frontier-placement"
HELPER = "normlab.stats.effects"  # the Welch and one-sample helpers every claim's effects come from
SMALL = {"seeds": 3, "depths": [2, 4], "d_model": 32}
EFFECT = Effect(estimate=1.0, lo=0.5, hi=1.5, n_a=5, se=0.2, df=4.0)
EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence"


def edited(*modules: str) -> mc.Graph:
    """The import graph of the source with ``modules`` edited (a comment appended)."""
    return mc.Graph(lambda m: None if (src := mc.read_source(m)) is None else src + b"\n# edited\n" * (m in modules))


def test_the_hash_follows_the_measuring_helpers_and_nothing_else() -> None:
    quick, training, frontier = (CLAIMS.get(i) for i in (QUICK, TRAINING, FRONTIER))
    code = mc.measuring_code(training)
    assert list(code) == sorted(code) and code == mc.measuring_code(training, mc.Graph())  # sorted, deterministic
    assert {"normlab.claims.studies", "normlab.study.horizons", "normlab.study.outcome", HELPER,
            "normlab.data.unigram", "normlab.train.step"} <= set(code)
    assert {"normlab.diagnostics.measurements", "normlab.claims.quickrun", HELPER} <= set(mc.measuring_code(quick))
    assert "normlab.stats.frontier" in mc.measuring_code(frontier) and "normlab.stats.frontier" not in code
    for c in (quick, training):
        assert not [m for m in mc.measuring_code(c) if m.split(".")[1] in ("cli", "report", "core", "inspect")
                    or m in ("normlab.claims.output", "normlab.claims.decision", "normlab.claims.registration")]
        was = mc.measuring_hash(c)
        assert mc.measuring_hash(c, edited(HELPER)) != was  # a helper the claim imports (indirectly)
        assert mc.measuring_hash(c, edited("normlab.report.html", "normlab.claims.output", "normlab.cli.claims_cmd",
                                           "normlab.claims.decision")) == was
    assert mc.measuring_hash(training, edited("normlab.study.outcome")) != mc.measuring_hash(training)
    assert mc.measuring_hash(quick, edited("normlab.study.outcome")) == mc.measuring_hash(quick)  # not imported
    assert mc.differing({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == ["b", "c (new)"]


def test_imports_are_read_from_the_source(tmp_path: Path) -> None:
    """`from X import name` reaches X.name when a module, else X; a module named in a string counts;
    what `if TYPE_CHECKING:` imports, a parent package and a non-measuring module do not."""
    src = {"normlab.study.a": b"from typing import TYPE_CHECKING\nfrom normlab.study import b\n"
                              b"from normlab.stats.c import f\nR = Registry('x', catalogue='normlab.model.d')\n"
                              b"if TYPE_CHECKING:\n    import normlab.train.e\nimport normlab.core.log\n"
                              b"def g():\n    from normlab.data import h\n",
           "normlab.study.b": b"", "normlab.stats.c": b"f = 1\n", "normlab.model.d": b"'normlab.run.i:fn'\n",
           "normlab.train.e": b"", "normlab.core.log": b"", "normlab.data": b"h = 1\n", "normlab.run.i": b"",
           "normlab.study": b"import normlab.stats.never\n"}
    g = mc.Graph(src.get)
    assert list(g.closure(("normlab.study.a",))) == ["normlab.data", "normlab.model.d", "normlab.run.i",
                                                     "normlab.stats.c", "normlab.study.a", "normlab.study.b"]


def _registered(root: Path, claims: list[Any], drop_code: bool = False) -> Path:
    """``claims`` registered at scale cpu and committed in ``root``; ``drop_code``: as a format-2 file."""
    doc = registration.document(claims, "cpu")
    if drop_code:
        doc.pop("measuring_code")
        for e in doc["claims"].values():
            e.pop("measuring_code")
        doc["version"] = 2
        doc["document_hash"] = registration.document_hash(doc)
    f = root / "registration.json"
    registration.write(f, doc, force=True)
    commit(root, f, 1_000_000_000)
    return f


def _mark(reg: Any, c: Any) -> list[dict[str, Any]]:
    rec = {"id": c.id, "quick": True, "rule_hash": c.rule_hash(None),
           "parts": [{**p.spec(), "effect": EFFECT.as_dict(), "verdict": p.rule.verdict(EFFECT)} for p in c.parts]}
    registered.mark([rec], {c.id: c}, reg, {}, 2_000_000_000)
    return rec["parts"]


def test_other_measuring_code_is_refused_in_one_line_or_marked_post_hoc(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    need_git()
    import normlab.diagnostics.probe as probe

    monkeypatch.setattr(probe, "probe_model", lambda *a, **kw: pytest.fail("measured before the check"))
    c = CLAIMS.get(QUICK)
    root = repo(tmp_path / "lab")
    f = _registered(root, [c])
    reg = registration.load(f)
    assert reg.doc["version"] == 3 and reg.doc["claims"][QUICK]["measuring_code"]["hash"] == mc.measuring_hash(c)
    registration.require_match(reg, [c], "cpu", quick=True, allow_post_hoc=False)  # the same code: runs
    assert [p["registered_code"] for p in _mark(reg, c)] == ["same"] * len(c.parts)
    monkeypatch.setattr(mc, "_default", lambda: edited(HELPER))  # the Welch helpers refactored since
    with pytest.raises(UserError) as e:
        run_claims(quick=True, out=root / "out", only=[QUICK], registration=f, **SMALL)
    msg = str(e.value)
    assert "\n" not in msg and f"{QUICK}: measuring code changed: modules {HELPER});" in msg, msg
    assert f"run from the registered commit {reg.commit[:7]}, register again" in msg and "--allow-post-hoc" in msg
    assert not (root / "out").exists()  # refused before the launch: nothing measured, nothing written
    reg = registration.load(f)
    registration.require_match(reg, [c], "cpu", quick=True, allow_post_hoc=True)
    parts = _mark(reg, c)
    assert {(p["registered"], p["registered_code"]) for p in parts} == {("post-hoc", "changed")}
    assert parts[0]["registered_note"] == f"measuring code changed: modules {HELPER} since the registration"


def test_a_registration_without_measuring_code_loads_and_says_so(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    need_git()
    c = CLAIMS.get(QUICK)
    f = _registered(repo(tmp_path / "old"), [c], drop_code=True)
    reg = registration.load(f)
    monkeypatch.setattr(mc, "_default", lambda: edited(HELPER))  # nothing registered to differ from
    registration.require_match(reg, [c], "cpu", quick=True, allow_post_hoc=False)
    assert reg.changed == {}
    parts = _mark(reg, c)
    assert {(p["registered"], p["registered_code"]) for p in parts} == {("before-data", "not registered")}
    assert parts[0]["registered_note"].endswith("before the data; its measuring code was not registered "
                                                "(registration format 2)")
    meta = {"registration": reg.meta()}
    assert registered.summary([{"id": c.id, "quick": True, "parts": parts}], meta).endswith(
        f"the code that computed the quantities of {len(parts)} of these parts was not registered.")
    # a format-3 file whose module table was edited by hand (document hash recomputed) is refused
    doc = registration.document([c], "cpu")
    doc["measuring_code"]["modules"][HELPER] = "0" * 16
    doc["document_hash"] = registration.document_hash(doc)
    root = repo(tmp_path / "edited")
    (root / "registration.json").write_text(registration.dumps(doc))
    commit(root, root / "registration.json", 1_000_000_000)
    with pytest.raises(UserError, match=f"edited by hand: claims {QUICK}"):
        registration.load(root / "registration.json")


def _lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "history.jsonl").read_text().splitlines()]


@pytest.mark.usefixtures("data_dir")  # the probe's tokens are read before the first model
@pytest.mark.parametrize("how", ["fails", "interrupted"])
def test_a_launch_that_fails_or_is_interrupted_stays_in_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 how: str) -> None:
    import normlab.diagnostics.probe as probe

    def stop(*a: object, **kw: object) -> None:
        if how == "fails":
            raise RuntimeError("a study that raises\nover two lines")
        os.kill(os.getpid(), signal.SIGTERM)  # a scheduler stops the run: as Ctrl-C, not a kill
        time.sleep(5)

    monkeypatch.setattr(probe, "probe_model", stop)
    out = tmp_path / "out"
    try:
        with pytest.raises(RuntimeError if how == "fails" else KeyboardInterrupt):
            run_claims(quick=True, out=out, only=[QUICK], **SMALL)
        assert stopping.received() == (None if how == "fails" else signal.SIGTERM)
    finally:
        stopping.forget()  # the next test's code starts with no signal received
    launch, end = _lines(out)
    assert launch["kind"] == "launch" and launch["claims"] == [QUICK] and launch["mode"] == "exploratory"
    assert launch["measuring_code"] == mc.combined(mc.measuring_code(CLAIMS.get(QUICK)))
    assert launch["registration"] is None and "git_revision" in launch and launch["quick_only"] is True
    assert end["kind"] == "end" and end["launch"] == launch["launch"]
    assert (end["status"], end["error"]) == (("failed", "RuntimeError: a study that raises over two lines")
                                             if how == "fails" else ("interrupted", "SIGTERM"))
    assert not (out / "claims.json").exists()
    assert ledger.read([out]).seeds == {}  # launch and end lines name no seeds: the ledger reads verdicts only


def test_history_readers_take_launch_and_end_lines_and_the_published_history(tmp_path: Path) -> None:
    published = (EVIDENCE / "history.jsonl").read_text().splitlines()
    assert len(history.verdict_lines(EVIDENCE / "history.jsonl")) == len(published) > 0  # all verdicts, unchanged
    out = tmp_path / "out"
    out.mkdir()
    prov = {"written_at": "2027-01-01T00:00:00Z", "git_revision": "abc", "normlab": "0", "launch": "L1",
            "seeds": {"probe": [7]}}
    rec = {"id": QUICK, "quick": True, "rule_hash": "h", "code_hash": "c", "measuring_code": "m", "verdict": "supported",
           "parts": [{"id": "a", "verdict": "supported"}]}
    history.end(out, "L0", history.FAILED, time.time(), "boom")  # an earlier launch's end, before any verdict
    history.update_history([dict(rec)], out, prov)
    history.end(out, "L1", history.COMPLETED, time.time())
    history.update_history([dict(rec)], out, prov)  # reads its last verdict past the end lines
    lines = _lines(out)
    assert [h.get("kind") for h in lines] == ["end", None, "end", None]
    assert lines[1]["launch"] == "L1" and lines[1]["measuring_code"] == "m"
    assert {s: sorted(w) for s, w in ledger.read([out]).seeds["probe"].items()} == {7: sorted({
        f"{out / 'history.jsonl'} (2027-01-01T00:00:00Z, {QUICK})"})}
    with pytest.raises(ValueError, match="unknown end status 'done'; valid: completed, failed, interrupted"):
        history.end(out, "L2", "done", time.time())


def test_a_changed_rule_and_measuring_code_are_both_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from normlab.claims.rules import Within

    need_git()
    c = CLAIMS.get(QUICK)
    was = dataclasses.replace(c, parts=(dataclasses.replace(c.parts[0], rule=Within(0.0, 2.0)), *c.parts[1:]))
    reg = registration.load(_registered(repo(tmp_path / "lab"), [was]))
    monkeypatch.setattr(mc, "_default", lambda: edited(HELPER, "normlab.claims.quickrun"))
    registration.require_match(reg, [c], "cpu", quick=True, allow_post_hoc=True)
    assert reg.changed == {QUICK: f"rule of parts {c.parts[0].id} changed, and measuring code changed: modules "
                                  f"normlab.claims.quickrun, {HELPER}"}
    assert {p["registered_code"] for p in _mark(reg, c)} == {"changed"}
