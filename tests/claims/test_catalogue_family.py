"""One Holm family over the whole catalogue (claims/family.py): on synthetic claims.json files,
and on the published runs of docs/evidence."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from normlab.claims.family import catalogue_family
from normlab.claims.holm import adjust, holm_verdicts
from normlab.core.errors import UserError
from normlab.stats.effects import holm

ROOT = Path(__file__).resolve().parents[2]


def _part(pid: str, p: float | None, verdict: str, departures: list[str] | None = None) -> dict:
    return {"id": pid, "p": p, "verdict": verdict, "rule_verdict": verdict, "departures": departures or []}


def _write(folder: Path, mode: str | None, claims: list[tuple[str, list[dict]]], written: str = "") -> None:
    """A claims.json as a run writes it: its own Holm family adjusted (claims/holm.py)."""
    records = [{"id": cid, "verdict": "", "parts": parts} for cid, parts in claims]
    for r in records:
        from normlab.claims.claim import claim_verdict
        from normlab.claims.regime import scoped

        r["verdict"] = scoped(*claim_verdict(r["parts"]))
    adjust(records)
    holm_verdicts(records)
    folder.mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps({"meta": {"mode": mode, "written_at": written}, "claims": records}),
                                        encoding="utf-8")


def test_one_family_over_synthetic_runs(tmp_path: Path) -> None:
    # run a: a family of 3 where 0.001 passes; run b: a family of one where 0.02 passes alone.
    # Together (4 p-values): 0.001 * 4 passes, 0.02 * 3 = 0.06 fails, and with it claim b-one.
    _write(tmp_path / "a", "confirmatory", [("a-one", [_part("x", 0.001, "supported"), _part("y", 0.2, "inconclusive")]),
                                            ("a-two", [_part("z", 0.3, "inconclusive"), _part("w", None, "inconclusive")])])
    _write(tmp_path / "b", "confirmatory", [("b-one", [_part("x", 0.02, "contradicted", ["steps"])])])
    _write(tmp_path / "explore", "exploratory", [("e", [_part("x", 1e-9, "supported")])])
    _write(tmp_path / "old", None, [("e", [_part("x", 1e-9, "supported")])])
    fam = catalogue_family(tmp_path)
    assert fam.runs == ["a", "b"] and set(fam.skipped) == {"explore", "old"}
    assert "meta.mode is 'exploratory'" in fam.skipped["explore"]
    assert fam.size == 4 and len(fam.parts) == 5
    by = {(p.run, p.claim, p.part): p for p in fam.parts}
    assert by["a", "a-one", "x"].p_holm == pytest.approx(0.004) and by["a", "a-one", "x"].ok is True
    b = by["b", "b-one", "x"]
    assert b.run_ok is True and b.run_p_holm == pytest.approx(0.02)
    assert b.p_holm == pytest.approx(0.06) and b.ok is False and b.verdict_after == "inconclusive"
    assert by["a", "a-two", "w"].p_holm is None and by["a", "a-two", "w"].ok is None
    assert [(p.run, p.claim) for p in fam.fail_catalogue()] == [("b", "b-one")]
    claims = {(c["run"], c["id"]): c for c in fam.claims}
    # scoped as the run scopes it: every part departs (steps), so "contradicted" reads "not seen"
    assert claims["b", "b-one"]["verdict_holm_run"] == "not seen at the lab's settings"
    assert claims["b", "b-one"]["verdict_holm"] == "inconclusive"
    assert "does not survive the Holm adjustment" in claims["b", "b-one"]["holm_note"]
    assert [c["id"] for c in fam.changed_claims()] == ["b-one"]
    assert fam.text().startswith("4 p-values over 2 confirmatory runs; of the 2 decisive parts that survive their "
                                 "run's Holm, 1 fail")


def test_each_part_ends_at_its_latest_registration(tmp_path: Path) -> None:
    # "z" (written first) registers x, y, w decisive; "a" (written later, though it sorts first by
    # name) registers x again (decided now), y again as descriptive, and a new part v; w, which "a"
    # does not have, was retired from the claim.
    _write(tmp_path / "z", "confirmatory", [("c", [_part("x", 0.5, "inconclusive"), _part("y", 1e-6, "supported"),
                                                   _part("w", 0.4, "inconclusive")])], written="2026-01-01T00:00:00")
    _write(tmp_path / "a", "confirmatory", [("c", [_part("x", 1e-6, "supported"), _part("y", None, "descriptive"),
                                                   _part("v", 1e-6, "contradicted")])], written="2026-02-01T00:00:00")
    fam = catalogue_family(tmp_path)
    last = {(fp.claim, fp.part): fp.run for fp in fam.latest()}
    assert last == {("c", "x"): "a", ("c", "y"): "a", ("c", "v"): "a"}
    # x and v decided; y ends descriptive, out of the decisive count
    assert fam.ended() == ("each of the catalogue's 3 parts at its latest registration: 2 of the 2 registered as "
                           "decisive there end decided (100%); descriptive there: 1")
    # a claim only the earlier run measured keeps its parts there
    _write(tmp_path / "y", "confirmatory", [("d", [_part("u", 0.5, "inconclusive")])], written="2026-01-15T00:00:00")
    assert ("d", "u") in {(fp.claim, fp.part) for fp in catalogue_family(tmp_path).latest()}
    # a still later run b reads c again, without v: x undecided, y decided, v retired
    _write(tmp_path / "b", "confirmatory", [("c", [_part("x", 0.5, "inconclusive"), _part("y", 1e-6, "supported")])],
           written="2026-03-01T00:00:00")
    fam = catalogue_family(tmp_path)
    assert {(fp.claim, fp.part): fp.run for fp in fam.latest()} == {("c", "x"): "b", ("c", "y"): "b", ("d", "u"): "y"}
    assert "3 parts at its latest registration: 1 of the 3 registered as decisive there end decided (33%)" in fam.ended()


def test_the_published_files_are_left_as_they_are(tmp_path: Path) -> None:
    _write(tmp_path / "b", "confirmatory", [("b-one", [_part("x", 0.02, "supported")])])
    before = (tmp_path / "b" / "claims.json").read_bytes()
    catalogue_family(tmp_path)
    assert (tmp_path / "b" / "claims.json").read_bytes() == before


def test_a_damaged_or_missing_catalogue_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no claims.json under it"):
        catalogue_family(tmp_path)
    (tmp_path / "claims.json").write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match="cannot read it as a claims.json"):
        catalogue_family(tmp_path)


def test_the_published_catalogue_under_one_holm(tmp_path: Path) -> None:
    """Issue 40: six confirmatory runs, 104 p-values; 63 decisive parts survive their run's Holm,
    and 10 of them fail under one Holm over all 104, among them the seed-scale headline "Post-LN
    without warm-up converges" (adjusted p 0.031 in its family of 3, 0.94 in the catalogue)."""
    six = [".", "confirm-2a", "confirm-2b", "confirm-liu", "confirm-ln", "confirm-seed"]
    everything = catalogue_family(ROOT / "docs" / "evidence")
    # the campaigns' stages join the family as they end (docs/evidence/CAMPAIGN/STAGE)
    assert set(everything.runs) - set(six) == {r for r in everything.runs if r.startswith(("campaign/",
                                                                                         "campaign-transfer/",
                                                                                         "campaign-2/"))}
    # exploration never joins it: the exploratory pages, the frontier stage read after the fact
    assert set(everything.skipped) == {"exploratory", "exploratory/frontier-stage", "exploratory/pilot-ln-amplifies",
                                       "seed"}
    assert "exploratory" in everything.skipped["exploratory/frontier-stage"]
    assert everything.size > 104
    # the six runs before the campaign, as issue 40 counted them
    for run in six:
        (tmp_path / run).mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "docs" / "evidence" / run / "claims.json", tmp_path / run / "claims.json")
    fam = catalogue_family(tmp_path)
    print(fam.text())
    assert sorted(fam.runs) == six
    assert fam.size == 104
    assert len(fam.survived_run()) == 63
    fails = fam.fail_catalogue()
    assert len(fails) == 10
    headline = next(p for p in fails if p.run == "confirm-seed")
    assert (headline.claim, headline.part) == ("seed002-pet-project", "post-fails")
    assert headline.run_p_holm == pytest.approx(0.031, abs=5e-4) and headline.p_holm == pytest.approx(0.94, abs=5e-3)
    # the run families the files publish are Holm over each run alone (so the comparison is like for like)
    for run in fam.runs:
        mine = [p for p in fam.parts if p.run == run]
        assert holm([p.p for p in mine]) == pytest.approx([p.run_p_holm for p in mine], rel=1e-12)


