"""The seed claims of ``claims/catalogue/quick_seeds.py`` and ``training_seeds.py`` beyond their
synthetic training worlds (worlds_seeds.py): the claim at init decided on synthetic probe rows in
the three outcomes, and every part's design (``claims/design_seeds.py``): decidable at the planned
seeds, with the detectable effect its ``why`` quotes."""

from __future__ import annotations

import pytest

from normlab.claims.claim import CLAIMS
from normlab.claims.design_seeds import designs
from normlab.claims.measure import QuickData

JITTER = (-1.0, 1.0, -0.5, 0.5, 0.0)  # mean 0 over the 5 seeds


def _quick(pre: float, post: float, sigma: float) -> QuickData:
    """Probe rows of the block cosine at L = 16: every block of a seed at the arm's value plus the
    seed's jitter (Post-LN's jitter mirrored, so that a paired difference varies by seed)."""
    rows = [{"placement": p, "n_layer": 16, "metric": "cos", "sublayer": "block", "param": "all", "layer": layer,
             "seed": s, "value": v + sign * JITTER[s] * sigma}
            for p, v, sign in (("pre", pre, 1), ("post", post, -1)) for s in range(5) for layer in range(1, 17)]
    return QuickData(rows, 5, {"depths": [16]})


@pytest.mark.parametrize(("pre", "post", "sigma", "want"), [
    (0.95, 0.6, 0.001, "supported"), (0.7, 0.9, 0.001, "contradicted"), (0.894, 0.894, 0.05, "inconclusive")])
def test_pre_identity_in_three_worlds(pre: float, post: float, sigma: float, want: str) -> None:
    rec = CLAIMS.get("seed001-pre-identity").decide(_quick(pre, post, sigma))
    assert {p["id"]: p["rule_verdict"] for p in rec["parts"]} == {"near": want, "every-block": want, "vs-post": want}


def test_the_first_block_alone_can_fail_every_block() -> None:
    """A first block far from the identity fails 'every-block' while the mean over blocks passes."""
    q = _quick(0.95, 0.6, 0.001)
    for r in q.rows:
        if r["placement"] == "pre" and r["layer"] == 1:
            r["value"] = 0.78
    got = {p["id"]: p["rule_verdict"] for p in CLAIMS.get("seed001-pre-identity").decide(q)["parts"]}
    assert got == {"near": "supported", "every-block": "contradicted", "vs-post": "supported"}


def test_every_seed_part_has_a_design_that_decides_and_quotes_it() -> None:
    got = designs()
    parts = {f"{c}/{p.id}": p for c in ("seed002-dropout", "seed002-any-depth", "seed002-deep-output-norm",
                                        "seed002-layernorm", "seed002-attention-focus", "seed001-pre-no-warmup",
                                        "seed001-pre-identity") for p in CLAIMS.get(c).parts}
    assert sorted(got) == sorted(parts)  # one design per part, no more
    for key, d in got.items():
        assert d.decidable, d.text()
        assert d.rule.spec() == parts[key].rule.spec(), key  # the design applies the part's own rule
        assert d.detectable is not None and f"{abs(d.detectable):.3g}" in parts[key].why, (key, d.text())
