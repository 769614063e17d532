"""Pre-registration: a decision is "before-data" only when a committed registration holds the rule
it used and its commit time precedes the data; a rule changed since, or registered after the
first trial, is "post-hoc" with the registered rule's verdict beside; no registration (or no
git) is "not-registered". Every outcome, on real claims and a throwaway git repository."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gitrepo import commit, git, need_git, repo  # noqa: E402

from normlab.claims import registered, registration  # noqa: E402
from normlab.claims.claim import CLAIMS  # noqa: E402
from normlab.claims.rules import Within  # noqa: E402
from normlab.core.errors import UserError  # noqa: E402
from normlab.stats.effects import Effect  # noqa: E402

QUICK, TRAINING = "xiong-thm1", "seed001-early-gradients"  # a quick claim; a training claim on study pre-vs-post
EFFECT = Effect(estimate=1.0, lo=0.5, hi=1.5, n_a=5, se=0.2, df=4.0)  # [0.5, 1.5]: inside [0, 2], above 0.1
FIRST_TRIAL, RUN_START = 2_000_000_000, 2_000_100_000


def _claims() -> dict[str, Any]:
    reg = CLAIMS
    return {i: reg.get(i, "--only") for i in (QUICK, TRAINING)}


def _records(claims: dict[str, Any]) -> list[dict[str, Any]]:
    """What Claim.decide gives for EFFECT on every part (the current rules)."""
    return [{"id": c.id, "quick": c.quick, "rule_hash": c.rule_hash(None if c.quick else "cpu"),
             "parts": [{**p.spec(), "effect": EFFECT.as_dict(), "verdict": p.rule.verdict(EFFECT)} for p in c.parts]}
            for c in claims.values()]


def _registered(tmp: Path, claims: list[Any], at: int) -> registration.Registration:
    root = repo(tmp / "lab")
    f = root / "registration-cpu.json"
    registration.write(f, registration.document(claims, "cpu"))
    commit(root, f, at)
    return registration.load(f)


def _mark(reg: Any, claims: dict[str, Any]) -> tuple[list[dict[str, Any]], Any]:
    records = _records(claims)
    if reg is not None:
        registration.require_match(reg, list(claims.values()), "cpu", quick=False, allow_post_hoc=True)
    meta = registered.mark(records, claims, reg, {"pre-vs-post": {"first_start": FIRST_TRIAL}}, RUN_START)
    return records, meta


def _marks(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {r["id"]: [p["registered"] for p in r["parts"]] for r in records}


def test_registered_before_every_first_trial_is_before_data(tmp_path: Path) -> None:
    need_git()
    claims = _claims()
    reg = _registered(tmp_path, list(claims.values()), at=FIRST_TRIAL - 3600)
    records, meta = _mark(reg, claims)
    assert _marks(records) == {QUICK: ["before-data"] * 2, TRAINING: ["before-data"] * 2}
    head = git(tmp_path / "lab", "rev-parse", "HEAD")
    raw = (tmp_path / "lab" / "registration-cpu.json").read_bytes()
    import hashlib

    assert meta["commit"] == head and meta["committed_at"] == FIRST_TRIAL - 3600
    assert meta["file"] == "registration-cpu.json" and meta["sha256"] == hashlib.sha256(raw).hexdigest()
    assert all("registered_verdict" not in p for r in records for p in r["parts"])
    assert registered.summary(records, {"registration": meta}).startswith("All 4 parts' rules were registered in "
                                                                           f"commit {head[:7]} at ")


@pytest.mark.parametrize("at", [FIRST_TRIAL, FIRST_TRIAL + 60])  # the same second is not before
def test_registered_after_the_first_trial_is_post_hoc(tmp_path: Path, at: int) -> None:
    need_git()
    claims = _claims()
    records, meta = _mark(_registered(tmp_path, list(claims.values()), at=at), claims)
    # the quick claim's data is this run's measurement (RUN_START), after the commit
    assert _marks(records) == {QUICK: ["before-data"] * 2, TRAINING: ["post-hoc"] * 2}
    late = records[1]["parts"]
    assert [p["registered_verdict"] for p in late] == [p["verdict"] for p in late]  # same rule, same verdict
    assert all("not before the data (study pre-vs-post began at" in p["registered_note"] for p in late)
    text = registered.summary(records, {"registration": meta})
    assert "2 of 4 parts' rules were registered before each study's first trial" in text
    assert "2 are post-hoc" in text and "0 not registered" in text


def test_a_rule_changed_after_registration_is_refused_then_post_hoc_with_the_registered_verdict(
        tmp_path: Path) -> None:
    need_git()
    claims = _claims()
    quick = claims[QUICK]
    # registered: part "pre" predicted inside [0, 2]; the current rule predicts [-0.75, -0.25]
    was = dataclasses.replace(quick, parts=(dataclasses.replace(quick.parts[0], rule=Within(0.0, 2.0)),
                                            *quick.parts[1:]))
    reg = _registered(tmp_path, [was, claims[TRAINING]], at=FIRST_TRIAL - 3600)
    with pytest.raises(UserError, match=r"xiong-thm1: rule of parts pre changed\); register again and commit") as e:
        registration.require_match(reg, list(claims.values()), "cpu", quick=False, allow_post_hoc=False)
    assert "\n" not in str(e.value) and TRAINING not in str(e.value)  # one line, naming only the changed claim
    records, _ = _mark(reg, claims)
    assert _marks(records) == {QUICK: ["post-hoc"] * 2, TRAINING: ["before-data"] * 2}
    pre, post = records[0]["parts"]
    assert (pre["verdict"], pre["registered_verdict"]) == ("contradicted", "supported")  # [0.5, 1.5] vs each rule
    assert pre["registered_rule_text"].startswith("supported if the 95% interval lies inside [0, 2]")
    assert post["registered_verdict"] == post["verdict"] == "contradicted"  # unchanged rule: outside [-0.2, 0.2]
    assert registered.tag(pre) == " ‡ (post-hoc; registered rule: supported)"


def test_without_a_registration_or_git_every_part_is_not_registered(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    claims = _claims()
    records, meta = _mark(None, claims)
    assert meta is None and _marks(records) == {QUICK: ["not-registered"] * 2, TRAINING: ["not-registered"] * 2}
    assert registered.summary(records, {"registration": None}).startswith("Not pre-registered: ")
    # a registration outside any repository: kept, but nothing dates it
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    registration.write(plain / "r.json", registration.document(list(claims.values()), "cpu"))
    for path in (None, str(tmp_path / "no-git-here")):  # git present; then no git on PATH at all
        if path:
            monkeypatch.setenv("PATH", path)
        reg = registration.load(plain / "r.json")
        assert reg.commit is None and reg.meta() is None, path
        records, meta = _mark(reg, claims)
        assert meta is None and {m for ms in _marks(records).values() for m in ms} == {"not-registered"}
        assert ("git is not available" if path else "not in a git repository") in records[0]["parts"][0]["registered_note"]


def test_an_uncommitted_modified_or_hand_edited_registration_is_refused(tmp_path: Path) -> None:
    need_git()
    claims = _claims()
    root = repo(tmp_path / "lab")
    f = root / "r.json"
    registration.write(f, registration.document(list(claims.values()), "cpu"))
    with pytest.raises(UserError, match="not committed, or changed since its commit; commit it first"):
        registration.load(f)
    commit(root, f, FIRST_TRIAL - 10)
    registration.write(f, registration.document([claims[QUICK]], "cpu"), force=True)  # valid, but not committed
    with pytest.raises(UserError, match="not committed, or changed since"):
        registration.load(f)
    doc = json.loads(f.read_text())
    doc["claims"][QUICK]["parts"][0]["rule"]["hi"] = 5.0  # a margin widened by hand, hashes left alone
    f.write_text(json.dumps(doc))
    commit(root, f, FIRST_TRIAL - 5)
    with pytest.raises(UserError, match=r"hashes do not match its text \(edited by hand: claims xiong-thm1\)"):
        registration.load(f)


def test_register_writes_once_and_refuses_a_different_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from normlab.cli import main

    f = tmp_path / "registration-cpu.json"
    assert main(["claims", "register", "--scale", "cpu", "--out", str(f), "--only", QUICK, "--only", TRAINING]) == 0
    doc = json.loads(f.read_text())
    assert sorted(doc["claims"]) == sorted([QUICK, TRAINING]) and list(doc["studies"]) == ["pre-vs-post"]
    assert doc["document_hash"] == registration.document_hash(doc)
    assert doc["claims"][TRAINING]["rule_hash"] == CLAIMS.get(TRAINING, "--only").rule_hash("cpu")
    assert doc["studies"]["pre-vs-post"] == registration.study_ids("pre-vs-post", "cpu")
    assert "document hash" in capsys.readouterr().out
    assert main(["claims", "register", "--scale", "cpu", "--out", str(f), "--only", QUICK, "--only", TRAINING]) == 0
    assert "unchanged:" in capsys.readouterr().out
    for argv in (["--out", str(f), "--only", QUICK], ["--out", str(tmp_path)]):
        assert main(["claims", "register", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ("holds a different registration; pass --force" in err
                                         or "register writes one file" in err), err
    assert json.loads(f.read_text()) == doc  # refused: the file is as it was
    assert main(["claims", "register", "--out", str(f), "--only", QUICK, "--force"]) == 0
    assert list(json.loads(f.read_text())["claims"]) == [QUICK]


def test_the_table_and_page_mark_post_hoc_parts() -> None:
    from normlab.claims.output import markdown_table

    r = {"id": "c", "verdict": "contradicted", "parts": [
        {"id": "a", "asserts": "x", "verdict": "contradicted", "effect": EFFECT.as_dict(), "registered": "post-hoc",
         "registered_verdict": "supported"},
        {"id": "b", "asserts": "y", "verdict": "supported", "effect": EFFECT.as_dict(), "registered": "before-data"},
        {"id": "d", "asserts": "z", "verdict": "supported", "effect": EFFECT.as_dict()}]}  # written before marks
    table = markdown_table([r])
    assert "| contradicted ‡ (post-hoc; registered rule: supported) |" in table
    assert table.count("‡") == 1
    meta = {"registration": {"commit": "abcdef0123", "committed_at": 0}}
    assert registered.summary([r], meta) == (
        "Pre-registration (commit abcdef0 at 1970-01-01 00:00:00 UTC): 1 of 3 parts' rules were registered before "
        "each study's first trial; 1 are post-hoc (marked ‡: "
        "the rule or the measuring code changed after registration, or was registered after the data; the "
        "registered rule's verdict is "
        "given beside); 1 not registered.")


def test_a_missing_registration_is_one_line_before_anything_runs(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from normlab.cli import main

    missing = tmp_path / "registration-cpu.json"
    assert main(["claims", "--quick", "--out", str(tmp_path / "out"), "--registration", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file; write one with `normlab claims register" in err, err
    assert not (tmp_path / "out" / "claims.json").exists()
