"""The claims as docs/theory.md lists them (section 3), written from the catalogue itself.

``theory_tables()`` gives the Markdown between the markers ``<!-- claims-tables:start -->`` and
``<!-- claims-tables:end -->`` of docs/theory.md: the count of claims and parts, then one table
per module of ``claims/catalogue/`` (what each part asserts, its quantity, its rule, the regime
factors that depart at the lab's settings) and the checks of the implementation. A test
compares the page with it, so the page cannot drift from the rules that are registered;
``python -m normlab.claims.tables`` prints it.
"""

from __future__ import annotations

import math
from typing import Any

from normlab.claims.catalogue import MODULES, defined
from normlab.claims.claim import Claim
from normlab.claims.regime import Regime

START, END = "<!-- claims-tables:start -->", "<!-- claims-tables:end -->"
TITLES = {
    "quick": "At initialisation, on the probe's grid",
    "quick_beyond_grid": "At initialisation, beyond the probe's grid",
    "training_warmup": "Warm-up, lr and init at 6 blocks",
    "training_depth": "Depth",
    "training_frontier": "Critical learning rates",
    "training_long": "Where training ends",
    "training": "Training runs of the seed's pet project",
    "training_statistics": "Statistics logged in training",
    "training_new_methods": "The placements and norms of 2021-2026",
    "quick_seeds": "At initialisation, seed statements that were only checks",
    "training_seeds": "Seed statements on dropout, depth, no norm, attention and warm-up",
    "training_transfer": "Whether a critical lr transfers across width, depth and optimiser",
    "training_monitors": "Warm-up's sharpness and attention entropy, read in training",
}
# What a module's table needs said beside its rows (the experiments, where they differ per claim).
NOTES = {
    "quick_beyond_grid": "Each claim has its own small experiment (the probe's models with a Jacobian probe for "
                         "`jacobian-identity`, one Rademacher vector per block, and for `seed004-decay`, the LayerNorm "
                         "Jacobians alone pushed forward by jvp at L = 32; one Adam step at lr 1e-4 on probe-sized "
                         "models, of the blocks' parameters alone for `liu-amplification` and of every parameter for "
                         "`deepnorm-bounded`; a forward pass of Post-LN models at GPT-2's init for `seed001-ln-amplifies`; "
                         "a scaled input for `seed001-rms`; "
                         "random 3-layer `transformers` GPT-2 models for `seed002-gpt2`; the seed's block code for "
                         "`seed002-code-causal`), listed in claims.json.",
    "training_depth": "Every depth part is a contrast against the 6-block control (2b).",
    "training_new_methods": "Experiment: study 'new-methods' (`study/new_methods_preset.py`): post, pre, hybridnorm, "
                            "hybridnorm_star, normformer, subln, sandwich with `embed_norm` (Peri-LN), pre + derf, "
                            "pre + seednorm and keel + rmsnorm at the stability map's deep cell, where Post-LN stalls "
                            "at 200 steps and Pre-LN trains: 18 blocks, d=64, xavier, lr 1e-3 constant after warm-up "
                            "50, unclipped, 200 steps, 5 seeds, in-training diagnostics every 20 steps; 50 runs at "
                            "cpu. One claim per method, quoted from its paper's abstract. Where the paper says "
                            "\"outperforms\" the claim has two parts, `not-worse` (at or below Pre-LN within the "
                            "0.05-nat margin) and `lower` (strictly below), so it is supported only where the method "
                            "is strictly better; Derf's claim has `not-worse` only (its abstract leaves language out). "
                            "`hybridnorm_star` is an arm without a claim (no retrievable statement of its own).",
    "training_frontier": "Each part is a difference of log10 critical lrs with its 95% interval, read at the map's "
                         "long horizon (step 400, stalled runs resumed to it); a censored side decides alone (2b, "
                         "critical learning rates).",
}


def _head(quick: bool) -> str:
    return (f"| claim (source; studies) | part: what it asserts | quantity | rule | departs ({'init' if quick else 'cpu'}) |"
            "\n|---|---|---|---|---|")


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _num(v: float) -> str:
    return "ln 2" if math.isclose(v, math.log(2)) else f"{v:g}"


def rule_text(spec: dict[str, Any]) -> str:
    """'> r', '< r', 'in [lo, hi]' or 'outside [lo, hi]'."""
    if spec["kind"] == "direction":
        return f"{'>' if spec['sign'] > 0 else '<'} {_num(spec['ref'])}"
    return f"{'in' if spec['kind'] == 'within' else 'outside'} [{_num(spec['lo'])}, {_num(spec['hi'])}]"


def _departs(c: Claim, part: str) -> str:
    regime = c.regime or Regime(())
    scale = "init" if c.quick else "cpu"
    text = ", ".join(regime.departures(scale, part, kind=c.kind)) or "-"
    if "seed" in c.experiments:  # the seed's own settings: a second scale the claim is decided at
        text += f" (seed scale: {', '.join(regime.departures('seed', part, kind=c.kind)) or 'none'})"
    return text


def _rows(c: Claim) -> list[str]:
    head = f"`{c.id}` ({_md(c.source)}" + (f"; {', '.join(c.studies)}" if c.studies else "") + f"): *{_md(c.statement)}*"
    out = []
    for i, p in enumerate(x for x in c.parts if not x.check):
        first = head if i == 0 else ""
        out.append(f"| {first} | {p.id}: {_md(p.asserts)} | {_md(p.quantity)} | {rule_text(p.rule.spec())} | "
                   f"{_departs(c, p.id)} |")
    return out


def theory_tables() -> str:
    """The Markdown of docs/theory.md's section 3 tables (between the markers, exclusive)."""
    claims = [c for m in MODULES for c in defined(m)]
    parts = sum(1 for c in claims for p in c.parts if not p.check)
    checks = [(c, p) for c in claims for p in c.parts if p.check]
    out = [f"`normlab.claims.claim.CLAIMS` holds {len(claims)} claims in {parts + len(checks)} parts: {parts} parts "
           f"decided as verdicts on their sources and {len(checks)} checks of the implementation (listed apart at "
           "the end)."]
    for m in MODULES:
        mine = defined(m)
        name = m.__name__.rsplit(".", 1)[1]
        out += ["", f"### {TITLES.get(name, name)} (`claims/catalogue/{name}.py`)", ""]
        exps = {c.experiment_at(None if c.quick else "cpu") for c in mine}
        if len(exps) == 1:
            out += [f"Experiment: {_md(exps.pop()).rstrip('.')}.", ""]
        if name in NOTES:
            out += [NOTES[name], ""]
        out.append(_head(mine[0].quick))
        out += [row for c in mine for row in _rows(c)]
    out += ["", "### Checks of the implementation", "",
            "Decided like parts, shown in their own section of the evidence page, never counted among the verdicts "
            "(2b):", "", "| claim | check | quantity | rule | departs |", "|---|---|---|---|---|"]
    out += [f"| `{c.id}` | {p.id}: {_md(p.asserts)} | {_md(p.quantity)} | {rule_text(p.rule.spec())} | "
            f"{_departs(c, p.id)} |" for c, p in checks]
    return "\n".join(out)


def section(page: str, start: str = START, end: str = END, where: str = "docs/theory.md") -> str:
    """The text between the markers ``start`` and ``end`` of ``page`` (``where``; a ValueError
    names a missing marker): the generated part of a page that a test holds to its generator."""
    for mark in (start, end):
        if mark not in page:
            raise ValueError(f"{where}: marker {mark} not found")
    return page.split(start, 1)[1].split(end, 1)[0].strip("\n")


if __name__ == "__main__":
    print(theory_tables())
