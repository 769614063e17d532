"""What deciding the undecided parts would cost (claims/decide_cost.py): each limit priced by hand
from its trials' step times, the cheapest parts summed to the target, the page's line, and a
store folder that is missing named in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.claims.decide_cost import COST_JSON, cost_doc, part_cost, read_cost, step_seconds, write_cost
from normlab.claims.decided import AFFORDABLE, Readout
from normlab.core.errors import UserError


def _row(part: str, limit: str | None, need: int | None = None) -> Readout:
    return Readout("campaign/s", "c", part, "inconclusive" if limit else "supported", limit, 4, need, "")


def _rec(trials: list[str], n: int = 4, horizon: int = 400) -> dict:
    return {"trials": trials, "horizon": horizon, "effect": {"n_a": n, "n_b": n}}


STEP = {f"t{i}": 0.05 for i in range(8)} | {"slow": 0.5}


def test_each_limit_priced_by_hand() -> None:
    two_arms = _rec([f"t{i}" for i in range(8)])  # 4 seeds a side, 2 trials a seed
    seeds = part_cost(_row("p", "seeds", need=10), two_arms, STEP)
    assert seeds["core_hours"] == pytest.approx(6 * 2 * 400 * 0.05 / 3600)        # 6 more seeds a side
    assert seeds["fresh_core_hours"] == pytest.approx(10 * 2 * 400 * 0.05 / 3600)  # all 10 new
    cost = part_cost(_row("p", "cost", need=None), two_arms, STEP)                  # beyond 1000: at least 25
    assert cost["core_hours"] == pytest.approx((AFFORDABLE + 1 - 4) * 2 * 400 * 0.05 / 3600)
    assert cost["how"].startswith("at least ")
    horizon = part_cost(_row("p", "horizon"), _rec([f"t{i}" for i in range(8)], horizon=1000), STEP)
    assert horizon["core_hours"] == horizon["fresh_core_hours"] == pytest.approx(8 * 1000 * 0.05 / 3600)
    missing = part_cost(_row("p", "seeds", need=10), _rec(["elsewhere"]), STEP)
    assert missing["core_hours"] is None and "not in the stores" in missing["how"]


def test_the_target_sums_the_cheapest_parts() -> None:
    rows = [_row(f"d{i}", None) for i in range(5)]                      # 5 decided of 10
    rows += [_row("cheap", "seeds", 6), _row("mid", "seeds", 12), _row("dear", "cost", 60),
             _row("slow", "seeds", 6), _row("unpriced", "seeds", 6)]
    recs = {("campaign/s", "c", r.part): _rec([f"t{i}" for i in range(8)]) for r in rows}
    recs[("campaign/s", "c", "slow")] = _rec(["slow"] * 8)
    recs[("campaign/s", "c", "unpriced")] = _rec(["nowhere"] * 8)
    doc = cost_doc(rows, recs, STEP)
    assert (doc["decided"], doc["parts_total"], doc["short"]) == (5, 10, 3)  # 80% of 10 = 8
    hour = 2 * 400 * 0.05 / 3600  # one seed a side of a t-trial part
    assert doc["to_target_core_hours"] == pytest.approx((2 + 8) * hour + 2 * 10 * hour)  # cheap, mid, slow
    assert doc["to_target_fresh_core_hours"] == pytest.approx((6 + 12) * hour + 6 * 10 * hour)
    assert [p["part"] for p in doc["parts"]][-1] == "unpriced"  # what is not priced sorts last
    short = cost_doc(rows[:5] + [_row("unpriced", "seeds", 6)], recs, STEP)
    assert short["short"] == 0 and short["to_target_core_hours"] == 0


def test_too_few_priced_parts_give_no_floor() -> None:
    rows = [_row("d", None), _row("unpriced", "seeds", 6), _row("other", "seeds", 6)]
    recs = {("campaign/s", "c", p): _rec(["nowhere"]) for p in ("unpriced", "other")}
    assert cost_doc(rows, recs, STEP)["to_target_core_hours"] is None


def test_step_seconds_from_a_store_and_the_file_round_trip(tmp_path: Path) -> None:
    from normlab.run.config import RunConfig
    from normlab.run.dir import RunDir
    from normlab.study.spec import Trial
    from normlab.study.store import Store

    assert step_seconds([tmp_path / "not-made"]) == {}
    store = Store.create(tmp_path / "st", {"name": "s"}, [Trial("a", 0, {"seed": 0}, RunConfig(seed=0).to_json()),
                                                          Trial("b", 1, {"seed": 1}, RunConfig(seed=1).to_json())])
    (run,) = [t.run_dir for t in store.trials() if t.id == "a"]
    store.close()
    run.mkdir(parents=True)
    RunDir(run).write_summary({"steps": 200, "wall_time_s": 10.0})
    assert step_seconds([tmp_path / "st"]) == {"a": pytest.approx(0.05)}  # b never ran: not priced
    write_cost(tmp_path, {"parts": [], "short": 0})
    assert read_cost(tmp_path) == {"parts": [], "short": 0}
    (tmp_path / COST_JSON).write_text("{broken")
    with pytest.raises(UserError, match=f"{COST_JSON}: cannot read it .*run `normlab campaign cost` again"):
        read_cost(tmp_path)
    assert read_cost(tmp_path / "none") is None


def test_the_page_says_what_the_target_costs_and_why_new_stages_cannot_reach_it(tmp_path: Path) -> None:
    from normlab.claims.campaign_page import _cost_line
    from normlab.claims.campaign_plan import load_plan

    (tmp_path / "plan.toml").write_text('name = "c"\nscale = "cpu"\nbudget_core_hours = 10\nfirst_seed = 9000\n'
                                        '[[stage]]\nname = "s"\nregistration = "r.json"\nclaims = ["xiong-thm1"]\n'
                                        'estimate_core_hours = 4\n')
    plan = load_plan(tmp_path / "plan.toml")
    doc = {"target": 0.8, "parts_total": 10, "decided": 5, "short": 3, "to_target_core_hours": 0.5,
           "to_target_fresh_core_hours": 1.25, "parts": []}
    (line,) = [x for x in _cost_line(plan, doc, 10, 5) if x]
    assert "needs 3 more of these parts decided; the cheapest 3 would take at least 1.25 core-hours on fresh " \
           "seeds (6.00 left in the budget" in line
    assert "reaches 80% only after 15 of them" in line  # (5 + 15) / (10 + 15) = 0.8
    assert "would take at least 0.50, but is not a valid test" in line
    (stale,) = [x for x in _cost_line(plan, doc, 12, 5) if x]
    assert "(Priced when 5 of 10 parts were decided" in stale
