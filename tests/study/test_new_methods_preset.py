"""The study preset ``new-methods``: its size is the one its docstring and docs/studies.md state,
its Post-LN and Pre-LN arms are the stability map's deep cell (only the diagnostics differ), and
every arm builds the model it names."""

from __future__ import annotations

import json
from typing import Any

from normlab.model.build import build_model
from normlab.run.resolve import RunConfig
from normlab.study.new_methods_preset import ARMS, PERI_LN
from normlab.study.presets import study_preset


def flat(d: dict[str, Any], pre: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(flat(v, pre + k + ".") if isinstance(v, dict) and k != "placement" else {pre + k: v})
    return out


def test_cpu_size_and_cell() -> None:
    spec = study_preset("new-methods")
    trials = spec.trials()
    assert len(trials) == 50 == len(ARMS) * 5 and spec.seeds == [0, 1, 2, 3, 4]  # the docstring's count
    arms = {(json.dumps(t.params["model.placement"], sort_keys=True), t.params["model.norm"]) for t in trials}
    assert len(arms) == 10 and (json.dumps(PERI_LN, sort_keys=True), "layernorm") in arms and ('"keel"', "rmsnorm") in arms
    assert {("\"pre\"", "derf"), ("\"pre\"", "seednorm")} <= arms
    for t in trials:
        c = flat(json.loads(t.config_json))
        assert (c["model.n_layer"], c["optim.lr"], c["optim.warmup_steps"], c["train.steps"]) == (18, 1e-3, 50, 200)
        assert (c["model.init"], c["optim.grad_clip"], c["optim.schedule"], c["train.diag_every"]) == \
            ("xavier", 0.0, "constant", 20)


def test_post_and_pre_are_the_map_cell_with_diagnostics() -> None:
    """Post-LN and Pre-LN are the stability map's trials of the same cell and seed but for the
    diagnostics, so the map's outcomes there (Post-LN stalls, Pre-LN trains) are this setting's."""
    grid = {(t.params["model.placement"], t.params["optim.lr"], t.params["model.n_layer"],
             t.params["optim.warmup_steps"], t.params["seed"]): flat(json.loads(t.config_json))
            for t in study_preset("stability-map").trials()}
    twins = 0
    for t in study_preset("new-methods").trials():
        p = t.params["model.placement"]
        if p not in ("post", "pre") or t.params["model.norm"] != "layernorm":
            continue
        twin = grid.get((p, 1e-3, 18, 50, t.params["seed"]))
        if twin is None:  # a seed the map does not run
            continue
        c = flat(json.loads(t.config_json))
        assert {k for k in c if c[k] != twin.get(k)} == {"train.diag_every"}
        twins += 1
    assert twins >= 2 * 4


def test_every_arm_builds_at_smoke_scale() -> None:
    spec = study_preset("new-methods", "smoke")
    assert len(spec.trials()) == len(ARMS) * 2
    for t in spec.trials()[: len(ARMS)]:
        model = build_model(RunConfig.from_dict(json.loads(t.config_json)).model)
        assert sum(p.numel() for p in model.parameters()) > 0, t.params
