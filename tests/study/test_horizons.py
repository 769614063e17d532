"""Outcomes at several horizons (normlab.study.horizons) and stalled trials extended by resuming
(normlab.study.extend): each evaluation judged by the lab's one rule, the step a run left the
plateau, horizons that nest (a resumed run is the longer run, step for step), and a study that
extends only its stalled trials, leaving the store's record at the base horizon as it was."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from normlab.core.errors import ConfigError, UserError
from normlab.data.unigram import DataCE
from normlab.study.horizons import horizon_cells, horizons, outcome_at, trajectory
from normlab.study.outcome import classify
from normlab.study.store import TrialRecord

CE = DataCE(unigram=3.35, vocab_size=65)  # edge 3.2, ln V 4.174


def _trial(tmp: Path, name: str, vals: dict[int, float], status: str = "completed", steps: int = 200,
           diverged_at: int | None = None, lr: float = 1e-3) -> TrialRecord:
    d = tmp / name
    d.mkdir(parents=True)
    with (d / "metrics.jsonl").open("w") as fh:
        for s in range(0, max(vals) + 1, 20):
            fh.write(json.dumps({"step": s, "train/loss": 3.0, **({"val/loss": vals[s]} if s in vals else {})}) + "\n")
    finite = [v for v in vals.values() if math.isfinite(v)]
    summary = {"status": status, "steps": steps, "best_val_loss": min(finite) if finite else None,
               "final_val_loss": vals[max(vals)], "diverged_at_step": diverged_at}
    (d / "summary.json").write_text(json.dumps(summary))
    params = {"model.placement": "post", "optim.lr": lr, "model.n_layer": 6, "optim.warmup_steps": 0, "seed": 0}
    return TrialRecord(name, params, status, summary, d, None)


def test_each_evaluation_is_judged_and_the_step_the_plateau_was_left(tmp_path: Path) -> None:
    slow = _trial(tmp_path, "slow", {0: 4.2, 100: 3.34, 200: 3.33, 300: 3.1, 400: 2.5}, steps=400)
    tr = trajectory(slow, CE)
    assert tr is not None and tr.left_at == 300 and tr.last_step == 400
    assert [outcome_at(tr, h) for h in (0, 100, 200, 299, 300, 400, 1000)] == \
        [None, "stalls", "stalls", "stalls", "trains", "trains", "trains"]  # trained by 1000: it left before
    stuck = trajectory(_trial(tmp_path, "stuck", {0: 4.2, 100: 3.34, 200: 3.34}), CE)
    assert stuck is not None and stuck.left_at is None
    assert (outcome_at(stuck, 200), outcome_at(stuck, 400)) == ("stalls", None)  # not run to 400: no outcome
    blew = trajectory(_trial(tmp_path, "blew", {0: 4.2, 100: 3.0, 200: 4.5}), CE)  # last val above ln V
    assert blew is not None and [outcome_at(blew, h) for h in (100, 200)] == ["trains", "diverged"]
    stop = trajectory(_trial(tmp_path, "stop", {0: 4.2, 100: 3.0, 140: math.nan}, status="diverged",
                             diverged_at=140), CE)
    assert stop is not None and [outcome_at(stop, h) for h in (100, 139, 140, 500)] == \
        ["trains", "trains", "diverged", "diverged"]


def test_at_its_last_step_the_horizon_rule_is_classify(tmp_path: Path) -> None:
    cases = [({0: 4.2, 200: 2.5}, "completed", None), ({0: 4.2, 200: 3.3}, "completed", None),
             ({0: 4.2, 100: 3.0, 200: 4.3}, "completed", None), ({0: 4.2, 100: 3.5}, "diverged", 100),
             ({0: 4.2, 200: 3.2}, "completed", None), ({0: 4.2, 200: 3.2 - 1e-9}, "completed", None)]
    for i, (vals, status, div) in enumerate(cases):
        t = _trial(tmp_path, f"c{i}", vals, status=status, steps=max(vals), diverged_at=div)
        tr = trajectory(t, CE)
        assert tr is not None and outcome_at(tr, max(vals)) == classify(t, CE), vals


def test_cells_at_each_horizon_count_unknowns_and_plateau_exits(tmp_path: Path) -> None:
    ts = [_trial(tmp_path, "a", {0: 4.2, 200: 3.34, 400: 2.9}, steps=200),   # extended: left at 400
          _trial(tmp_path, "b", {0: 4.2, 200: 2.6}, steps=200),              # trained at 200
          _trial(tmp_path, "c", {0: 4.2, 200: 3.34}, steps=200)]             # stalled, not extended
    (tmp_path / "a" / "summary.json").write_text(json.dumps({"status": "completed", "steps": 400}))  # the run's own
    assert horizons(ts) == [200, 400]
    (cell,) = horizon_cells(ts, CE).values()
    assert cell.left_at == [400, 200, None] and cell.last_step == [400, 200, 200]
    assert cell.at[200] == {"trains": 1, "stalls": 2, "diverged": 0, "unknown": 0}
    assert cell.at[400] == {"trains": 2, "stalls": 0, "diverged": 0, "unknown": 1}
    assert cell.record()["outcomes"]["400"]["unknown"] == 1


def _smoke_spec(extend: int | None, lrs: list[float]):  # noqa: ANN202 - a StudySpec
    from normlab.study.presets import study_preset

    spec = study_preset("stability-frontier", "smoke")
    return dataclasses.replace(spec, seeds=[0], extend_stalled_to=extend,
                               axes={**spec.axes, "model.placement": ["pre"], "optim.lr": lrs,
                                     "optim.warmup_steps": [0]})


def test_a_resumed_run_is_the_longer_run_step_for_step(tmp_path: Path, data_dir: Path) -> None:
    """Horizons nest: 12 steps resumed to 24 log the same losses as one run of 24 steps."""
    from normlab.run.config import RunConfig
    from normlab.run.dir import RunDir
    from normlab.study.extend import extend_run
    from normlab.train import run_training

    (trial,) = _smoke_spec(None, [1e-3]).trials()
    cfg = RunConfig.from_json(trial.config_json)
    run_training(cfg, tmp_path / "short", quiet=True)
    got = extend_run(str(tmp_path / "short"), 12, 24, edge=-1.0)  # edge -1: never "trains", so all stages run
    assert got["steps"] == 24
    long_cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, steps=24))
    run_training(long_cfg, tmp_path / "long", quiet=True)
    key = ("step", "train/loss", "val/loss", "lr")
    short = [{k: r.get(k) for k in key} for r in RunDir(tmp_path / "short").metrics()]
    long = [{k: r.get(k) for k in key} for r in RunDir(tmp_path / "long").metrics()]
    assert [r["step"] for r in short] == [r["step"] for r in long] and short[-1]["step"] == 24
    for a, b in zip(short, long):
        for k in key[1:]:
            assert (a[k] is None) == (b[k] is None) and (a[k] is None or a[k] == pytest.approx(b[k], abs=1e-5)), a


def test_a_study_extends_only_its_stalled_trials(tmp_path: Path, data_dir: Path) -> None:
    from normlab.run.dir import RunDir
    from normlab.study.outcome import study_data_ce
    from normlab.study.runner import run_study

    # 24 steps, extended to 48 (stages: 48): Pre-LN at lr 1e-3 is still on the plateau at 24, at 1e-2 it is not
    spec = _smoke_spec(48, [1e-3, 1e-2])
    spec = dataclasses.replace(spec, base={**spec.base, "train": {**spec.base["train"], "steps": 24,
                                                                  "checkpoint_every": 24}})
    store = run_study(spec, tmp_path / "s", workers=1, progress=False)
    trials = {t.params["optim.lr"]: t for t in store.trials()}
    ce = study_data_ce(list(trials.values()))
    assert classify(trials[1e-3], ce) == "stalls" and classify(trials[1e-2], ce) == "trains"
    extended = [e["trial"] for e in store.events() if e["event"] == "extended"]
    assert extended == [trials[1e-3].id]
    assert trials[1e-3].summary["steps"] == 24  # the store keeps the base horizon's record
    assert RunDir(trials[1e-3].run_dir).summary()["steps"] == 48 and RunDir(trials[1e-2].run_dir).summary()["steps"] == 24
    cells = horizon_cells(list(trials.values()), ce)
    assert all(sorted(c.at) == [24, 48] for c in cells.values())
    assert cells[("pre", 1e-2, 2, 0)].at[48]["trains"] == 1  # trained by 24, so by 48
    # run again: nothing left to extend (the stalled run is at the long horizon now)
    again = run_study(None, tmp_path / "s", workers=1, progress=False)
    assert [e["trial"] for e in again.events() if e["event"] == "extended"] == extended


def test_the_extension_option_is_checked_and_leaves_other_specs_unchanged(tmp_path: Path) -> None:
    from normlab.study.grow import growth_refusal
    from normlab.study.presets import study_preset

    assert "extend_stalled_to" not in study_preset("pre-vs-post").to_json_data()  # its published spec.json holds
    with pytest.raises(ConfigError, match="extend_stalled_to.*must exceed train.steps=12"):
        _smoke_spec(12, [1e-3]).trials()
    cosine = _smoke_spec(24, [1e-3])
    cosine = dataclasses.replace(cosine, base={**cosine.base, "optim": {**cosine.base["optim"], "schedule": "cosine"}})
    with pytest.raises(ConfigError, match="constant lr after warm-up"):
        cosine.trials()
    with pytest.raises(ConfigError, match="only training trials"):
        dataclasses.replace(_smoke_spec(None, [1e-3]), trial="probe", extend_stalled_to=24)
    held = _smoke_spec(None, [1e-3]).to_json_data()
    assert growth_refusal(held, _smoke_spec(24, [1e-3]).to_json_data()) is None  # added: allowed
    longer = _smoke_spec(48, [1e-3]).to_json_data()
    assert growth_refusal(_smoke_spec(24, [1e-3]).to_json_data(), longer) is None  # raised: allowed
    assert "not lowered" in (growth_refusal(longer, _smoke_spec(24, [1e-3]).to_json_data()) or "")
    assert "not lowered" in (growth_refusal(longer, held) or "")
    with pytest.raises(UserError):  # a store can only grow by it: a lower horizon is refused when reopened
        from normlab.study.runner import open_store

        open_store(_smoke_spec(48, [1e-3]), tmp_path / "g")
        open_store(_smoke_spec(24, [1e-3]), tmp_path / "g")
