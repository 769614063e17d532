"""Design analyses at the level the catalogue asks (claims/design.py's ``at_level``): the rules'
own 0.05 unchanged, a stricter level checked against an independent simulation (a t test) and
an exact binomial computation, the level recorded in the registration and read from the plan,
and bad levels named."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from normlab.claims.design import LEVEL, at_level, level, mean_design, rate_design
from normlab.claims.rules import Direction
from normlab.core.errors import ConfigError
from normlab.stats.effects import rate, rate_p

UP = Direction(+1, 0.0)
STRICT = 2.5e-4  # 0.05 / 200: the catalogue's strictest Holm step


def test_the_rules_own_level_is_the_default_and_changes_nothing() -> None:
    plain = mean_design("p", UP, 4, 1.0, 4, 1.0, effect=2.0)
    with at_level(LEVEL):
        same = mean_design("p", UP, 4, 1.0, 4, 1.0, effect=2.0)
    assert (plain.detectable, plain.power, plain.record()) == (same.detectable, same.power, same.record())
    assert "level" not in plain.record() and level() == LEVEL


def test_a_stricter_level_asks_a_larger_effect_and_says_so() -> None:
    with at_level(STRICT):
        strict = mean_design("p", UP, 6, 1.0, effect=2.0)
        assert level() == STRICT
    assert level() == LEVEL  # restored on leaving
    loose = mean_design("p", UP, 6, 1.0, effect=2.0)
    assert strict.detectable is not None and loose.detectable is not None
    assert strict.detectable > 2 * loose.detectable and strict.power is not None and strict.power < loose.power
    assert strict.record()["level"] == STRICT and "at level 0.00025 with 80% power" in strict.text()
    # an independent check: at the detectable effect a one-sample t test at that level rejects ~80%
    rng = np.random.default_rng(11)
    x = rng.normal(strict.detectable, 1.0, size=(4000, 6))
    t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(6))
    assert float(np.mean((2 * stats.t.sf(np.abs(t), 5) < STRICT) & (t > 0))) == pytest.approx(0.8, abs=0.04)


def test_a_rate_design_at_a_level_counts_the_tables_whose_exact_p_is_below_it() -> None:
    rule = Direction(+1, 0.5)
    with at_level(STRICT):
        d = rate_design("r", rule, 20)
    assert d.detectable is not None and d.level == STRICT
    # by hand: the counts k of 20 whose verdict is supported and exact p below the level
    ok = [k for k in range(21) if rule.verdict(rate(k, 20)) == "supported" and rate_p(rate(k, 20), 0.5) < STRICT]
    power = float(stats.binom.sf(min(ok) - 1, 20, d.detectable))
    assert power >= 0.8 and float(stats.binom.sf(min(ok) - 1, 20, d.detectable - 0.01)) < 0.8
    assert rate_design("r", rule, 20).detectable < d.detectable


@pytest.mark.parametrize("bad", [0, 0.1, -1e-3, "tiny"])
def test_a_bad_level_names_the_option(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"design_level=.*a level in \(0, 0.05\]"):
        with at_level(bad):  # type: ignore[arg-type]
            pass


def test_the_registration_records_the_level(monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.claims import registration_doc
    from normlab.claims.claim import CLAIMS

    seen: list[float] = []

    def designs(c: object, scale: str) -> dict:
        seen.append(level())
        return {}
    monkeypatch.setattr(registration_doc, "designs", designs)
    doc = registration_doc.document([CLAIMS.get("xiong-thm1")], "cpu", design_level=STRICT)
    assert seen == [STRICT] and doc["design_level"] == STRICT and level() == LEVEL
    assert "design_level" not in registration_doc.document([CLAIMS.get("xiong-thm1")], "cpu")


def test_the_plan_reads_and_checks_its_design_level(tmp_path: Path) -> None:
    from normlab.claims.campaign_plan import load_plan

    plan = ('name = "c"\nscale = "cpu"\nfirst_seed = 9000\ndesign_level = 2.5e-4\n[[stage]]\nname = "s"\n'
            'registration = "r.json"\nclaims = ["xiong-thm1"]\n')
    (tmp_path / "plan.toml").write_text(plan)
    assert load_plan(tmp_path / "plan.toml").design_level == STRICT
    (tmp_path / "plan.toml").write_text(plan.replace("2.5e-4", "0.2"))
    with pytest.raises(ConfigError, match=r"plan\.design_level=0\.2: a level in \(0, 0\.05\]"):
        load_plan(tmp_path / "plan.toml")


def test_the_transfer_and_seed_designs_ask_the_level_too() -> None:
    from normlab.claims.claim import CLAIMS
    from normlab.claims.design_seeds import claim_design
    from normlab.claims.design_transfer import split_design

    loose = split_design("s", Direction(-1, 0.0), 16, 0.5, 0.3)
    with at_level(STRICT):
        strict = split_design("s", Direction(-1, 0.0), 16, 0.5, 0.3)
        seeds_strict = claim_design(CLAIMS.get("seed002-attention-focus"), "cpu")
    assert loose.detectable is not None and strict.detectable is not None and strict.detectable < loose.detectable < 0
    assert strict.level == STRICT and loose.level == LEVEL
    seeds_loose = claim_design(CLAIMS.get("seed002-attention-focus"), "cpu")  # cached per level, not shared
    assert {d.level for d in seeds_strict.values()} == {STRICT} and {d.level for d in seeds_loose.values()} == {LEVEL}


def test_a_registration_with_a_seed_count_plans_it_in_every_design_that_counts_its_seeds() -> None:
    """A group-sequential stage registers its largest look's seeds: the designs of the seen-data,
    frontier and transfer analyses plan that many (they count the planned study's seeds), the
    seed claims' stated designs give way to their seen runs' (a stated count cannot be re-planned),
    and outside the registration nothing changed."""
    from normlab.claims.claim import CLAIMS
    from normlab.claims.design import at_seeds, planned_seeds
    from normlab.claims.registration import designs, study_spec

    warm = CLAIMS.get("warmup-post")
    four = designs(warm, "cpu")["post-1e-3"]
    with at_seeds(8):
        assert len(study_spec("stability-map", "cpu").seeds) == 8 and planned_seeds() == 8
        assert len(study_spec("stability-map", "cpu", seeds=[1, 2]).seeds) == 2  # named seeds win
        eight = designs(warm, "cpu")["post-1e-3"]
        stated = designs(CLAIMS.get("seed002-dropout"), "cpu")  # re-planned from its seen runs
    outside = designs(CLAIMS.get("seed002-dropout"), "cpu")
    assert stated["not-spikier"].plan.startswith("8 seeds against 8 (seen ")
    assert outside["not-spikier"].plan.startswith("12 seeds against 12") and "seen" not in outside["not-spikier"].plan
    assert four.plan.startswith("4 seeds against 4") and eight.plan.startswith("8 seeds against 8")
    assert eight.detectable is not None and four.detectable is not None and eight.detectable < four.detectable
    assert planned_seeds() is None and designs(warm, "cpu")["post-1e-3"].plan == four.plan
    with pytest.raises(ConfigError, match="seeds=1"):
        with at_seeds(1):
            pass


def test_a_design_gives_the_chance_of_a_decisive_verdict_either_way() -> None:
    """``decides``: supported or contradicted at the expected effect. An effect far on the
    contradicting side has no power for "supported" and decides almost surely; one on the
    boundary almost never decides; a rate the same, exactly."""
    far_wrong = mean_design("m", UP, 8, 1.0, 8, 1.0, effect=-5.0)
    on_edge = mean_design("m", UP, 8, 1.0, 8, 1.0, effect=0.0)
    assert far_wrong.power is not None and far_wrong.power < 0.01 and far_wrong.decides is not None
    assert far_wrong.decides > 0.99 and "a decisive verdict either way" in far_wrong.text()
    assert on_edge.decides is not None and on_edge.decides < 0.1 and far_wrong.record()["decides"] == far_wrong.decides
    with at_level(STRICT):
        strict = mean_design("m", UP, 8, 1.0, 8, 1.0, effect=-2.0)
    assert strict.decides is not None and strict.decides < mean_design("m", UP, 8, 1.0, 8, 1.0, effect=-2.0).decides
    # a rate of 10 runs against the reference 0.5, truth 0: contradicted needs 0 of 10 at 0.05
    # (exact interval below 0.5), which happens with certainty at a true rate of 0
    r = rate_design("r", Direction(+1, 0.5), 10, effect=0.0)
    assert r.decides == pytest.approx(1.0) and r.power == pytest.approx(0.0)
    assert mean_design("m", UP, 8, 1.0).decides is None  # no expected effect: nothing to say


def test_stages_that_start_before_the_presets_horizon_shorten_it_and_later_ones_refuse() -> None:
    """deep-pre's preset stops at 400 steps; staged [200, 400] every run stops first at 200 (and is
    resumed to 400), the rest of its config unchanged; a first stage past the preset's horizon is
    refused, naming the field."""
    import json

    from normlab.claims.registration import study_spec

    plain = {t.params["seed"]: json.loads(t.config_json) for t in study_spec("deep-pre", "cpu").trials()}
    staged = study_spec("deep-pre", "cpu", stages=[200, 400])
    got = [json.loads(t.config_json) for t in staged.trials()]
    assert plain and {c["train"]["steps"] for c in plain.values()} == {400}
    assert {c["train"]["steps"] for c in got} == {200} and staged.stages == [200, 400]
    same = {k: v for k, v in got[0]["train"].items() if k != "steps"}
    first = json.loads(study_spec("deep-pre", "cpu").trials()[0].config_json)["train"]
    assert same == {k: v for k, v in first.items() if k != "steps"}
    assert study_spec("deep-pre", "cpu").base["train"]["steps"] == 400  # the preset itself untouched
    with pytest.raises(ConfigError, match=r"stages=\[500, 1000\].*must be train\.steps=400 \(in the trial with model\.n_layer=48"):
        study_spec("deep-pre", "cpu", stages=[500, 1000]).trials()
