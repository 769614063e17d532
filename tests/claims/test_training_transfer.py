"""The transfer claims (``claims/catalogue/training_transfer.py``, ``training_monitors.py``): each
rule on synthetic stores in every outcome it can have, the guards (a censored line never shows an
equivalence, an entropy read after a seed left the plateau precedes nothing), the four lines of a
gap kept apart when settling, and the design analyses: every registered part decides at the
planned seeds with 80% power, and a grid that cannot decide is refused."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic as S  # noqa: E402
import worlds_transfer as WT  # noqa: E402

from normlab.claims import registration  # noqa: E402
from normlab.claims.catalogue import training_transfer, transfer_design  # noqa: E402
from normlab.claims.claim import CLAIMS, Measured  # noqa: E402
from normlab.claims.design import POWER  # noqa: E402
from normlab.claims.design_frontier import Arm  # noqa: E402
from normlab.claims.design_transfer import equivalence_design, gap_design, split_design  # noqa: E402
from normlab.claims.rules import CONTRADICTED, INCONCLUSIVE, SUPPORTED, Direction, Within  # noqa: E402
from normlab.claims.settling import line_name  # noqa: E402
from normlab.core.errors import UserError  # noqa: E402
from normlab.stats.effects import Effect  # noqa: E402
from normlab.study import transfer_preset as TP  # noqa: E402

WANT = {"S": SUPPORTED, "C": CONTRADICTED, "I": INCONCLUSIVE}


def decide(cid: str, cells: list, root: Path) -> dict[str, Any]:
    return CLAIMS.get(cid).decide(S.FakeContext(root, cells, seeds=WT.WORLD_SEEDS[cid]))


@pytest.mark.parametrize("outcome", ["S", "C", "I"])
@pytest.mark.parametrize("cid", sorted(WT.WORLDS))
def test_every_part_in_every_outcome(cid: str, outcome: str, tmp_path: Path) -> None:
    rec = decide(cid, WT.WORLDS[cid](outcome), tmp_path)
    got = {p["id"]: p["rule_verdict"] for p in rec["parts"]}
    assert set(got.values()) == {WANT[outcome]}, {p["id"]: (p["rule_verdict"], p["effect_text"], p["note"])
                                                 for p in rec["parts"]}
    for p in rec["parts"]:
        assert p["trials"] and p["effect"]["n_a"] >= 3, p["id"]
        if p["rule"]["kind"] == "direction" and p["p"] is not None:  # (an equivalence's p is conservative: below)
            assert (p["p"] < 0.05) == (p["rule_verdict"] != INCONCLUSIVE), (p["id"], p["p"], p["rule_verdict"])


def test_an_equivalence_p_is_never_decisive_outside_its_verdict() -> None:
    """Within's Holm p from the wider half: p < 0.05 only where the interval lies inside (or
    outside) the margin; an interval just inside may keep p above 0.05 (conservative)."""
    rule = Within(-0.15, 0.15)
    for est, lo, hi in [(0.0, -0.05, 0.05), (0.1, 0.06, 0.14), (0.1, 0.0, 0.2), (0.3, 0.2, 0.4), (0.0, -0.2, 0.1)]:
        m = training_transfer._equivalence(Measured(Effect(est, lo, hi, 8, 8)))
        p, verdict = rule.p(m.effect), rule.verdict(m.effect)
        assert p is not None and (p >= 0.05 or verdict != INCONCLUSIVE), (est, lo, hi, p, verdict)
    inside = training_transfer._equivalence(Measured(Effect(0.0, -0.05, 0.05, 8, 8))).effect
    assert rule.verdict(inside) == SUPPORTED and rule.p(inside) < 0.05
    lopsided = training_transfer._equivalence(Measured(Effect(0.1, 0.0, 0.14, 8, 8))).effect
    assert rule.verdict(lopsided) == SUPPORTED and rule.p(lopsided) >= 0.05  # supported; its p does not say so


def test_a_censored_line_never_shows_an_equivalence(tmp_path: Path) -> None:
    """muP at d=256 training at every lr: its critical lr lies above the grid, the difference is a
    bound (no estimate, no p-value), which an equivalence can never be supported by."""
    cells = [c for c in WT.mup_width_transfer("S") if c[1][TP.D] != 256 or c[1][TP.PARAM] != "mup"]
    cells += WT.line(TP.WIDTH_MUP, {TP.PARAM: "mup", TP.D: 256}, WT.FINE, len(WT.FINE) - 1)
    part = next(p for p in decide("mup-width-transfer", cells, tmp_path)["parts"] if p["id"] == "mup")
    assert part["rule_verdict"] == INCONCLUSIVE and part["p"] is None and "censored" in part["note"]
    assert part["effect"]["estimate"] is None and part["numbers"]["log10_ratio"]["censored"] == "above"


def test_entropy_read_after_a_seed_left_the_plateau_is_inconclusive(tmp_path: Path) -> None:
    cells = [(TP.ENTROPY, {}, WT.entropy_run(1.5, 2.5, 0.02, left=40))]
    part = decide("entropy-collapse-stall", cells, tmp_path)["parts"][0]
    assert part["effect"]["hi"] < 0  # the interval alone would say supported
    assert part["rule_verdict"] == INCONCLUSIVE and part["p"] is None
    assert "left the plateau by step 50" in part["note"] and len(part["numbers"]["left_early"]) == 3
    assert part["numbers"]["outcomes"] == {"trains": 3, "stalls": 3, "diverged": 0}


def test_the_gap_reads_four_lines_that_settling_keeps_apart(tmp_path: Path) -> None:
    rec = decide("muon-placement-gap", WT.muon_placement_gap("S"), tmp_path)
    gap = next(p for p in rec["parts"] if p["id"] == "gap")
    lines = [v for v in gap["numbers"].values() if isinstance(v, dict) and "critical_lr" in v]
    names = {line_name(v) for v in lines}
    assert len(lines) == 4 == len(names)
    assert sorted(n.split()[-2:][0] + " " + n.split()[-1] for n in names) == ["adamw post", "adamw pre", "muon post",
                                                                              "muon pre"]
    g = gap["numbers"]
    assert g["gap_muon"]["estimate"] - g["gap_adamw"]["estimate"] == pytest.approx(gap["effect"]["estimate"])
    width = decide("mup-width-transfer", WT.mup_width_transfer("S"), tmp_path / "w")["parts"][0]
    assert len({line_name(width["numbers"][s]) for s in ("a", "b")}) == 2  # same placement and depth, two widths


def test_the_sharpness_window_is_the_first_fifty_steps(tmp_path: Path) -> None:
    """The worlds write 1e6 after step 50: a part that read beyond its window would show it."""
    rec = decide("warmup-sharpness", WT.warmup_sharpness("S"), tmp_path)
    for p in rec["parts"]:
        assert max(p["numbers"]["warmup"] + p["numbers"]["no_warmup"]) < 2.5 and p["numbers"]["window"] == [10, 50]


# ---------------------------------------------------------------- design analyses

@pytest.fixture(scope="module")
def designs() -> dict[str, dict[str, Any]]:
    return {cid: dict(CLAIMS.get(cid).design(CLAIMS.get(cid), "cpu")) for cid in WT.WORLDS}


def test_every_registered_part_decides_at_the_planned_seeds(designs: dict[str, dict[str, Any]]) -> None:
    for cid, found in designs.items():
        assert set(found) == {p.id for p in CLAIMS.get(cid).parts}, cid
        for d in found.values():
            assert d.decidable, d.text()
            if isinstance(d.rule, Within):  # shown inside the margin with 80% power at the centre at least
                assert d.detectable is not None and d.detectable >= 0
            else:  # an effect inside what the pilot or prior expects ... or at least one detected with 80% power
                assert d.detectable is not None and (d.detectable - d.rule.ref) * d.rule.sign > 0, d.text()
    assert designs["warmup-sharpness"]["post-sharp"].plan == "6 seeds against 6"
    assert transfer_design.width_design(CLAIMS.get("mup-width-transfer"), "gpu") == {}  # no pilot at the gpu base


def test_power_at_the_pilots_effects_is_recorded(designs: dict[str, dict[str, Any]]) -> None:
    gap = designs["muon-placement-gap"]["gap"]
    assert gap.effect == pytest.approx(transfer_design.expected(TP.MUON, ("muon", "pre"), ("muon", "post"))
                                       - transfer_design.expected(TP.MUON, ("adamw", "pre"), ("adamw", "post")))
    assert gap.power is not None and gap.power >= POWER
    assert designs["mup-width-transfer"]["sp"].power >= POWER


def test_a_grid_too_coarse_for_an_equivalence_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The depth equivalence on five lrs 1.5x apart with 4 seeds (the critical-lr brackets' grid):
    a separated sweep's interval is a whole 0.18-decade step, so no truth is shown inside 0.15."""
    lines = {k: TP.around(transfer_design.PILOT[TP.DEPTH][k], 1.5, 5) for k in (6, 18)}
    monkeypatch.setitem(TP.DEPTH_GRID, "cpu", {"lines": lines, "seeds": [0, 1, 2, 3]})
    monkeypatch.setattr(transfer_design, "_MEMO", {})
    with pytest.raises(UserError, match=r"completep-depth-transfer/post: cannot decide at the planned design .*power, "
                                        r"below 80%: add seeds or lrs nearer each boundary"):
        registration.build("cpu", ["completep-depth-transfer"])


def test_the_other_designs_refuse_what_cannot_decide() -> None:
    wide = Arm("b", (1e-3, 1.5e-3, 2.25e-3, 3.4e-3), 4, 1.8e-3)
    short = Arm("a", (1e-3, 1.5e-3), 4, 5e-3)  # ends below its own boundary
    d = gap_design("x/gap", Direction(-1), short, wide, wide, wide, sims=40)
    assert not d.decidable and "below its boundary" in d.limit
    few = split_design("x/precedes", Direction(-1), 5, 0.5, 0.1)
    assert not few.decidable and "add seeds" in few.limit
    eq = equivalence_design("x/eq", Within(-0.15, 0.15), dataclasses.replace(wide, name="a"), wide, sims=40)
    assert not eq.decidable and eq.detectable is None
