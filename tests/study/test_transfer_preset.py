"""The transfer study presets (``study/transfer_preset.py``): each line's lrs bracket the boundary
its pilot found (``claims/catalogue/transfer_design.py``: PILOT) at the spacing its rule needs,
the seeds are those the designs plan, each study is the stability map's base with its one
change, and the monitors run only where a claim reads them."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from normlab.claims.catalogue.transfer_design import KEYS, PILOT, WINDOW, planned
from normlab.claims.design_frontier import Arm, bracket_problem
from normlab.study.presets import study_preset
from normlab.study.transfer_preset import (
    DEPTH,
    ENTROPY,
    MUON,
    SHARPNESS,
    WIDTH_MUP,
    WIDTH_SP,
    around,
    transfer_width_sp,
)

LINES = (WIDTH_SP, WIDTH_MUP, DEPTH, MUON)
SPACING = {WIDTH_SP: 1.5, WIDTH_MUP: 1.2, DEPTH: 1.2, MUON: 1.5}  # the equivalences need 1.2x steps
SEEDS = {WIDTH_SP: 6, WIDTH_MUP: 8, DEPTH: 8, MUON: 6, SHARPNESS: 6, ENTROPY: 16}


def cfg(t: Any) -> dict[str, Any]:
    return json.loads(t.config_json)


@pytest.mark.parametrize("study", LINES)
def test_each_line_brackets_its_pilot_boundary_at_its_spacing(study: str) -> None:
    lines = planned(study, "cpu")
    assert set(lines) == set(PILOT[study]), "every line has a pilot boundary, and only the planned lines"
    for key, (lrs, seeds) in lines.items():
        assert seeds == SEEDS[study]
        steps = {round(math.log10(b / a), 3) for a, b in zip(lrs, lrs[1:])}
        assert steps == {round(math.log10(SPACING[study]), 3)}, (key, lrs)  # (to the 4 digits lrs are written to)
        assert bracket_problem(Arm(str(key), lrs, seeds, PILOT[study][key])) == "", key
        below = [x for x in lrs if x < PILOT[study][key]]
        assert len(below) >= 2 and len(lrs) - len(below) >= 2, (key, lrs)  # room either side of the pilot's


def test_the_equivalence_lines_share_one_grid() -> None:
    """Under an equivalence either line's truth may be the other's: both lines of each pair sit on
    one grid that holds both pilot boundaries."""
    for study in (WIDTH_MUP, DEPTH):
        grids = {lrs for lrs, _ in planned(study, "cpu").values()}
        assert len(grids) == 1, study


def test_studies_are_the_map_base_with_their_one_change() -> None:
    base = cfg(study_preset("stability-map").trials()[0])
    for name in (*LINES, SHARPNESS, ENTROPY):
        spec = study_preset(name)
        assert len(spec.seeds) == SEEDS[name]
        for t in spec.trials():
            c = cfg(t)
            assert (c["model"]["init"], c["optim"]["grad_clip"], c["optim"]["schedule"]) == ("xavier", 0.0, "constant")
            # the sharpness study's runs are 100 steps (its sharpness calls cost ~100 steps each)
            assert (c["model"]["context"], c["train"]["batch_size"]) == (64, 16)
            assert c["train"]["steps"] == (100 if name == SHARPNESS else 200)
            assert c["model"]["n_head"] == base["model"]["n_head"]
    widths = {(t.params["model.param"], t.params["model.d_model"]) for n in (WIDTH_SP, WIDTH_MUP)
              for t in study_preset(n).trials()}
    assert widths == {("sp", 64), ("sp", 256), ("mup", 64), ("mup", 256)}
    for t in study_preset(WIDTH_MUP).trials():
        m = cfg(t)["model"]
        assert (m["base_width"], m["placement"], m["n_layer"]) == (64, "pre", 6)
    for t in study_preset(DEPTH).trials():
        m = cfg(t)["model"]
        assert (m["param"], m["base_width"], m["base_depth"], m["placement"]) == ("completep", 64, 6, "post")
        assert cfg(t)["optim"]["warmup_steps"] == 50 and m["n_layer"] in (6, 18)


def test_muon_points_drive_every_group_with_one_lr_and_adamw_points_leave_muon_alone() -> None:
    for t in study_preset(MUON).trials():
        o = cfg(t)["optim"]
        if t.params["optim.name"] == "muon":
            assert (o["muon_lr"], o["muon_adjust_lr"], o["muon_weight_decay"]) == (o["lr"], "match_rms_adamw", 0.1)
        else:  # at their defaults, Muon's options are not written at all
            assert "name" not in o and not any(k.startswith("muon") for k in o)


def test_monitors_run_only_where_a_claim_reads_them() -> None:
    for name in LINES:
        for t in study_preset(name).trials():
            assert cfg(t)["train"].get("diag_every", 0) == 0 and "sharpness_every" not in cfg(t)["train"], name
    for t in study_preset(SHARPNESS).trials():
        tr = cfg(t)["train"]
        assert (tr["diag_every"], tr["sharpness_every"], cfg(t)["optim"]["lr"]) == (10, 10, 1e-3)
        assert WINDOW[0] % tr["sharpness_every"] == 0 and WINDOW[1] <= 50 < tr["steps"]  # the warm-up's own steps
    cells = {(t.params["model.placement"], t.params["optim.warmup_steps"]) for t in study_preset(SHARPNESS).trials()}
    assert cells == {("post", 0), ("post", 50), ("pre", 0), ("pre", 50)}
    for t in study_preset(ENTROPY).trials():
        c = cfg(t)
        assert (c["train"]["diag_every"], c["train"]["eval_every"], c["model"]["placement"]) == (10, 20, "post")
        assert "sharpness_every" not in c["train"] and c["optim"]["warmup_steps"] == 0


@pytest.mark.parametrize("scale", ["smoke", "gpu"])
def test_other_scales_build(scale: str) -> None:
    for name in (*LINES, SHARPNESS, ENTROPY):
        spec = study_preset(name, scale)
        assert len(spec.trials()) >= 2
        if name in KEYS:  # every smoke line has two lrs, so a frontier can be fitted
            assert all(len(lrs) >= 2 for lrs, _ in planned(name, scale).values())


def test_around_places_the_boundary_between_lrs() -> None:
    even, odd = around(0.19, 1.2, 6), around(0.19, 1.5, 5)
    assert sum(x < 0.19 for x in even) == 3 and sum(x < 0.19 for x in odd) == 2
    assert len(transfer_width_sp().trials()) == 2 * 5 * 6
