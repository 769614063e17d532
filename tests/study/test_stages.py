"""Nested stages of a study (``StudySpec.stages``): the option checked and left out of the
spec.json of a study without it; a run read at a stage (``study.at_horizon``) is, at the first
stage, the store's own record, and after a resume, the run as it stood at each stage; one stage's
extension (``study.extend.extend_to``) resumes only the runs it is given, once."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from normlab.core.errors import ConfigError
from normlab.study.at_horizon import reached, read_at, summary_at
from normlab.study.store import TrialRecord

KEYS = ("status", "steps", "best_val_loss", "final_val_loss", "diverged_at_step")


def _smoke_spec(stages: list[int] | None, lrs: list[float]):  # noqa: ANN202 - a StudySpec
    from normlab.study.presets import study_preset

    spec = study_preset("stability-frontier", "smoke")
    spec = dataclasses.replace(spec, seeds=[0], extend_stalled_to=None,
                               axes={**spec.axes, "model.placement": ["pre"], "optim.lr": lrs,
                                     "optim.warmup_steps": [0]})
    base = {**spec.base, "train": {**spec.base["train"], "steps": 12, "checkpoint_every": 12}}
    return dataclasses.replace(spec, base=base, stages=stages)


def test_the_stages_option_is_checked_and_absent_from_old_specs() -> None:
    from normlab.study.grow import growth_refusal
    from normlab.study.presets import study_preset
    from normlab.study.spec import spec_from_dict

    for name in ("stability-map", "pre-vs-post", "new-methods"):  # published spec.json files hold
        data = study_preset(name).to_json_data()
        assert "stages" not in data and spec_from_dict(data).stages is None
    assert _smoke_spec([12, 24], [1e-3]).to_json_data()["stages"] == [12, 24]
    for bad, why in (([12], "at least two"), ([24, 12], "increasing"), ([12, "x"], r"stages\[1\]")):
        with pytest.raises(ConfigError, match=why):
            _smoke_spec(bad, [1e-3])
    with pytest.raises(ConfigError, match="first stage.*train.steps=12"):
        _smoke_spec([6, 24], [1e-3]).trials()
    cosine = _smoke_spec([12, 24], [1e-3])
    cosine = dataclasses.replace(cosine, base={**cosine.base, "optim": {**cosine.base["optim"], "schedule": "cosine"}})
    with pytest.raises(ConfigError, match=r"stages=.*constant lr after warm-up"):
        cosine.trials()
    with pytest.raises(ConfigError, match="supersedes extend_stalled_to"):
        dataclasses.replace(_smoke_spec([12, 24], [1e-3]), extend_stalled_to=24)
    with pytest.raises(ConfigError, match="only training trials"):
        dataclasses.replace(_smoke_spec(None, [1e-3]), trial="probe", stages=[12, 24])
    held = _smoke_spec(None, [1e-3]).to_json_data()
    assert growth_refusal(held, _smoke_spec([12, 24], [1e-3]).to_json_data()) is None  # added: same trials
    assert growth_refusal(_smoke_spec([12, 24], [1e-3]).to_json_data(), held) is None   # dropped: read as before
    assert [t.id for t in _smoke_spec([12, 24], [1e-3]).trials()] == [t.id for t in _smoke_spec(None, [1e-3]).trials()]


def _fake(tmp: Path, evals: dict[int, float], summary: dict, status: str = "completed") -> TrialRecord:
    d = tmp / "run"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "val/loss": v}) + "\n" for s, v in evals.items()))
    (d / "diagnostics.jsonl").write_text("".join(json.dumps({"step": s}) + "\n" for s in evals))
    (d / "summary.json").write_text(json.dumps(summary))
    return TrialRecord("t", {}, status, summary, d, None)


def test_a_run_read_at_a_horizon_is_the_run_as_it_stood_there(tmp_path: Path) -> None:
    t = _fake(tmp_path, {0: 4.2, 100: 3.3, 200: 3.5, 300: 2.9, 400: 2.95},
              {"status": "diverged", "steps": 450, "diverged_at_step": 450, "best_val_loss": 2.9})
    assert reached(t) == 450
    at = {h: summary_at(t, h) for h in (200, 400, 1000)}
    assert {k: at[200][k] for k in KEYS} == {"status": "completed", "steps": 200, "best_val_loss": 3.3,
                                             "final_val_loss": 3.5, "diverged_at_step": None}
    assert at[400]["best_val_loss"] == 2.9 and at[400]["final_val_loss"] == 2.95  # the step-0 line is the init's
    assert (at[1000]["status"], at[1000]["steps"], at[1000]["final_val_loss"]) == ("diverged", 450, None)
    view = read_at(t, 200, tmp_path / "views")
    assert view.run_dir == tmp_path / "views" / "t" and view.status == "completed" and view.summary == at[200]
    from normlab.run.dir import RunDir

    assert [r["step"] for r in RunDir(view.run_dir).metrics()] == [0, 100, 200]
    assert [r["step"] for r in RunDir(view.run_dir).diagnostics()] == [0, 100, 200]
    assert not RunDir(view.run_dir).has_checkpoints()
    assert [r["step"] for r in RunDir(t.run_dir).metrics()][-1] == 400  # the run itself is untouched


def test_a_stage_resumes_the_runs_it_is_given_once(tmp_path: Path, data_dir: Path) -> None:
    from normlab.run.dir import RunDir
    from normlab.study.extend import extend_to
    from normlab.study.runner import run_study

    store = run_study(_smoke_spec([12, 24, 36], [1e-3, 1e-2]), tmp_path / "s", workers=1, progress=False)
    trials = {t.params["optim.lr"]: t for t in store.trials()}
    # the runs read at the first stage are the store's records, field for field
    for t in trials.values():
        assert {k: read_at(t, 12, tmp_path / "v12").summary[k] for k in KEYS} == {k: t.summary.get(k) for k in KEYS}
    assert extend_to(tmp_path / "s", [trials[1e-3].id], 24) == 1
    assert RunDir(trials[1e-3].run_dir).summary()["steps"] == 24 and reached(trials[1e-2]) == 12
    # read at 12 after the resume: still the store's record; read at 24: the resumed run's own summary
    assert {k: read_at(trials[1e-3], 12, tmp_path / "w12").summary[k] for k in KEYS} == \
        {k: trials[1e-3].summary.get(k) for k in KEYS}
    own = RunDir(trials[1e-3].run_dir).summary()
    assert {k: read_at(trials[1e-3], 24, tmp_path / "w24").summary[k] for k in KEYS} == {k: own.get(k) for k in KEYS}
    assert extend_to(tmp_path / "s", [trials[1e-3].id], 24) == 0  # there already: not resumed again
    events = [(e["trial"], e["event"]) for e in store.events() if e["event"] == "extended"]
    assert events == [(trials[1e-3].id, "extended")]
    assert trials[1e-3].summary["steps"] == 12  # the store keeps the first stage's record
