"""Every training claim on synthetic stores, in the three outcomes: a world where the statement
holds (every part's rule verdict supported), one where its opposite holds (every part
contradicted), and one of noise around the rule's reference (every part inconclusive); the
scoped verdict is the regime's reading of the rule's. Then the guards of the map contrasts:
arms that all stall, a rate on too few runs, a part outside the source's regime.
5 seeds per cell (6 in 'pre-vs-post', as the presets)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic as S  # noqa: E402
import worlds as WD  # noqa: E402

from normlab.claims import training_statistics  # noqa: E402
from normlab.claims.catalogue import all_claims  # noqa: E402
from normlab.claims.regime import scoped  # noqa: E402

P, W, LR, QK, L = WD.P, WD.W, WD.LR, WD.QK, WD.L
WANT = {"S": "supported", "C": "contradicted", "I": "inconclusive"}


def zloss_logz(o: str) -> list:
    def run(head: float, tail: Any) -> Any:
        return lambda s: {**S.gain_run(-1.5), "diag": [{"step": 0, "log_z": head}] * 4
                          + [{"step": 40, "log_z": tail(s)}] * 4}

    if o == "S":
        return [("zloss", {"optim.z_loss": 0.0}, run(4.0, lambda s: 6.0)),
                ("zloss", {"optim.z_loss": 1e-4}, run(4.0, lambda s: 0.2 + S.jit(s, 0.01)))]
    if o == "C":
        return [("zloss", {"optim.z_loss": 0.0}, run(0.3, lambda s: 0.3 + S.jit(s, 0.01))),
                ("zloss", {"optim.z_loss": 1e-4}, run(4.0, lambda s: 3.0 + S.jit(s, 0.01)))]
    return [("zloss", {"optim.z_loss": 0.0}, run(1.0, lambda s: 1.5 + S.jit(s, 0.5))),
            ("zloss", {"optim.z_loss": 1e-4}, run(1.0, lambda s: 1.0 + S.jit(s, 0.5)))]


def lr_sensitivity(o: str) -> list:
    steep, flat = [2.0, 1.8, 2.5, 4.17, 4.17], [2.0, 1.8, 1.9, 2.0, 2.1]
    lrs = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    loss = {"S": (steep, flat), "C": (flat, steep), "I": (flat, flat)}[o]
    logit = {"S": ((2.0, 20.0), (2.0, 2.1)), "C": ((20.0, 2.0), (2.0, 20.0)), "I": ((2.0, 2.0), (2.0, 2.0))}[o]
    sig = 0.5 if o == "I" else 0.01
    cells = []
    for (qk, curve), (a, b) in zip(((None, loss[0]), ("layernorm", loss[1])), logit):
        for lr, v in zip(lrs, curve):
            def run(s: int, v: float = v, a: float = a, b: float = b, lr: float = lr) -> dict:
                d = S.diag_lines({"attn_max_logit": [a, a]}, {"attn_max_logit": [b * (1 + S.jit(s, sig))] * 2})
                return {"best": v, "final": v + (S.jit(s, sig) if o == "I" else 0.0), **({"diag": d} if lr == 1e-2 else {})}
            cells.append(("lr-sensitivity", {P: "pre", QK: qk, LR: lr}, run))
    return cells


def pre_collapse(o: str) -> list:
    sh, dp = {"S": (0.3, 0.05), "C": (0.05, 0.3), "I": (0.2, 0.2)}[o]
    other = {"S": 0.3, "C": 0.02, "I": 0.2}[o]
    dele = {"S": -0.5, "C": 0.5, "I": 0.0}[o]
    lns_dele = {"S": 0.5, "C": -0.5, "I": 0.0}[o]  # the lns part compares deletions, lns minus pre
    sig = 0.1 if o == "I" else 0.001

    def run(angle: Any, aux: Any = None, dl: float | None = None) -> Any:
        def f(s: int) -> dict:
            last = {"angle": angle(s), **({"angle_aux": aux(s)} if aux else {})}
            return {**S.gain_run(-1.5), "diag": S.diag_lines(last, last),
                    **({"deletion": dl + S.jit(s, 4 * sig)} if dl is not None else {})}
        return f

    def profile(a: float, b: float) -> Any:
        return lambda s: [a + S.jit(s, sig)] * 4 + [b + S.jit(s, sig)] * 4

    flat = profile(other, other)
    return [("collapse", {P: "pre"}, run(profile(sh, dp), dl=dele)),
            ("collapse", {P: "resi_dual"}, run(flat, flat)), ("collapse", {P: "lns"}, run(flat, dl=lns_dele))]


def sandwich_max_abs(o: str) -> list:
    ends = {"S": ((5.0, 6.0), (5.0, 500.0)), "C": ((5.0, 500.0), (5.0, 6.0)), "I": ((5.0, 50.0), (5.0, 50.0))}[o]
    sig = 0.8 if o == "I" else 0.001

    def run(first: float, last: float) -> Any:
        return lambda s: {**S.gain_run(-1.5), "diag": S.diag_lines({"max_abs": [first] * 3},
                                                                      {"max_abs": [last * (1 + S.jit(s, sig))] * 3})}

    return [("collapse", {P: "sandwich"}, run(*ends[0])), ("collapse", {P: "pre"}, run(*ends[1]))]


def seed004_lr_sensitive(o: str) -> list:
    """Per-seed sweeps of final losses; the jitter moves with the lr so the sensitivity varies by seed."""
    steep, flat = [2.0, 1.8, 2.5, 4.17, 4.17], [2.0, 1.8, 1.9, 2.0, 2.1]
    curves = {"S": (steep, flat), "C": (flat, steep), "I": (flat, flat)}[o]
    sig = 0.5 if o == "I" else 0.01
    out = []
    for p, curve in zip(("post", "pre"), curves):
        for i, (lr, v) in enumerate(zip([3e-4, 1e-3, 3e-3, 1e-2, 3e-2], curve)):
            out.append(("lr-sensitivity", {P: p, QK: None, LR: lr},
                        lambda s, v=v, i=i: {"best": v, "final": v + S.jit((s + i) % 5, sig)}))
    return out


WORLDS = {
    "warmup-post": WD.warmup_post, "warmup-pre-not-universal": WD.warmup_pre_not_universal,
    "seed002-post-shallow": WD.seed002_post_shallow, "seed002-shorter-warmup": WD.seed002_shorter_warmup,
    "seed004-warmup-lr": WD.seed004_warmup_lr, "seed002-init-sensitive": WD.seed002_init_sensitive,
    "liu-post-converged": WD.liu_post_converged, "seed004-depth": WD.seed004_depth,
    "deepnorm-depth": lambda o: WD.depth_fix(o, "deepnorm", 5e-4),
    "admin-depth": lambda o: WD.depth_fix(o, "admin", 1e-3),
    "seed002-sandwich-deep": WD.seed002_sandwich_deep, "seed000-final-norm": WD.seed000_final_norm,
    "seed002-pet-project": WD.seed002_pet_project, "seed002-clipping": WD.seed002_clipping,
    "seed001-early-gradients": WD.seed001_early_gradients, "seed002-higher-lr": WD.seed002_higher_lr,
    "zloss-logz": zloss_logz, "lr-sensitivity": lr_sensitivity, "seed004-lr-sensitive": seed004_lr_sensitive,
    "pre-collapse": pre_collapse, "sandwich-max-abs": sandwich_max_abs,
}


def decide(cid: str, cells: list, root: Path, **kw: Any) -> dict[str, Any]:
    return all_claims().get(cid).decide(S.FakeContext(root, cells, **kw))


def test_every_training_claim_has_a_synthetic_world() -> None:
    assert sorted(WORLDS) == sorted(c.id for _, c in all_claims().items() if not c.quick)


@pytest.mark.parametrize("outcome", ["S", "C", "I"])
@pytest.mark.parametrize("cid", sorted(WORLDS))
def test_training_claim_outcomes(cid: str, outcome: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training_statistics, "_deletion", S.deletion_from_file)
    rec = decide(cid, WORLDS[cid](outcome), tmp_path)
    got = {p["id"]: p["rule_verdict"] for p in rec["parts"]}
    assert set(got.values()) == {WANT[outcome]}, {p["id"]: (p["rule_verdict"], p["effect_text"], p["note"])
                                                 for p in rec["parts"]}
    assert rec["rule_verdict"] == WANT[outcome]
    # the scoped verdicts are the regime's reading of the rule's, for the claim and each part
    assert rec["verdict"] == scoped(rec["rule_verdict"], rec["departures"])
    for p in rec["parts"]:
        assert p["verdict"] == scoped(p["rule_verdict"], p["departures"]), p["id"]
        e = p["effect"]
        assert e["n_a"] >= 3 and (e["n_b"] is None or e["n_b"] >= 3) and p["trials"]


def _plateau(p: str, lr: float, w: int, best: float) -> tuple:
    return ("stability-map", WD.m(p, lr, 6, w), S.best_run(best, 0.002))


def test_an_interaction_whose_arms_all_stall_is_inconclusive(tmp_path: Path) -> None:
    """Every run of the four cells on the unigram plateau: a tiny spread makes the interval
    exclude 0, but stalled models differ by noise, so the part is inconclusive, and says why."""
    cells = [_plateau("post", 1e-3, 0, 3.40), _plateau("post", 1e-3, 50, 3.36), _plateau("pre", 1e-3, 0, 3.36),
             _plateau("pre", 1e-3, 50, 3.36)]
    part = decide("seed002-shorter-warmup", cells, tmp_path)["parts"][0]
    assert part["effect"]["lo"] > 0  # the interval alone would say supported
    assert part["rule_verdict"] == "inconclusive" and part["p"] is None
    assert "every run of every arm failed to train (20 stalled on the unigram plateau, 0 diverged)" in part["note"]
    assert part["numbers"]["outcomes"]["a1"] == {"trains": 0, "stalls": 5, "diverged": 0}


def test_a_difference_of_two_stalled_cells_is_inconclusive(tmp_path: Path) -> None:
    cells = [_plateau("pre", 3e-3, 0, 3.40), _plateau("pre", 3e-3, 50, 3.36)]
    rec = decide("warmup-pre-not-universal", cells, tmp_path)
    part = rec["parts"][0]
    assert part["effect"]["lo"] > 0 and part["rule_verdict"] == "inconclusive" == rec["rule_verdict"]
    assert "10 stalled on the unigram plateau" in part["note"]
    # one arm that trains is enough for the contrast to count
    cells[1] = _plateau("pre", 3e-3, 50, WD.T)
    assert decide("warmup-pre-not-universal", cells, tmp_path / "one")["parts"][0]["rule_verdict"] == "supported"


def test_four_of_four_failing_post_runs_do_not_show_most_likely(tmp_path: Path) -> None:
    """'most likely does not converge' = more than half the runs, by the exact interval: 4 of 4
    failing has a lower bound of 0.40, so the part stays inconclusive at n = 4."""
    cells = WD.seed002_pet_project("S", post_fails=(True,) * 4)
    rec = decide("seed002-pet-project", cells, tmp_path, seeds={"pre-vs-post": 4})
    part = next(p for p in rec["parts"] if p["id"] == "post-fails")
    assert part["effect"]["n_a"] == 4 and part["effect"]["estimate"] == 1.0
    assert part["effect"]["method"] == "clopper-pearson" and round(part["effect"]["lo"], 3) == 0.398
    assert part["rule_verdict"] == "inconclusive"


def test_six_of_six_failing_post_runs_show_most_likely(tmp_path: Path) -> None:
    rec = decide("seed002-pet-project", WD.seed002_pet_project("S"), tmp_path)
    assert next(p for p in rec["parts"] if p["id"] == "post-fails")["rule_verdict"] == "supported"


def test_a_part_outside_the_regime_does_not_scope_the_claim(tmp_path: Path) -> None:
    """warmup-post's gpt2 arm departs from the source's init by design: its own verdict is
    scoped, the claim's rests on the in-regime parts and is stated as the rule's."""
    cells = [c for c in WD.warmup_post("S") if c[0] == "stability-map"]
    cells += [c for c in WD.warmup_post("C") if c[0] == "recipe-variants"]
    rec = decide("warmup-post", cells, tmp_path)
    parts = {p["id"]: p for p in rec["parts"]}
    gpt2 = parts.pop("post-1e-3-gpt2")
    assert gpt2["departures"] == ["init"] and gpt2["rule_verdict"] == "contradicted"
    assert gpt2["verdict"] == "not seen at the lab's settings"
    assert all(not p["departures"] and p["verdict"] == "supported" for p in parts.values())
    assert rec["departures"] == [] and rec["rule_verdict"] == rec["verdict"] == "supported"


def test_resi_dual_parts_read_their_own_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """x stream moving, d stream collapsed: the two ResiDual parts must disagree."""
    monkeypatch.setattr(training_statistics, "_deletion", S.deletion_from_file)
    cells = [c for c in pre_collapse("S") if c[1][P] != "resi_dual"]

    def resi(s: int) -> dict:
        last = {"angle": [0.3] * 8, "angle_aux": [0.01 + S.jit(s, 0.001)] * 8}
        return {**S.gain_run(-1.5), "diag": S.diag_lines(last, last)}

    rec = decide("pre-collapse", cells + [("collapse", {P: "resi_dual"}, resi)], tmp_path)
    got = {p["id"]: p["rule_verdict"] for p in rec["parts"]}
    assert got["resi_dual-x"] == "supported" and got["resi_dual-d"] == "contradicted"
    assert rec["rule_verdict"] == "partly supported"
