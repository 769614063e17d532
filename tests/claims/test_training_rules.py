"""Every training claim on synthetic stores, in the three outcomes: a world where the statement
holds (every part supported), one where its opposite holds (every part contradicted), and one
of noise around the rule's reference (every part inconclusive). 4 seeds per cell."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synthetic as S  # noqa: E402

from normlab.claims import training_statistics  # noqa: E402
from normlab.claims.catalogue import all_claims  # noqa: E402
from normlab.claims.rules import combine  # noqa: E402

P, W, LR, QK, L = "model.placement", "optim.warmup_steps", "optim.lr", "model.qk_norm", "model.n_layer"
TINY, WIDE = 0.01, 0.5
WANT = {"S": "supported", "C": "contradicted", "I": "inconclusive"}


def g(center: float, sigma: float = TINY) -> Any:
    return lambda s: S.gain_run(center + S.jit(s, sigma))


def pick(o: str, sup: float, con: float, neutral: float) -> tuple[float, float]:
    """(centre, sigma) of a cell: its supported / contradicted value, or noise around neutral."""
    return {"S": (sup, TINY), "C": (con, TINY), "I": (neutral, WIDE)}[o]


def two(o: str, study: str, a: dict, b: dict, sup: tuple[float, float], con: tuple[float, float],
        neutral: float = -1.5) -> list:
    """Cells a and b with gains whose difference a - b follows the outcome."""
    va, vb = {"S": sup, "C": con, "I": (neutral, neutral)}[o]
    sig = WIDE if o == "I" else TINY
    return [(study, a, g(va, sig)), (study, b, g(vb, sig))]


def warmup_post(o: str) -> list:
    c = []
    for lr in (5e-4, 1e-3):
        c += two(o, "xiong-warmup", {P: "post", LR: lr, W: 0}, {P: "post", LR: lr, W: 60}, (-1.0, -1.5), (-1.8, -1.5))
        c += two(o, "xiong-warmup", {P: "pre", LR: lr, W: 0}, {P: "pre", LR: lr, W: 60}, (-1.5, -1.5), (-1.0, -1.5))
    return c


def warmup_pre_not_universal(o: str) -> list:
    return two(o, "xiong-warmup", {P: "pre", LR: 3e-3, W: 0}, {P: "pre", LR: 3e-3, W: 60}, (-1.0, -1.5), (-1.8, -1.5))


def liu_post_converged(o: str) -> list:
    return (two(o, "xiong-warmup", {P: "post", LR: 5e-4, W: 60}, {P: "pre", LR: 5e-4, W: 60}, (-1.5, -1.5),
                (-1.0, -1.5))
            + two(o, "deep-stability", {P: "post", L: 48}, {P: "pre", L: 48}, (-0.1, -1.5), (-2.0, -1.5)))


def seed002_post_shallow(o: str) -> list:
    return two(o, "xiong-warmup", {P: "post", LR: 5e-4, W: 60}, {P: "pre", LR: 5e-4, W: 60}, (-1.52, -1.5),
               (-1.0, -1.5))


def seed002_pet_project(o: str) -> list:
    first = {"S": (2.5, 3.3), "C": (3.3, 2.5), "I": (3.0, 3.0)}[o]
    gains = {"S": (-1.8, -0.3), "C": (-0.3, -1.8), "I": (-1.0, -1.0)}[o]
    sig = WIDE if o == "I" else TINY
    return [("pre-vs-post", {P: p, W: 0}, lambda s, f=f, gg=gg: {**S.gain_run(gg + S.jit(s, sig)),
                                                               "first": f + S.jit(s, sig)})
            for p, f, gg in (("pre", first[0], gains[0]), ("post", first[1], gains[1]))]


def seed002_clipping(o: str) -> list:
    k = {"S": ((0, 0, 0, 0), (12, 13, 11, 12)), "C": ((16, 17, 15, 16), (6, 7, 5, 6)),
         "I": ((1, 5, 2, 4), (1, 5, 2, 4))}[o]  # steps of 20 above the clip, per seed

    def run(counts: tuple[int, ...]) -> Any:
        return lambda s: {**S.gain_run(-1.5), "grad": [1.5] * counts[s] + [0.5] * (20 - counts[s])}

    return [("pre-vs-post", {P: "pre", W: 0}, run(k[0])), ("pre-vs-post", {P: "post", W: 0}, run(k[1]))]


def seed002_higher_lr(o: str) -> list:
    a, b = {"S": (2.0, 3.5), "C": (3.5, 2.0), "I": (3.0, 3.0)}[o]
    sig = WIDE if o == "I" else TINY
    return [("lr-sensitivity", {P: p, QK: None, LR: 1e-2}, lambda s, v=v: {"best": v, "final": v + S.jit(s, sig)})
            for p, v in (("pre", a), ("post", b))]


def deep(o: str, cells: dict[str, tuple[float, float]]) -> list:
    out = []
    for p, (sup, con) in cells.items():
        c, sig = pick(o, sup, con, -1.0)
        out.append(("deep-stability", {P: p, L: 48}, g(c, sig)))
    return out + [("deep-stability", {P: "pre", L: 6}, g(-1.8))]


def zloss_logz(o: str) -> list:
    def run(head: float, tail: Any) -> Any:
        return lambda s: {**S.gain_run(-1.5), "diag": [{"step": 0, "log_z": head}] * 4
                          + [{"step": 40, "log_z": tail(s)}] * 4}

    if o == "S":
        return [("zloss", {"optim.z_loss": 0.0}, run(4.0, lambda s: 6.0)),
                ("zloss", {"optim.z_loss": 1e-4}, run(4.0, lambda s: 0.2 + S.jit(s, TINY)))]
    if o == "C":
        return [("zloss", {"optim.z_loss": 0.0}, run(0.3, lambda s: 0.3 + S.jit(s, TINY))),
                ("zloss", {"optim.z_loss": 1e-4}, run(4.0, lambda s: 3.0 + S.jit(s, TINY)))]
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
            ("collapse", {P: "resi_dual"}, run(flat, flat)), ("collapse", {P: "lns"}, run(flat))]


def sandwich_max_abs(o: str) -> list:
    ends = {"S": ((5.0, 6.0), (5.0, 500.0)), "C": ((5.0, 500.0), (5.0, 6.0)), "I": ((5.0, 50.0), (5.0, 50.0))}[o]
    sig = 0.8 if o == "I" else 0.001

    def run(first: float, last: float) -> Any:
        return lambda s: {**S.gain_run(-1.5), "diag": S.diag_lines({"max_abs": [first] * 3},
                                                                      {"max_abs": [last * (1 + S.jit(s, sig))] * 3})}

    return [("collapse", {P: "sandwich"}, run(*ends[0])), ("collapse", {P: "pre"}, run(*ends[1]))]


WORLDS = {
    "warmup-post": warmup_post, "warmup-pre-not-universal": warmup_pre_not_universal,
    "liu-post-converged": liu_post_converged, "seed002-post-shallow": seed002_post_shallow,
    "seed002-pet-project": seed002_pet_project, "seed002-clipping": seed002_clipping,
    "seed002-higher-lr": seed002_higher_lr,
    "deepnorm-depth": lambda o: deep(o, {"deepnorm": (-1.8, -0.2), "post": (-0.2, -1.8)}),
    "admin-depth": lambda o: deep(o, {"admin": (-1.8, -0.2), "post": (-0.2, -1.8)}),
    "seed002-sandwich-deep": lambda o: deep(o, {"pre_post": (-1.8, -1.0), "sandwich": (-1.8, -1.0),
                                                "pre": (-1.0, -1.8)}),
    "zloss-logz": zloss_logz, "lr-sensitivity": lr_sensitivity, "pre-collapse": pre_collapse,
    "sandwich-max-abs": sandwich_max_abs,
}


def test_every_training_claim_has_a_synthetic_world() -> None:
    assert sorted(WORLDS) == sorted(c.id for _, c in all_claims().items() if not c.quick)


# Rate parts no world of 4 seeds can decide: "more than half of 4 runs" needs an exact interval
# away from 1/2, and 4 of 4 gives [0.398, 1], 0 of 4 [0, 0.602] (p = 0.125 either way)
UNDECIDABLE_AT_4 = {"seed002-pet-project": ("post-fails",)}


@pytest.mark.parametrize("outcome", ["S", "C", "I"])
@pytest.mark.parametrize("cid", sorted(WORLDS))
def test_training_claim_outcomes(cid: str, outcome: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training_statistics, "_deletion", S.deletion_from_file)
    claim = all_claims().get(cid)
    rec = claim.decide(S.FakeContext(tmp_path, WORLDS[cid](outcome)))
    got = {p["id"]: p["verdict"] for p in rec["parts"]}
    want = {p: "inconclusive" if p in UNDECIDABLE_AT_4.get(cid, ()) else WANT[outcome] for p in got}
    assert got == want, {p["id"]: (p["verdict"], p["effect_text"]) for p in rec["parts"]}
    assert rec["verdict"] == combine(list(want.values()))
    for p in rec["parts"]:
        e = p["effect"]
        assert e["n_a"] >= 3 and (e["n_b"] is None or e["n_b"] >= 3) and p["trials"]


def test_resi_dual_parts_read_their_own_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """x stream moving, d stream collapsed: the two ResiDual parts must disagree."""
    monkeypatch.setattr(training_statistics, "_deletion", S.deletion_from_file)
    cells = [c for c in pre_collapse("S") if c[1][P] != "resi_dual"]

    def resi(s: int) -> dict:
        last = {"angle": [0.3] * 8, "angle_aux": [0.01 + S.jit(s, 0.001)] * 8}
        return {**S.gain_run(-1.5), "diag": S.diag_lines(last, last)}

    rec = all_claims().get("pre-collapse").decide(S.FakeContext(tmp_path, cells + [("collapse", {P: "resi_dual"}, resi)]))
    got = {p["id"]: p["verdict"] for p in rec["parts"]}
    assert got["resi_dual-x"] == "supported" and got["resi_dual-d"] == "contradicted"
    assert rec["verdict"] == "partly supported"
