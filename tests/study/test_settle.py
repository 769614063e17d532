"""The settling rule (study/settle.py) on synthetic readings: a slow starter extended until it
trains, a true stall held to the longest stage, a critical lr that drifts then settles, and the
rule's own checks."""

from __future__ import annotations

import pytest

from normlab.core.errors import ConfigError
from normlab.stats.frontier import critical_lr
from normlab.study.settle import EXTEND, SETTLED, UNSETTLED, Settling, Stage, lr_move, settle

RULE = Settling((200, 400, 1000, 2000), effect_tol=0.05)
SEEDS = ("s0", "s1", "s2", "s3")


def _stage(h: int, outcomes: list[str | None], effect: float | None = None, **critical) -> Stage:
    return Stage(h, dict(zip(SEEDS, outcomes)), effect, critical)


def test_a_slow_starter_is_extended_until_it_trains() -> None:
    # seeds leave the plateau one by one (as HybridNorm's seed 200 at step 560): the effect (best
    # val loss below the plateau) moves until every seed trains and the loss stops moving
    readings = [_stage(200, ["stalls"] * 4, -0.01), _stage(400, ["trains", "stalls", "stalls", "stalls"], -0.20),
                _stage(1000, ["trains"] * 4, -0.70), _stage(2000, ["trains"] * 4, -0.72)]
    got = [settle(RULE, readings[:i]) for i in range(1, 5)]
    assert [g.status for g in got] == [EXTEND, EXTEND, EXTEND, SETTLED]
    assert [g.next_horizon for g in got[:3]] == [400, 1000, 2000]
    assert "1 of 4 runs changed outcome (s0: stalls -> trains)" in got[1].moved[0]
    assert got[2].moved == ("3 of 4 runs changed outcome (s1: stalls -> trains, s2: stalls -> trains, "
                            "s3: stalls -> trains)", "effect moved -0.5, not within the tolerance 0.05")
    final = got[3]
    assert final.horizon == 2000 and final.drift == pytest.approx(-0.02) and final.moved == ()
    assert final.text() == "settled at step 2000 (effect drift -0.02 over the last stage)"


def test_a_fast_part_settles_at_the_second_stage() -> None:
    got = settle(RULE, [_stage(200, ["trains"] * 4, -0.80), _stage(400, ["trains"] * 4, -0.83)])
    assert (got.status, got.horizon, got.next_horizon) == (SETTLED, 400, None)


def test_a_true_stall_is_held_to_the_longest_stage_and_scoped_to_it() -> None:
    # every seed stalls at every stage, but the loss creeps down: never within the tolerance
    effects = {200: -0.01, 400: -0.05, 1000: -0.11, 2000: -0.19}
    readings = [_stage(h, ["stalls"] * 4, e) for h, e in effects.items()]
    got = settle(RULE, readings)
    assert got.status == UNSETTLED and got.horizon == 2000 and got.next_horizon is None
    assert got.drift == pytest.approx(-0.08)
    assert got.text() == ("unsettled at the longest stage, step 2000 (4 of 4 runs still on the plateau (a stall is "
                          "read at the longest stage); effect moved -0.08, not within the tolerance 0.05): the verdict "
                          "is scoped to step 2000")


def test_a_flat_stall_is_still_held_to_the_longest_stage() -> None:
    # a stalled run's loss barely moves, so the effect's tolerance would call it settled at step 400,
    # where a slow starter (HybridNorm's seed 200 left the plateau at step 560) still looks stalled
    flat = {200: -0.010, 400: -0.012, 1000: -0.013, 2000: -0.013}
    readings = [_stage(h, ["stalls"] * 4, e) for h, e in flat.items()]
    got = [settle(RULE, readings[:i]) for i in range(2, 5)]
    assert [g.status for g in got] == [EXTEND, EXTEND, UNSETTLED]
    assert got[0].moved == ("4 of 4 runs still on the plateau (a stall is read at the longest stage)",)
    assert got[2].horizon == 2000 and "scoped to step 2000" in got[2].text()
    # one stalled seed among trained ones holds the part too; once it trains, the part settles
    mixed = [_stage(200, ["trains"] * 3 + ["stalls"], -0.8), _stage(400, ["trains"] * 3 + ["stalls"], -0.81)]
    assert settle(RULE, mixed).status == EXTEND
    assert settle(RULE, [*mixed, _stage(1000, ["trains"] * 4, -0.9), _stage(2000, ["trains"] * 4, -0.92)]).status \
        == SETTLED


def test_a_run_without_an_outcome_is_a_change() -> None:
    got = settle(RULE, [_stage(200, ["stalls", "trains", "trains", "trains"], 0.0),
                        _stage(400, [None, "trains", "trains", "trains"], 0.0)])
    assert got.status == EXTEND and "s0: stalls -> None" in got.moved[0]


