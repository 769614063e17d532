"""Power before registration (issue 40): a claim's design analysis runs when it is registered, a
part that cannot decide whatever the data is refused in one line naming it and the best its
design could reach, a decidable design is recorded with the part, and --require-designs refuses
a claim that declares none."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from normlab.claims import registration
from normlab.claims.claim import CLAIMS
from normlab.claims.design import mean_design
from normlab.core.errors import UserError

QUICK = "xiong-thm1"  # declares no design analysis (yet)


def test_a_grid_that_stops_short_of_the_boundary_is_refused_in_one_line(tmp_path: Path, capsys,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """frontier-placement with Pre-LN's lrs ending at 2e-3, where Post-LN's boundary lies:
    far below Pre-LN's (the exploration's, 0.18), so no 95% bound can pass 0 whatever the data."""
    from normlab.cli import main
    from normlab.study.bracket_preset import BRACKET_GRID

    lines = {**BRACKET_GRID["cpu"]["lines"], ("pre", 6, 0): [5e-4, 1e-3, 2e-3]}
    monkeypatch.setitem(BRACKET_GRID, "cpu", {**BRACKET_GRID["cpu"], "lines": lines})
    out = tmp_path / "reg.json"
    code = main(["claims", "register", "--scale", "cpu", "--only", "frontier-placement", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not out.exists()
    assert len(err) == 1, err
    line = err[0]
    assert "frontier-placement/L6-w0: cannot decide at the planned design" in line
    assert "its 95% bound reaches at best" in line and "whatever the data" in line  # what it could detect
    assert "lrs end at 0.002, below its boundary 0.18: add lrs above it" in line  # the fix
    # the registered grid brackets every boundary: the same command writes the file
    monkeypatch.undo()
    assert main(["claims", "register", "--scale", "cpu", "--only", "frontier-placement", "--out", str(out)]) == 0


def test_a_decidable_design_is_recorded_with_its_part(monkeypatch: pytest.MonkeyPatch) -> None:
    c = CLAIMS.get(QUICK)
    part = c.parts[0]

    def design(claim, scale):  # a stated prior: sd 0.05 a seed, 5 seeds, the expected slope -0.5
        return {part.id: mean_design(f"{claim.id}/{part.id}", part.rule, 5, 0.05, effect=-0.5, sims=400)}

    monkeypatch.setattr(c, "design", design)
    doc = registration.build("cpu", [QUICK])
    rec = doc["claims"][QUICK]["parts"][0]["design"]
    assert rec["decidable"] and rec["detectable"] is not None and rec["plan"]
    assert doc["claims"][QUICK]["parts"][1]["design"] is None  # a part without one says so


def test_an_undecidable_design_refuses_whatever_part_declares_it(monkeypatch: pytest.MonkeyPatch) -> None:
    c = CLAIMS.get(QUICK)
    part = c.parts[0]

    def design(claim, scale):  # 3 seeds of sd 10: nothing within reach is detected
        return {part.id: mean_design(f"{claim.id}/{part.id}", part.rule, 3, 10.0, sims=200)}

    monkeypatch.setattr(c, "design", design)
    with pytest.raises(UserError, match=rf"^{QUICK}/{part.id}: cannot decide at the planned design") as e:
        registration.build("cpu", [QUICK])
    assert "\n" not in str(e.value)


def test_require_designs_refuses_a_claim_without_one() -> None:
    with pytest.raises(UserError, match=rf"--require-designs: {QUICK}/\S+(, {QUICK}/\S+)* declare no design analysis"):
        registration.build("cpu", [QUICK], every_design=True)
    assert registration.build("cpu", [QUICK])["claims"][QUICK]["parts"][0]["design"] is None  # default: recorded as none


def test_the_frontier_designs_read_the_planned_grid() -> None:
    """The designs use the lrs and seeds the bracket studies plan at the scale: each line its own
    five lrs 1.5x apart, 4 seeds, 6 for Post-LN at 6 blocks, six lrs from 2e-5 for Post-LN at 18."""
    from normlab.claims.catalogue.frontier_design import planned

    lines = planned("cpu")
    lrs, seeds = lines[("pre", 6, 0)]
    assert seeds == 6 and len(lrs) == 5 and min(lrs) == pytest.approx(0.1009, rel=1e-3)
    assert max(lrs) == pytest.approx(0.2465, rel=1e-3)
    assert all(b / a == pytest.approx(1.25, rel=1e-3) for a, b in zip(lrs, lrs[1:]))
    assert all(n == 6 for _, n in lines.values())  # every line 6 seeds: a separated sweep is bounded by its neighbours
    assert not any(p == "post" and b == 18 for p, b, _ in lines)  # Post-LN at 18 blocks has no critical lr
    assert len(lines[("pre", 18, 0)][0]) == 6 and ("post", 12, 50) in lines
    c = CLAIMS.get("frontier-depth")
    wider = dataclasses.replace(c)  # the same claim; its design reads the same grid
    assert registration.designs(wider, "cpu").keys() == {"post"}