def test_the_readme_headline_is_the_catalogue_adjustment() -> None:
    """README's headline table is recomputed here from every published claims.json: one Holm over
    the catalogue, each claim's verdict beside the one its run published."""
    from normlab.claims.family import headline, section

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    fam = catalogue_family(ROOT / "docs" / "evidence")
    assert section(readme) == headline(fam), (
        "README.md's headline table differs from the catalogue's adjustment: paste `python -m normlab.claims.family` "
        "between its markers")
    changed = {(c["run"], c["id"]) for c in fam.changed_claims()}
    assert ("confirm-seed", "seed002-pet-project") in changed
    bold = [line for line in section(readme).splitlines() if "| **" in line]
    assert len(bold) == len(changed)  # every changed verdict is marked, and only those


def test_the_headline_marks_a_changed_verdict_and_says_why(tmp_path: Path) -> None:
    from normlab.claims.family import headline

    _write(tmp_path / "a", "confirmatory", [("c1", [_part("x", 0.02, "supported")])])
    _write(tmp_path / "b", "confirmatory", [("c2", [_part("y", 0.03, "supported")]),
                                              ("c3", [_part("z", 0.9, "inconclusive")])])
    text = headline(catalogue_family(tmp_path))
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == 3
    # alone in its run each part passes; over the catalogue (3 p-values) 0.02 -> 0.06 and 0.03 -> 0.06
    assert rows[0].startswith("| `c1` | a | **inconclusive** | supported | rests on part x")
    assert rows[2].startswith("| `c3` | b | inconclusive | inconclusive |  |")


