"""`normlab claims --quick` on the real probe data (5 seeds, xavier, d=128): every part's verdict
is pinned here, so that a change of verdict is a visible change of this test; the evidence
page opens in headless Chromium with every image decoded."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from test_pages import browse  # noqa: E402

# The scoping rule (claims/regime.py) requires the init for every part at initialisation: where the
# source states no init (the seeds, NormFormer, Noci et al., DeepNet's and Liu et al.'s settings
# as declared), the verdict is worded for the lab's xavier init.
PINNED = {
    "xiong-thm1": {"pre": "supported", "post": "supported"},
    "forward-norms": {"post": "supported", "pre": "supported"},
    "xiong-direction": {"post-rises": "supported", "pre-flatter": "contradicted"},
    "seed000-grad-scale": {"pre-stabler": "not seen at the lab's settings"},
    "seed001-lower-layers": {"params": "not seen at the lab's settings",
                             "stream": "seen at the lab's settings",
                             "linear": "not seen at the lab's settings"},
    "normformer-pre-early": {"falls": "seen at the lab's settings", "much": "seen at the lab's settings"},
    "rank-collapse": {"post": "seen at the lab's settings",
                      "pre": "seen at the lab's settings",
                      "faster": "seen at the lab's settings"},
    "seed001-pre-flat": {"flat": "not seen at the lab's settings"},
    "jacobian-identity": {"post": "seen at the lab's settings"},
    # the identity term prod_k J_LN_k by jvp at L = 32: log10 -6.68 [-6.81, -6.55], below 1%
    "seed004-decay": {"factor": "not seen at the lab's settings", "almost-0": "seen at the lab's settings"},
    # one-sample slopes of the change's norm, the blocks' parameters stepped: post +1.24 [1.19, 1.30]; pre +0.99,
    # admin +0.99, both near 1 (with every parameter stepped: post +1.22 [1.16, 1.27], pre +0.965, admin +0.968).
    # Theorem 2 bounds the change's variance (issue 40): O(N) is a norm slope of 1/2, so post's +1.24 lies
    # above [0.35, 0.65] (it was "seen" against the old [0.7, 1.3]); pre's and admin's are not below 0.35
    "liu-amplification": {"post": "not seen at the lab's settings",
                          "pre": "not seen at the lab's settings",
                          "admin": "not seen at the lab's settings"},
    "deepnorm-bounded": {"bounded": "not seen at the lab's settings", "vs-post": "seen at the lab's settings"},
    # Post-LN at L = 16, GPT-2 init (issue 40: the seed states no init; under xavier the gain was 0.67 by construction):
    # median RMS(F)/RMS(x) 10^-2.43; the first sub-layer's gain 10^1.55 = 35; the later ones' median 10^-0.003
    "seed001-ln-amplifies": {"small": "seen at the lab's settings", "amplifies-first": "seen at the lab's settings",
                             "amplifies-later": "not seen at the lab's settings"},
    "seed001-rms": {"normalises": "contradicted"},
    "seed002-gpt2": {"post": "contradicted"},
    "seed002-code-causal": {"causal": "contradicted"},
    # block cosines at L = 16: Pre-LN's mean 0.916 [0.913, 0.920] above 0.894, its first block 0.786 below it;
    # Post-LN's 0.64 (pre minus post +0.276 [0.265, 0.287])
    "seed001-pre-identity": {"near": "supported", "every-block": "contradicted", "vs-post": "supported"},
}
# Checks of the implementation (true by construction): decided like parts, shown apart, not in the family.
CHECKS = {"jacobian-identity": {"pre": "seen at the lab's settings"},
          "deepnorm-bounded": {"shortcut": "seen at the lab's settings"}}


@pytest.fixture(scope="session")
def quick(shared_dir) -> Path:
    """One `claims --quick` run per session (the costliest fixture of the suite), read only."""
    from normlab.cli import main

    def build(out: Path) -> None:
        assert main(["claims", "--quick", "--out", str(out)]) == 0

    return shared_dir("claims-quick", build)


# The tests that read the quick run share one worker: on two workers the second would only wait
# on the fixture's lock while the first builds it (30 s of an idle worker in `make test`).
QUICK_GROUP = pytest.mark.xdist_group("claims-quick")


@QUICK_GROUP
@pytest.mark.slow
def test_quick_verdicts_are_pinned(quick: Path) -> None:
    data = json.loads((quick / "claims.json").read_text())
    got = {r["id"]: {p["id"]: p["verdict"] for p in r["parts"]} for r in data["claims"]}
    assert got == PINNED
    checks = {r["id"]: {p["id"]: p["verdict"] for p in r["checks"]} for r in data["claims"] if r["checks"]}
    assert checks == CHECKS
    for r in data["claims"]:
        for p in r["parts"] + r["checks"]:
            e = p["effect"]
            assert e["lo"] <= e["estimate"] <= e["hi"] and e["n_a"] >= 3, (r["id"], p["id"], e)
    meta = data["meta"]
    assert meta["family_size"] == sum(len(v) for v in PINNED.values()) and meta["normlab"]
    hist = [json.loads(x) for x in (quick / "history.jsonl").read_text().splitlines()]
    assert [h.get("kind") for h in hist if h.get("kind")] == ["launch", "end"] and hist[-1]["status"] == "completed"
    hist = [h for h in hist if not h.get("kind")]  # the verdicts
    assert {h["id"] for h in hist} == set(PINNED) and all(h["rule_hash"] for h in hist)


@QUICK_GROUP
@pytest.mark.slow
def test_evidence_page_opens_in_chromium(quick: Path, tmp_path: Path) -> None:
    html = (quick / "index.html").read_text()
    assert "which statements about normalization placement hold up?" in html
    assert all(f'id="claim-{cid}"' in html for cid in PINNED)
    page = shutil.copytree(quick, tmp_path / "claims")  # browse writes beside the page; the run is shared
    lay = browse(page / "index.html", tmp_path, "claims-quick")
    assert lay["n"] >= len(PINNED) + 5 and lay["bad"] == 0 and not lay["errors"], lay
    assert lay["wide"] == 0 and not lay["hscroll"], lay


@pytest.mark.parametrize(("run", "registration"), [("", "confirmatory-map"), ("confirm-2a", "confirmatory-2a"),
                                                   ("confirm-2b", "confirmatory-2b"),
                                                   ("confirm-liu", "confirmatory-liu"),
                                                   ("confirm-ln", "confirmatory-ln"),
                                                   ("confirm-seed", "confirmatory-seed")])
def test_published_evidence_is_complete_and_opens(run: str, registration: str, tmp_path: Path) -> None:
    """docs/evidence: every claim has parts with effect, interval and n per side (a difference of
    critical lrs: an estimate with its interval, or censored with the side known, or "nothing
    known" when both lines are censored on the same side); no decisive verdict rests on fewer
    than 3 seeds a side; the run's wall time is recorded and within 150 minutes; every part was
    registered before its data; the page opens."""
    root = Path(__file__).parents[2] / "docs" / "evidence" / run
    data = json.loads((root / "claims.json").read_text())
    assert data["meta"]["seconds"] <= 150 * 60 and data["meta"]["git_revision"]
    assert data["meta"]["mode"] == "confirmatory"
    registered = json.loads((root.parents[0] if run else root).joinpath("registration", f"{registration}.json")
                            .read_text())["claims"]
    assert [r["id"] for r in data["claims"]] and {r["id"] for r in data["claims"]} == set(registered)
    for r in data["claims"]:
        assert r["parts"] and r["rule_hash"], r["id"]
        for p in r["parts"]:
            e = p["effect"]
            assert p["registered"] == "before-data", (r["id"], p["id"])
            if "log10_ratio" in p["numbers"] and e["estimate"] is None:
                side = p["numbers"]["log10_ratio"]["censored"]
                assert side in ("above", "below", "unknown") and (side == "unknown") == (e["lo"] is None and
                                                                                         e["hi"] is None), (r["id"], p["id"])
                continue
            assert e["estimate"] is not None and (e["lo"] is not None or e["hi"] is not None), (r["id"], p["id"])
            if "log10_ratio" not in p["numbers"]:
                assert e["lo"] is not None and e["hi"] is not None, (r["id"], p["id"])
            if p["verdict"] in ("supported", "contradicted"):
                assert e["n_a"] >= 3 and (e["n_b"] is None or e["n_b"] >= 3), (r["id"], p["id"])
    page = tmp_path / "evidence"
    shutil.copytree(root, page)
    lay = browse(page / "index.html", tmp_path, "evidence")
    assert lay["n"] >= len(data["claims"]) and lay["bad"] == 0 and not lay["errors"], lay
    assert lay["wide"] == 0 and not lay["hscroll"], lay


@pytest.mark.parametrize(("run", "trials", "claims"), [
    ("seed", 16, ["seed002-clipping", "seed002-pet-project"]),  # before registration: superseded
    ("confirm-seed", 12, ["seed002-pet-project"])])               # registered, seeds 400-405
def test_published_seed_scale_evidence_is_complete(run: str, trials: int, claims: list[str], tmp_path: Path) -> None:
    """docs/evidence/seed and confirm-seed: seed 002's pet project decided at the seed's settings
    on the study's trials, each decisive part on at least 3 seeds a side, the study's page
    beside it, and the evidence page opens; the older run says it is superseded."""
    root = Path(__file__).parents[2] / "docs" / "evidence" / run
    data = json.loads((root / "claims.json").read_text())
    assert data["meta"]["scale"] == "seed" and data["meta"]["studies"]["pre-vs-post"]["trials"] == trials
    assert sorted(r["id"] for r in data["claims"]) == claims
    assert ("confirm-seed" in data["meta"].get("superseded", "")) == (run == "seed")
    for r in data["claims"]:
        assert "lr 3e-4 constant, batch 32, 4900 steps" in r["experiment"], r["id"]
        for p in r["parts"]:
            if p["verdict"] in ("supported", "contradicted"):
                e = p["effect"]
                assert e["n_a"] >= 3 and (e["n_b"] is None or e["n_b"] >= 3), (r["id"], p["id"])
    assert (root / "study" / "index.html").is_file()
    lay = browse(root / "index.html", tmp_path, "evidence-seed")
    assert lay["bad"] == 0 and not lay["errors"] and lay["wide"] == 0 and not lay["hscroll"], lay
