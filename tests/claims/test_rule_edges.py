"""Edges the type check found: an effect with an interval but no t statistics, a missing log Z,
and Holm's adjustment around missing p-values; and Holm in the claims' verdicts (the note)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from normlab.claims.catalogue.training_statistics import _dist
from normlab.claims.output import (
    adjust,
    holm_verdicts,
    markdown_table,
    print_table,
    render_from_json,
    verdict_text,
    write_page,
)
from normlab.claims.rules import CONTRADICTED, INCONCLUSIVE, PARTLY, SUPPORTED, Within, combine
from normlab.report.html import esc
from normlab.stats.effects import Effect, holm


def test_within_without_a_t_interval_has_no_evidence_p_value() -> None:
    e = Effect(0.1, 0.0, 0.2, n_a=5, method="bootstrap")  # an interval, but no se and df
    rule = Within(-1.0, 1.0)
    assert rule.verdict(e) == SUPPORTED and rule.p(e) == 1.0


def test_distance_of_a_missing_value_is_missing() -> None:
    assert _dist(None) is None and _dist(1.5, None) is None
    assert _dist(-2.0) == 2.0 and _dist(1.0, 3.5) == 2.5


def test_holm_leaves_missing_p_values_out() -> None:
    out = holm([0.04, None, 0.01, 0.03])
    assert out[1] is None
    assert out == pytest.approx([0.06, None, 0.03, 0.06])  # 0.01 x 3, max(0.03 x 2, .), max(0.04 x 1, 0.06)


# Holm in the claims' verdicts: a decisive part that does not survive the adjustment counts as
# inconclusive in verdict_holm, and the claim's verdict carries a note naming it.

def _part(pid: str, verdict: str, p: float | None) -> dict[str, Any]:
    return {"id": pid, "verdict": verdict, "p": p, "asserts": f"{pid} asserts", "quantity": "q", "rule_text": "rule",
            "why": "why", "effect_text": "+1 [+0.5, +1.5], n 4", "trials": [], "numbers": {}, "note": "",
            "effect": {"estimate": 1.0, "lo": 0.5, "hi": 1.5, "n_a": 4, "n_b": None}}


def _claim(cid: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": cid, "verdict": combine([p["verdict"] for p in parts]), "parts": list(parts), "statement": "s",
            "source": "src", "experiment": "e", "settings": "", "rule_hash": "h", "effect_figure": f"claim-{cid}"}


def _family() -> list[dict[str, Any]]:
    # 6 p-values; Holm multiplies the smallest by 6, the next by 5, ...: 0.001 -> 0.006,
    # 0.002 -> 0.01, 0.004 -> 0.016, 0.021 -> 0.063 (x 3), 0.03 -> 0.063 (x 2 = 0.06, running max), 0.6
    return [_claim("rests", _part("post-1e-3", SUPPORTED, 0.021), _part("pre", SUPPORTED, 0.001)),
            _claim("partly", _part("a", SUPPORTED, 0.03), _part("b", CONTRADICTED, 0.002)),
            _claim("holds", _part("c", SUPPORTED, 0.004), _part("d", INCONCLUSIVE, 0.6))]


def test_holm_verdicts_in_every_case() -> None:
    records = _family()
    assert adjust(records) == 6
    holm_verdicts(records)
    rests, partly, holds = records
    assert rests["verdict"] == SUPPORTED and rests["verdict_holm"] == INCONCLUSIVE   # supported by a failing part
    assert rests["holm_note"] == ("rests on part post-1e-3 (p 0.021, adjusted 0.063), which does not survive "
                                  "the Holm adjustment")
    assert partly["verdict"] == PARTLY and partly["verdict_holm"] == CONTRADICTED     # its support fails
    assert partly["holm_note"] == "rests on part a (p 0.03, adjusted 0.063), which does not survive the Holm adjustment"
    assert holds["verdict"] == holds["verdict_holm"] == INCONCLUSIVE and holds["holm_note"] == ""  # c survives
    assert verdict_text(holds) == INCONCLUSIVE
    assert verdict_text(rests) == f"inconclusive after Holm: {rests['holm_note']}"  # the adjusted verdict leads


def test_holm_note_names_every_failing_part_and_keeps_unchanged_verdicts() -> None:
    both = [_claim("two", _part("x", SUPPORTED, 0.03), _part("y", SUPPORTED, 0.04))]
    adjust(both)
    holm_verdicts(both)
    assert both[0]["verdict_holm"] == INCONCLUSIVE
    assert both[0]["holm_note"] == ("rests on parts x (p 0.03, adjusted 0.06) and y (p 0.04, adjusted 0.06), "
                                    "which do not survive the Holm adjustment")
    # a claim that stays contradicted when a part fails (v: 0.04 x 2) needs no note
    still = [_claim("c", _part("u", CONTRADICTED, 0.001), _part("v", CONTRADICTED, 0.04), _part("w", INCONCLUSIVE, 0.5))]
    adjust(still)
    holm_verdicts(still)
    assert still[0]["parts"][1]["holm_ok"] is False and still[0]["verdict_holm"] == CONTRADICTED
    assert still[0]["holm_note"] == ""


def test_holm_verdict_of_a_scoped_claim_is_derived_as_its_verdict() -> None:
    """A claim decided outside its source's regime has a scoped verdict ("seen at the lab's
    settings"); verdict_holm is derived the same way (found by the published cpu run, where the
    old derivation combined scoped words and named no part)."""
    from normlab.claims.claim import claim_verdict
    from normlab.claims.regime import scoped

    def away(pid: str, verdict: str, p: float) -> dict[str, Any]:
        return {**_part(pid, scoped(verdict, ["steps"]), p), "rule_verdict": verdict, "departures": ["steps"]}

    out = {**_claim("out", _part("x", SUPPORTED, 0.5)), "parts": [away("s", SUPPORTED, 0.001)]}
    out["verdict"] = scoped(*claim_verdict(out["parts"]))
    fails = {**_claim("f", _part("x", SUPPORTED, 0.5)), "parts": [away("s", SUPPORTED, 0.001), away("t", SUPPORTED, 0.03)]}
    fails["verdict"] = scoped(*claim_verdict(fails["parts"]))
    # inside the regime beats outside: the claim rests on part i alone, so t failing Holm is moot
    mixed = {**_claim("m", _part("i", SUPPORTED, 0.002)), "parts": [_part("i", SUPPORTED, 0.002) | {"departures": []},
                                                                     away("t", CONTRADICTED, 0.04)]}
    mixed["verdict"] = scoped(*claim_verdict(mixed["parts"]))
    records = [out, fails, mixed]
    adjust(records)
    holm_verdicts(records)
    assert out["verdict"] == out["verdict_holm"] == scoped(SUPPORTED, ["steps"]) != SUPPORTED
    assert out["holm_note"] == ""
    assert fails["verdict"] == scoped(SUPPORTED, ["steps"]) and fails["verdict_holm"] == scoped(INCONCLUSIVE, ["steps"])
    assert fails["holm_note"].startswith("rests on part t (p 0.03, adjusted ")
    assert mixed["verdict"] == mixed["verdict_holm"] == SUPPORTED and mixed["holm_note"] == ""


def test_tables_and_page_carry_the_holm_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = _family()
    meta = {"family_size": adjust(records)}
    holm_verdicts(records)
    note = records[0]["holm_note"]
    md = markdown_table(records)
    row = next(line for line in md.splitlines() if "`rests`" in line)
    assert f"| inconclusive after Holm: {note} | supported |" in row  # adjusted first, unadjusted beside
    assert "after Holm" not in next(line for line in md.splitlines() if "`holds`" in line)
    print_table(records, width=200)
    out = capsys.readouterr().out
    assert f"claim: unadjusted supported; after Holm it {note}" in out and out.count("after Holm it") == 2
    write_page(records, tmp_path, meta)
    html = (tmp_path / "index.html").read_text()
    assert html.count(f"after Holm: {esc(note)}") == 1 and f"the verdict {esc(note)}." in html
    assert html.count("after Holm:") == 2


def test_render_from_json_adds_holm_verdicts_to_an_older_claims_json(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # no drawing (output.py calls effect_figure by the name it imported)
    monkeypatch.setattr("normlab.claims.output.effect_figure", lambda r, out: r["effect_figure"])
    records = _family()
    meta = {"family_size": adjust(records)}  # as written before verdict_holm existed
    (tmp_path / "claims.json").write_text(json.dumps({"meta": meta, "claims": records}))
    html = render_from_json(tmp_path).read_text()
    assert "inconclusive</span> after Holm: rests on part post-1e-3" in html
