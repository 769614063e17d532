"""Issue 40's read-out (claims/decided.py): the share of registered parts decided after one Holm
over the catalogue, and for each part that is not, its limit: horizon, seeds or cost; on
synthetic claims.json files, every limit, and the campaign page that shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats

from normlab.claims.decided import AFFORDABLE, readout, seeds_needed, share
from normlab.claims.family import catalogue_family
from normlab.claims.holm import adjust, holm_verdicts

DIRECTION = {"kind": "direction", "sign": 1, "ref": 0.0}


def _welch(est: float, se: float, n: int) -> dict:
    return {"estimate": est, "lo": est - 2.4 * se, "hi": est + 2.4 * se, "n_a": n, "n_b": n, "se": se,
            "df": 2.0 * (n - 1), "counts": None}


def _part(pid: str, effect: dict, verdict: str, settle: str = "settled", rule: dict | None = None) -> dict:
    p = 2 * float(stats.t.sf(abs(effect["estimate"]) / effect["se"], effect["df"]))
    return {"id": pid, "p": p, "verdict": verdict, "rule_verdict": verdict, "departures": [], "effect": effect,
            "rule": rule or DIRECTION, "settle_status": settle, "horizon": 1000}


def _write(folder: Path, parts: list[dict]) -> None:
    from normlab.claims.claim import claim_verdict
    from normlab.claims.regime import scoped

    records = [{"id": f"c-{p['id']}", "verdict": scoped(*claim_verdict([p])), "parts": [p]} for p in parts]
    adjust(records)
    holm_verdicts(records)
    folder.mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps({"meta": {"mode": "confirmatory"}, "claims": records}))


def test_every_limit_on_synthetic_runs(tmp_path: Path) -> None:
    parts = [_part("strong", _welch(1.0, 0.01, 5), "supported"),              # p ~1e-11: decided
             _part("t-tail", _welch(0.05, 0.012, 5), "supported"),           # p ~0.003: fails the family's Holm
             _part("moving", _welch(0.05, 0.012, 5), "supported", "unsettled"),
             _part("near-0", _welch(0.002, 0.01, 5), "inconclusive")]        # 0.2 se from its boundary
    parts += [_part(f"filler{i}", _welch(0.0, 0.01, 5), "inconclusive") for i in range(16)]  # a family of 20
    _write(tmp_path / "campaign" / "s", parts)
    fam = catalogue_family(tmp_path)
    rows = {r.part: r for r in readout(fam, ["campaign/s"])}
    assert rows["strong"].decided and rows["strong"].verdict == "supported"
    assert (rows["t-tail"].limit, rows["t-tail"].seeds_now) == ("seeds", 5)
    assert 5 < rows["t-tail"].seeds_needed <= AFFORDABLE and "seeds a side would decide it" in rows["t-tail"].text
    assert rows["moving"].limit == "horizon" and "still moving at step 1000" in rows["moving"].text
    assert rows["near-0"].limit == "cost" and rows["near-0"].seeds_needed is None  # beyond 1000 seeds a side
    assert f"more than {AFFORDABLE} seeds a side" in rows["near-0"].text
    line = share(list(rows.values()))
    assert line.startswith("1 of 20 registered parts decided after the catalogue's adjustment (5%; 3 decisive at "
                           "their rules' own level before it)")
    assert "1 by horizon, 1 by seeds, 17 by cost" in line


def test_seeds_needed_follows_the_t_tail_and_the_family() -> None:
    e = _welch(0.05, 0.012, 5)
    small, large = seeds_needed(e, DIRECTION, 2), seeds_needed(e, DIRECTION, 200)
    assert small is not None and large is not None and small < large  # a bigger family asks more
    # at the count it names the t test passes Bonferroni's 0.05 / m; one fewer does not
    for m, need in ((2, small), (200, large)):
        def p_at(k: int) -> float:
            return 2 * float(stats.t.sf(0.05 / 0.012 * (k / 5) ** 0.5, 8.0 * (k - 1) / 4))
        assert p_at(need) < 0.05 / m and (need == 5 or p_at(need - 1) >= 0.05 / m)
    assert seeds_needed({"estimate": None}, DIRECTION, 10) is None
    within = {"kind": "within", "lo": -0.1, "hi": 0.1}  # the nearer bound decides an equivalence
    assert seeds_needed(_welch(0.0, 0.02, 5), within, 10) == seeds_needed(_welch(0.1, 0.02, 5), DIRECTION, 10)


def test_the_campaign_page_shows_the_readout(tmp_path: Path) -> None:
    from normlab.claims.campaign_page import page
    from normlab.claims.campaign_plan import load_plan

    folder = tmp_path / "evidence" / "campaign"
    folder.mkdir(parents=True)
    (folder / "plan.toml").write_text('name = "c"\nscale = "cpu"\nbudget_core_hours = 1\nfirst_seed = 9000\n[[stage]]\nname = "s"\n'
                                      'registration = "registration/s.json"\nclaims = ["xiong-thm1"]\n'
                                      'estimate_core_hours = 0.5\n')
    assert "## Decided" not in page(load_plan(folder / "plan.toml"))  # nothing published yet
    _write(folder / "s", [_part("strong", _welch(1.0, 0.01, 5), "supported"),
                          _part("moving", _welch(0.002, 0.01, 5), "inconclusive", "unsettled")])
    text = page(load_plan(folder / "plan.toml"))
    assert "**1 of 2 registered parts decided after the catalogue's adjustment (50%; 1 decisive at their rules' own " \
           "level before it); the rest stopped 1 by horizon**" in text
    assert "| s | `c-moving` | moving | inconclusive | horizon | still moving at step 1000, its longest stage |" in text


@pytest.mark.parametrize("n", [3, 4, 6])
def test_a_decided_part_never_asks_for_seeds(tmp_path: Path, n: int) -> None:
    _write(tmp_path / "r", [_part("strong", _welch(1.0, 0.01, n), "supported")])
    (row,) = readout(catalogue_family(tmp_path), ["r"])
    assert row.decided and row.limit is None and row.seeds_needed is None and row.seeds_now == n


@pytest.mark.parametrize("outcomes, limit", [({"a": {"trains": 0, "stalls": 4, "diverged": 0},
                                               "b": {"trains": 0, "stalls": 0, "diverged": 4}}, "horizon"),
                                              ({"a": {"trains": 0, "stalls": 0, "diverged": 4},
                                                "b": {"trains": 0, "stalls": 0, "diverged": 4}}, "cost")])
def test_a_part_where_no_run_trained_is_not_a_matter_of_seeds(tmp_path: Path, outcomes: dict, limit: str) -> None:
    # the rule gives no p where every run of every arm failed: its interval (here far from 0) reads noise
    failed = _part("failed", _welch(-0.8, 0.001, 4), "inconclusive")
    failed.update(p=None, numbers={"outcomes": outcomes}, horizon=400)
    _write(tmp_path / "r", [failed, _part("strong", _welch(1.0, 0.01, 4), "supported")])
    rows = {r.part: r for r in readout(catalogue_family(tmp_path), ["r"])}
    row = rows["failed"]
    assert row.limit == limit and row.seeds_needed is None
    assert "no run of either arm trained by step 400" in row.text and "more seeds fail alike" in row.text
    assert ("a longer horizon may let the stalled runs train" in row.text) == (limit == "horizon")
    assert rows["strong"].decided  # a p-value beside it still decides


def test_a_rate_part_with_its_outcomes_listed_is_read_as_usual(tmp_path: Path) -> None:
    listed = _part("rate", _welch(0.3, 0.2, 6), "inconclusive")
    listed.update(p=None, numbers={"outcomes": ["trains", "stalls", "trains"]})
    _write(tmp_path / "r", [listed, _part("strong", _welch(1.0, 0.01, 4), "supported")])
    rows = {r.part: r for r in readout(catalogue_family(tmp_path), ["r"])}
    assert rows["rate"].limit in ("seeds", "cost") and "no run of either arm" not in rows["rate"].text


def test_a_parts_own_p_anchors_the_seeds_it_needs() -> None:
    # a rate's exact p (0.00049 at 12 runs a side) is larger than its interval's normal approximation:
    # scaled from the p, 12 seeds cannot be enough (they did not decide), and the count passes 0.05 / m
    e = {"estimate": 1.0, "lo": 0.735, "hi": 1.0, "n_a": 12, "se": 0.0675, "df": None}
    rule = {"kind": "direction", "ref": 0.5}
    plain, anchored = seeds_needed(e, rule, 196), seeds_needed(e, rule, 196, p=0.00049)
    assert plain == 12 and anchored is not None and anchored > 12
    z = stats.norm.isf(0.00049 / 2)
    assert 2 * stats.norm.sf(z * (anchored / 12) ** 0.5) < 0.05 / 196 <= 2 * stats.norm.sf(z * ((anchored - 1) / 12) ** 0.5)
