"""Confirmatory and exploratory runs: a registered run refuses, in one line naming the study and
the seeds, registered seeds that an earlier store, claims output or history line used
(``claims/ledger.py``); the same config runs with --exploratory and is published as such; seeds
registered from --first-seed are unseen, and the run is confirmatory. history.jsonl keeps every
launch."""

from __future__ import annotations

import html
import json
import sqlite3
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from gitrepo import commit, need_git, repo  # noqa: E402

from normlab.claims import history, ledger, registration, run_claims  # noqa: E402
from normlab.core.errors import UserError  # noqa: E402
from normlab.study.presets import study_preset  # noqa: E402
from normlab.study.store import Store  # noqa: E402

QUICK, TRAINING, STUDY = "xiong-thm1", "zloss-logz", "zloss"
SMALL = {"seeds": 3, "depths": [2, 4], "d_model": 32}


def _register(root: Path, at: int, **kw: object) -> Path:
    f = root / "registration.json"
    registration.write(f, registration.build(**kw), force=True)  # type: ignore[arg-type]
    commit(root, f, at)
    return f


def _store(path: Path, started: dict[int, float]) -> Path:
    """A store of STUDY at smoke scale in which the trials of the seeds ``started`` began then."""
    spec = study_preset(STUDY, "smoke")
    Store.create(path, spec.to_json_data(), spec.trials()).close()
    with sqlite3.connect(path / "study.sqlite") as conn:
        for t in spec.trials():
            if t.params["seed"] in started:
                conn.execute("UPDATE trials SET status='completed', started_at=? WHERE id=?",
                             (started[t.params["seed"]], t.id))
    return path


def test_a_registration_whose_seeds_an_earlier_store_or_history_used_is_refused(tmp_path: Path) -> None:
    need_git()
    root = repo(tmp_path / "lab")
    f = _register(root, int(time.time()) - 60, scale="smoke", only=[TRAINING])
    assert registration.load(f).seeds(STUDY) == [0, 1]  # the preset's seeds: seen before
    store = _store(tmp_path / "old-store", {0: 1.0e9})
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps({"id": TRAINING, "written_at": "2026-12-01T00:00:00Z", "seeds": {STUDY: [1]}}) + "\n")
    with pytest.raises(UserError) as e:
        run_claims(quick=False, scale="smoke", out=root / "out", only=[TRAINING], registration=f,
                   seen=[store, history], train=False)
    msg = str(e.value)
    assert "\n" not in msg and f"study {STUDY} seeds 0, 1 (seen in " in msg, msg
    assert str(store) in msg and str(history) in msg and "--exploratory" in msg and "--first-seed" in msg
    assert not (root / "out").exists()  # refused before anything was made
    # unseen seeds from --first-seed: no refusal from these sources (the run then needs its store: --no-train)
    f = _register(root, int(time.time()) - 30, scale="smoke", only=[TRAINING], first_seed=40)
    with pytest.raises(UserError, match="no store for study 'zloss'"):
        run_claims(quick=False, scale="smoke", out=root / "out", only=[TRAINING], registration=f,
                   seen=[store, history], train=False)


def test_a_runs_own_trials_after_its_registration_are_not_earlier(tmp_path: Path) -> None:
    """OUT's own stores count only before the registration's commit: a confirmatory run resumes."""
    t0 = 2_000_000_000.0
    out = tmp_path / "out"
    _store(out / "stores" / STUDY, {0: t0 - 10, 1: t0 + 10})
    seen = ledger.read([out], own=out, before=t0)
    assert sorted(seen.seeds[STUDY]) == [0]
    assert sorted(ledger.read([out]).seeds[STUDY]) == [0, 1]  # someone else's folder: all of it


@pytest.mark.usefixtures("data_dir")  # probes on the corpus
def test_exploratory_run_of_the_same_config_is_allowed_and_marked(tmp_path: Path) -> None:
    need_git()
    root = repo(tmp_path / "lab")
    earlier = root / "earlier"
    run_claims(quick=True, out=earlier, only=[QUICK], **SMALL)  # no registration: exploratory
    data = json.loads((earlier / "claims.json").read_text())
    assert data["meta"]["mode"] == "exploratory" and data["meta"]["seeds"] == {"probe": [0, 1, 2]}
    f = _register(root, int(time.time()) - 60, scale="cpu", only=[QUICK], quick_seeds=3)
    with pytest.raises(UserError, match=r"study probe seeds 0, 1, 2 \(seen in .*earlier"):
        run_claims(quick=True, out=root / "out", only=[QUICK], registration=f, seen=[earlier], **SMALL)
    out = root / "out"
    run_claims(quick=True, out=out, only=[QUICK], registration=f, seen=[earlier], exploratory=True, **SMALL)
    data = json.loads((out / "claims.json").read_text())
    assert data["meta"]["mode"] == "exploratory"
    assert "Exploratory: this run was not checked" in html.unescape((out / "index.html").read_text())
    assert [h["mode"] for h in history.verdict_lines(out / "history.jsonl")] == ["exploratory"]
    # registered on unseen seeds: confirmatory, measured on exactly those seeds
    f = _register(root, int(time.time()) - 30, scale="cpu", only=[QUICK], quick_seeds=3, first_seed=20)
    run_claims(quick=True, out=out, only=[QUICK], registration=f, seen=[earlier], **SMALL)
    data = json.loads((out / "claims.json").read_text())
    assert data["meta"]["mode"] == "confirmatory" and data["meta"]["seeds"] == {"probe": [20, 21, 22]}
    assert {t.rsplit("seed", 1)[1] for p in data["claims"][0]["parts"] for t in p["trials"]} == {"20", "21", "22"}
    assert data["claims"][0]["parts"][0]["effect"] != json.loads((earlier / "claims.json").read_text())[
        "claims"][0]["parts"][0]["effect"]  # other seeds, other models
    assert "Confirmatory: every seed was registered" in html.unescape((out / "index.html").read_text())
    # history keeps every run, each with its mode and seeds; the same seeds are now seen
    lines = [json.loads(x) for x in (out / "history.jsonl").read_text().splitlines()]
    assert [(h["mode"], h["seeds"]) for h in lines if history.is_verdict(h)] == [
        ("exploratory", {"probe": [0, 1, 2]}), ("confirmatory", {"probe": [20, 21, 22]})]
    # each launch: its launch line, its verdicts (with its launch id), its end (the refusals were no launch)
    assert [(h.get("kind", "verdict"), h.get("mode") or h.get("status")) for h in lines] == [
        ("launch", "exploratory"), ("verdict", "exploratory"), ("end", "completed"),
        ("launch", "confirmatory"), ("verdict", "confirmatory"), ("end", "completed")]
    assert len({h["launch"] for h in lines[:3]}) == 1 and lines[0]["launch"] != lines[3]["launch"]
    with pytest.raises(UserError, match="study probe seeds 20, 21, 22"):
        run_claims(quick=True, out=out, only=[QUICK], registration=f, **SMALL)
