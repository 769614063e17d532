"""pre-vs-post's third arm, transformers' GPT-2: its place in the grid (the lab arms' trial ids
are those of the two-arm study), end-to-end training at smoke scale, and its page."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from normlab.study.presets import study_preset

pytest.importorskip("transformers")

# The lab arms' trial ids of the two-arm study (placement x warm-up at smoke scale, seed 0): the
# baseline arm must not move them. Recomputed when the default GELU became the exact one (issue
# 42: every config now writes model.activation, and the model is another); with the tanh GELU,
# before the baseline arm existed, they were post/0 1c06621d9ed712fb, pre/0 fc4bbf55e00b7f6c,
# post/5 7ee64e4ad78a4898, pre/5 ad3fd42386cae8fa.
TWO_ARM_IDS = {("post", 0): "44f8c677bd089f02", ("pre", 0): "25c985dee8eaf9db",
               ("post", 5): "71b3dc052360b14a", ("pre", 5): "fe885d3325b38e1a"}


def _arm(params: dict) -> tuple:
    return params["model.placement"], params["model.impl"], params["optim.warmup_steps"]


def test_the_arms_and_the_lab_arms_ids_are_unchanged() -> None:
    for scale in ("smoke", "cpu", "seed"):
        spec = study_preset("pre-vs-post", scale)
        arms = {_arm(t.params): t.params["train.diag_every"] for t in spec.trials()}
        warm = max(w for _, _, w in arms)
        if scale == "seed":  # sized to one session: the lab arms without warm-up, what seed002-pet-project reads
            assert set(arms) == {("post", "normlab", 0), ("pre", "normlab", 0)} and all(arms.values())
            continue
        assert set(arms) == {(p, i, w) for p, i in [("post", "normlab"), ("pre", "normlab"), ("pre", "hf-gpt2")]
                             for w in (0, warm)}
        assert all((d == 0) == (i == "hf-gpt2") for (_, i, _), d in arms.items())  # baseline: no diagnostics
    ids = {(t.params["model.placement"], t.params["optim.warmup_steps"]): t.id
           for t in study_preset("pre-vs-post", "smoke").trials()
           if t.params["seed"] == 0 and t.params["model.impl"] == "normlab"}
    assert ids == TWO_ARM_IDS
    hf = next(t for t in study_preset("pre-vs-post", "smoke").trials() if t.params["model.impl"] == "hf-gpt2")
    assert json.loads(hf.config_json)["model"]["impl"] == "hf-gpt2"  # written where it is not the default


def test_smoke_study_trains_the_baseline_arm_end_to_end(tmp_path, data_dir) -> None:
    from normlab.report.load import load_study
    from normlab.report.study_page import build
    from normlab.run.dir import RunDir
    from normlab.study.runner import run_study

    spec = dataclasses.replace(study_preset("pre-vs-post", "smoke"), seeds=[0])
    store = run_study(spec, tmp_path / "s", workers=1)
    trials = {_arm(t.params): t for t in store.trials()}
    assert {t.status for t in trials.values()} == {"completed"} and len(trials) == 6
    for w in (0, 5):
        hf, pre = trials[("pre", "hf-gpt2", w)], trials[("pre", "normlab", w)]
        assert math.isfinite(hf.summary["best_val_loss"]) and hf.summary["steps"] == 20
        assert hf.summary["params"] == pre.summary["params"]  # matched parameter count
        # same init, same batches: the step-0 validation loss agrees to float32 rounding
        first = [next(r["val/loss"] for r in RunDir(t.run_dir).metrics() if "val/loss" in r) for t in (hf, pre)]
        assert first[0] == pytest.approx(first[1], abs=1e-4)
        assert not (hf.run_dir / "diagnostics.jsonl").exists() and (pre.run_dir / "diagnostics.jsonl").exists()
    model, cfg, _ = RunDir(trials[("pre", "hf-gpt2", 0)].run_dir).load_model("best")
    assert type(model).__name__ == "HFGPT2" and cfg.model.impl == "hf-gpt2"
    page = build(load_study(tmp_path / "s"), out=tmp_path / "page")
    html = page.read_text(encoding="utf-8") if page.is_file() else (page / "index.html").read_text(encoding="utf-8")
    assert "pre hf-gpt2 warmup_steps=0" in html and "Check of the implementation" in html
    assert "lab Pre-LN" in html and "GPT-2 (transformers)" in html
    assert "diag_every" not in html.split("Every trial")[1].split("Configuration")[0]  # labels: no measurement key


def test_implementation_check_is_lab_minus_baseline_with_welch_interval() -> None:
    from normlab.report.baseline import implementation_check, split

    lab, hf = [2.0, 2.1, 2.2], [2.1, 2.1, 2.4]  # means 2.1 and 2.2: lab minus baseline -0.1
    pts = []
    for s, (a, b) in enumerate(zip(lab, hf)):
        common = {"optim.warmup_steps": 0, "seed": s}
        pts += [({**common, "model.placement": "pre", "model.impl": "normlab", "train.diag_every": 10}, (a, "ok")),
                ({**common, "model.placement": "pre", "model.impl": "hf-gpt2", "train.diag_every": 0}, (b, "ok")),
                ({**common, "model.placement": "post", "model.impl": "normlab", "train.diag_every": 10}, (3.0, "ok"))]
    text = implementation_check(pts)
    assert text is not None and text.startswith("Check of the implementation, not a result about normalization")
    # Welch by hand: se = sqrt(0.01/3 + 0.03/3) = 0.11547, df = 0.01333^2 / (0.00333^2/2 + 0.01^2/2) = 3.2,
    # t(0.975, 3.2) = 3.0776..., so -0.1 +- 0.3548
    assert "warm-up 0: lab Pre-LN 2.1 ± 0.10 vs GPT-2 (transformers) 2.2 ± 0.17" in text
    assert "lab minus baseline -0.1 nats/token, 95% Welch interval over seeds [-0.455, 0.255]" in text
    ours, base = split(pts)
    assert len(ours) == 6 and len(base) == 3 and all(set(p) == {"optim.warmup_steps", "seed", "model.placement"}
                                                     for p, _ in ours)
    assert implementation_check([p for p in pts if p[0]["model.impl"] == "normlab"]) is None