def test_the_headline_says_when_a_verdict_rests_on_some_parts_only(tmp_path: Path) -> None:
    """A claim with parts registered as descriptive is decided on its other parts alone: the
    headline says on how many; a claim all of whose parts are descriptive, or none, says nothing."""
    from normlab.claims.family import headline

    _write(tmp_path / "a", "confirmatory", [
        ("mixed", [_part("control", 0.001, "supported"), _part("x", None, "descriptive"), _part("y", None, "descriptive")]),
        ("shown", [_part("z", None, "descriptive")]),
        ("plain", [_part("w", 0.001, "supported")])])
    rows = {line.split("`")[1]: line for line in headline(catalogue_family(tmp_path)).splitlines()
            if line.startswith("| `")}
    assert rows["mixed"].startswith("| `mixed` | a | supported (on 1 of its 3 parts; 2 descriptive) | supported |")
    assert rows["shown"].startswith("| `shown` | a | descriptive | descriptive |")
    assert rows["plain"].startswith("| `plain` | a | supported | supported |")


def test_the_campaign_page_names_the_limit_of_every_part_open_at_its_latest_registration() -> None:
    """The per-part reading's rest, on the published evidence: each decisive part not decided at
    its latest registration is listed once, with a limit (horizon, seeds or cost) and its reason,
    and their count is the one ``Family.ended`` gives."""
    import re

    from normlab.claims.campaign_page import latest_open

    fam = catalogue_family(ROOT / "docs" / "evidence")
    got = re.search(r"(\d+) of the (\d+) registered as decisive", fam.ended())
    assert got is not None
    done, decisive = int(got.group(1)), int(got.group(2))
    rows = [ln for ln in latest_open(fam) if ln.startswith("| ") and not ln.startswith("| run |")]
    assert len(rows) == decisive - done
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert cells[3] in ("horizon", "seeds", "cost") and cells[4], ln
    assert len({tuple(ln.split("|")[1:4]) for ln in rows}) == len(rows)  # each part once
