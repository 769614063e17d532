"""A registered run's claims.json holds up against git alone (``registered.verify``), and the
committed evidence says honestly whether it was pre-registered: every part it marks
before-data has a registration commit in this repository's history, whose file hashes to the
recorded sha256 and whose commit time precedes every first trial of the claim's studies."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gitrepo import commit, need_git, repo  # noqa: E402

from normlab.claims import registered, registration  # noqa: E402
from normlab.claims.claim import CLAIMS  # noqa: E402
from normlab.claims.rules import Within  # noqa: E402
from normlab.core.errors import UserError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# every published run: the confirmatory ones, the exploratory run they supersede, the seed-scale run,
# the campaign's ended stages
RUNS = {"evidence": "", "confirm-2a": "confirm-2a", "confirm-2b": "confirm-2b",
        "confirm-liu": "confirm-liu", "confirm-ln": "confirm-ln", "confirm-seed": "confirm-seed", "exploratory": "exploratory", "seed": "seed",
        "campaign-new-methods": "campaign/new-methods",
        "campaign-map-settled": "campaign/map-settled",
        "campaign-new-methods-settled": "campaign/new-methods-settled",
        "campaign-seed-claims": "campaign/seed-claims",
        "campaign-frontier-settled": "campaign/frontier-settled",
        "campaign-seed-scale": "campaign/seed-scale",
        "campaign-seed-claims-settled": "campaign/seed-claims-settled",
        "campaign-transfer-monitors": "campaign-transfer/monitors",
        "campaign-2-new-methods": "campaign-2/new-methods", "campaign-2-map": "campaign-2/map",
        "campaign-2-seed-dropout": "campaign-2/seed-dropout", "campaign-2-init-claims": "campaign-2/init-claims",
        "campaign-2-rest-a": "campaign-2/rest-a", "campaign-2-seed-claims": "campaign-2/seed-claims",
        "campaign-2-rest-b": "campaign-2/rest-b",
        "exploratory-pilot-ln-amplifies": "exploratory/pilot-ln-amplifies"}  # the campaigns' stages, as each ends
EVIDENCE = [ROOT / "docs" / "evidence" / d for d in RUNS.values()]
SMALL = {"seeds": 3, "depths": [2, 4, 8], "d_model": 32}
QUICK = "xiong-thm1"


def _registered_run(tmp: Path, at: int) -> Path:
    """A quick run of QUICK with a registration committed at time ``at``; returns OUT."""
    from normlab.claims import run_claims

    root = repo(tmp / "lab")
    f = root / "registration.json"
    registration.write(f, registration.build("cpu", [QUICK]))
    commit(root, f, at)
    run_claims(quick=True, out=root / "out", only=[QUICK], registration=f, **SMALL)
    return root / "out"


@pytest.mark.usefixtures("data_dir")  # probes on the corpus
def test_a_registered_run_verifies_and_a_late_one_does_not(tmp_path: Path) -> None:
    need_git()
    import time

    out = _registered_run(tmp_path, at=int(time.time()) - 60)
    data = json.loads((out / "claims.json").read_text())
    assert [p["registered"] for p in data["claims"][0]["parts"]] == ["before-data", "before-data"]
    assert set(data["meta"]["registration"]) >= {"file", "sha256", "commit", "committed_at"}
    assert registered.verify(out) == []
    assert "All 2 parts' rules were registered in commit " in html.unescape((out / "index.html").read_text())
    # the same claims.json, had another measuring code computed it: the check fails
    measured = data["claims"][0]["measuring_code"]
    data["claims"][0]["measuring_code"] = "0" * 16
    (out / "claims.json").write_text(json.dumps(data))
    assert registered.verify(out) == [f"{QUICK}/{p}: measured by code {'0' * 16}, registered {measured}"
                                      for p in ("pre", "post")]
    data["claims"][0]["measuring_code"] = measured
    # the same claims.json, had the measurements begun before the commit: the check fails
    data["meta"]["started_at"] = data["meta"]["registration"]["committed_at"]
    (out / "claims.json").write_text(json.dumps(data))
    assert [p.split(":")[0] for p in registered.verify(out)] == [f"{QUICK}/pre", f"{QUICK}/post"]
    data["meta"]["registration"]["commit"] = "0" * 40  # a commit that is not in the history
    (out / "claims.json").write_text(json.dumps(data))
    assert registered.verify(out) == [f"registration commit {'0' * 40} is not in this repository's history"]


def test_a_run_with_a_changed_rule_stops_before_measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_git()
    import normlab.diagnostics.probe as probe
    from normlab.claims import run_claims

    def never(*a: object, **kw: object) -> None:
        raise AssertionError("measured before the registration was checked")

    monkeypatch.setattr(probe, "probe_model", never)
    c = CLAIMS.get(QUICK, "--only")
    was = dataclasses.replace(c, parts=(dataclasses.replace(c.parts[0], rule=Within(0.0, 2.0)), *c.parts[1:]))
    root = repo(tmp_path / "lab")
    f = root / "registration.json"
    registration.write(f, registration.document([was], "cpu"))
    commit(root, f, 1_000_000_000)
    with pytest.raises(UserError, match="xiong-thm1: rule of parts pre changed"):
        run_claims(quick=True, out=root / "out", only=[QUICK], registration=f, **SMALL)
    assert not (root / "out" / "claims.json").exists()


@pytest.mark.parametrize("root", EVIDENCE, ids=list(RUNS))
def test_published_evidence_states_its_registration(root: Path) -> None:
    """Every part is marked; unregistered evidence says so on its page and in claims.json."""
    data = json.loads((root / "claims.json").read_text())
    marks = {p.get("registered") for r in data["claims"] for p in r["parts"]}
    assert marks <= {"before-data", "post-hoc", "not-registered"}, marks
    assert "registration" in data["meta"]
    page = html.unescape((root / "index.html").read_text())
    assert "each decided by a rule fixed before the data" not in page  # the sentence nothing backed
    if data["meta"]["registration"] is None:
        assert marks == {"not-registered"}
        assert "Not pre-registered: this run was given no committed registration" in page
    else:
        assert registered.summary(data["claims"], data["meta"]) in page


@pytest.mark.parametrize("root", EVIDENCE, ids=list(RUNS))
def test_published_registrations_are_in_this_repositorys_history(root: Path) -> None:
    """A before-data mark of the committed evidence holds against this repository's git history
    (CI runs on a clone with history: NORMLAB_REQUIRE_GIT=1 there makes a missing one fail)."""
    need_git()
    inside = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-dir"], capture_output=True, timeout=30)
    if inside.returncode != 0:
        if os.environ.get("NORMLAB_REQUIRE_GIT") == "1":
            pytest.fail(f"{ROOT} is not a git checkout, and NORMLAB_REQUIRE_GIT=1 says the evidence must be checked")
        pytest.skip(f"{ROOT} is not a git checkout (NORMLAB_REQUIRE_GIT=1 makes this a failure)")
    assert registered.verify(root, ROOT) == []