LRS = [1e-3, 2e-3, 3e-3, 4.5e-3, 6.75e-3, 1e-2]


def test_a_critical_lr_drifts_then_settles() -> None:
    # Post-LN, 6 blocks, no warm-up: 2e-3 at step 200, 3e-3 at step 400 (+0.18 decades, issue 40),
    # then stays within 0.1 decade
    rule = Settling((200, 400, 1000), lr_tol=0.1)
    fr = {200: critical_lr(LRS, [4, 2, 0, 0, 0, 0], [4] * 6), 400: critical_lr(LRS, [4, 4, 2, 0, 0, 0], [4] * 6),
          1000: critical_lr(LRS, [4, 4, 3, 1, 0, 0], [4] * 6)}
    readings = [Stage(h, critical={"post L6 w0": f}) for h, f in fr.items()]
    second = settle(rule, readings[:2])
    assert second.status == EXTEND and second.lr_drift == pytest.approx(0.176, abs=0.01)
    assert "critical lr post L6 w0 moved 0.18 decades, not within 0.1" in second.moved
    third = settle(rule, readings)
    assert third.status == SETTLED and third.horizon == 1000 and third.lr_drift is not None
    assert third.lr_drift < 0.1
    assert "critical lrs moved at most" in third.text()


def test_a_critical_lr_part_ignores_runs_flipping_where_no_seed_trains() -> None:
    # Campaign 1's frontier stage, Pre-LN 6 blocks without warm-up: between steps 400 and 1000
    # runs above the boundary went stalls -> diverged (neither trains), the critical lr did not
    # move; the part is settled by its frontier, not by single cells
    lrs = [0.0985, 0.148, 0.222, 0.333]
    fr = critical_lr(lrs, [4, 4, 0, 0], [4] * 4)
    before = {f"r{i}": o for i, o in enumerate(["trains"] * 8 + ["stalls"] * 4 + ["stalls", "stalls", "stalls", "diverged"])}
    after = {**before, "r12": "diverged", "r13": "diverged"}
    rule = Settling((200, 400, 1000))
    got = settle(rule, [Stage(200, before, 1.0, {"pre L6 w0": fr}), Stage(400, before, 1.0, {"pre L6 w0": fr}),
                        Stage(1000, after, 1.0, {"pre L6 w0": fr})])
    assert got.status == SETTLED and got.horizon == 1000 and got.lr_drift == 0.0
    # the same flips in a part with no critical lr are a change
    plain = settle(rule, [Stage(200, before, 1.0), Stage(400, before, 1.0), Stage(1000, after, 1.0)])
    assert plain.status == UNSETTLED and "2 of 16 runs changed outcome" in plain.moved[0]


def test_a_frontier_that_leaves_censoring_has_moved() -> None:
    censored = critical_lr(LRS, [4] * 6, [4] * 6)          # every lr trains: > 1e-2
    estimated = critical_lr(LRS, [4, 4, 4, 4, 2, 0], [4] * 6)
    assert lr_move(censored, estimated) is None
    assert lr_move(censored, censored) == 0.0
    got = settle(Settling((200, 400)), [Stage(200, critical={"pre": censored}), Stage(400, critical={"pre": estimated})])
    assert got.status == UNSETTLED and got.lr_drift is None
    assert got.moved[0].startswith("critical lr pre: > 0.01 (every lr trains")


def test_one_stage_never_settles() -> None:
    assert settle(RULE, [_stage(200, ["trains"] * 4, -0.8)]).status == EXTEND
    assert settle(Settling((200,)), [_stage(200, ["trains"] * 4, -0.8)]).status == UNSETTLED


@pytest.mark.parametrize("kwargs, field", [({"stages": (400, 200)}, "settling.stages"),
                                           ({"stages": ()}, "settling.stages"),
                                           ({"stages": (200,), "effect_tol": 0.0}, "settling.effect_tol"),
                                           ({"stages": (200,), "lr_tol": -1.0}, "settling.lr_tol")])
def test_a_bad_rule_names_its_option(kwargs, field) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        Settling(**kwargs)


def test_readings_must_follow_the_registered_stages() -> None:
    with pytest.raises(ConfigError, match=r"settle\.readings=\[200, 1000\].*\[200, 400, 1000, 2000\]"):
        settle(RULE, [_stage(200, ["trains"] * 4, 0.0), _stage(1000, ["trains"] * 4, 0.0)])


def test_the_rule_is_registrable() -> None:
    assert RULE.spec() == {"stages": [200, 400, 1000, 2000], "effect_tol": 0.05, "lr_tol": 0.1}
    assert "moves less than 0.05" in RULE.text() and "0.1 decades" in RULE.text()
