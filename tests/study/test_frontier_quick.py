"""The quick critical-lr path: `stability-frontier --placements A,B` builds the trials of the
placements asked for (each the same trial whatever runs beside it), the `quick` scale's lr grid
brackets a transition anywhere inside it with a bounded interval, and a `--set` on a key the
study's axes set is refused in one line naming how to change the axis (it used to be ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.cli import main
from normlab.stats.frontier import critical_lr
from normlab.study.frontier_preset import FRONTIER_GRID
from normlab.study.presets import study_preset

from .conftest import tiny_spec

QUICK = FRONTIER_GRID["quick"]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_placements_choose_the_presets_placements_and_keep_each_trial() -> None:
    spec = study_preset("stability-frontier", "quick", ["keel", "pre"])
    trials = spec.trials()
    assert len(trials) == 2 * len(QUICK["lr"]) * len(QUICK["seeds"]) == 84
    assert {t.params["model.placement"] for t in trials} == {"keel", "pre"}
    assert sorted({t.params["optim.lr"] for t in trials}) == QUICK["lr"]
    assert {(t.params["model.n_layer"], t.params["optim.warmup_steps"]) for t in trials} == {(6, 0)}
    assert spec.extend_stalled_to == 400 and spec.base["optim"]["schedule"] == "constant"
    # Pre-LN's trials are the default preset's Pre-LN trials: same config, same id
    default = study_preset("stability-frontier", "quick")
    assert {t.params["model.placement"] for t in default.trials()} == {"post", "pre"}
    pre = {t.id for t in trials if t.params["model.placement"] == "pre"}
    assert pre == {t.id for t in default.trials() if t.params["model.placement"] == "pre"}
    # the quick scale is the cpu map's base (d=64, 200 steps), not a smaller model
    assert spec.base["model"]["d_model"] == 64 and spec.base["train"]["steps"] == 200


def test_placements_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "S")
    assert main(["study", "run", "stability-frontier", "--scale", "quick", "--placements", "keel",
                 "--store", store, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "42 trials" in out and out.count("model.placement=keel") == 42
    assert main(["study", "run", "stability-frontier", "--placements", "keel,pree", "--store", store,
                 "--dry-run"]) == 2
    err = _one_line(capsys)
    assert "--placements='pree'" in err and "did you mean 'pre'" in err and "keel" in err
    assert main(["study", "run", "xiong-warmup", "--placements", "keel", "--store", store, "--dry-run"]) == 2
    assert "presets that take --placements: stability-frontier" in _one_line(capsys)
    spec = tiny_spec(tmp_path / "spec.toml")
    assert main(["study", "run", str(spec), "--placements", "keel", "--store", store, "--dry-run"]) == 2
    assert "[axes]" in _one_line(capsys)
    assert main(["study", "run", "--placements", "keel", "--store", store]) == 2
    assert "needs a study file or preset" in _one_line(capsys)
    assert not Path(store).exists()


@pytest.mark.parametrize("placement", ["post", "pre"])
def test_the_quick_grid_lies_around_the_published_transitions(placement: str) -> None:
    """docs/evidence/claims.json (the frontier claims, 6 blocks, no warm-up): Post-LN trained at
    2e-3 and stopped by 6e-3; Pre-LN still trained at 1.2e-2. Each has lrs of the grid on both
    sides, so its transition falls inside the grid rather than beyond an end."""
    trains_at, fails_by = {"post": (2e-3, 6e-3), "pre": (1.2e-2, None)}[placement]
    lrs = QUICK["lr"]
    assert min(lrs) < trains_at and max(lrs) > (fails_by or trains_at) * 4
    assert [b / a for a, b in zip(lrs, lrs[1:])] == pytest.approx([2.0] * (len(lrs) - 1))


@pytest.mark.parametrize("gap", range(1, len(QUICK["lr"])))
def test_a_transition_anywhere_inside_the_quick_grid_has_a_bounded_interval(gap: int) -> None:
    """With 6 seeds an lr, every seed training below the gap and none above gives the gap itself
    as the 95% interval (0.5^6 < 0.025); one seed still training at the first failing lr gives a
    bounded interval too. The smoke scale's 2 seeds cannot: its intervals stay open."""
    lrs, n = QUICK["lr"], len(QUICK["seeds"])
    clean = critical_lr(lrs, [n if j < gap else 0 for j in range(len(lrs))], [n] * len(lrs))
    assert clean.censored is None and (clean.lo, clean.hi) == pytest.approx((lrs[gap - 1], lrs[gap]))
    mixed = critical_lr(lrs, [n if j < gap else (1 if j == gap else 0) for j in range(len(lrs))], [n] * len(lrs))
    assert mixed.censored is None and mixed.lo is not None and mixed.hi is not None
    assert lrs[0] <= mixed.lo < mixed.hi < 2 * lrs[-1]  # a mixed last lr: the fit reaches a little beyond
    smoke = FRONTIER_GRID["smoke"]
    k = len(smoke["seeds"])
    few = critical_lr(smoke["lr"], [k, k, 0, 0], [k] * 4)
    assert few.lo is None or few.hi is None  # what the issue found: smoke's intervals are unbounded


def test_set_on_an_axis_is_refused_naming_how_to_change_the_axis(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "S")
    assert main(["study", "run", "stability-frontier", "--set", "model.placement=keel", "--store", store,
                 "--dry-run"]) == 2
    err = _one_line(capsys)
    assert "model.placement is an axis" in err and "--placements keel,pre" in err, err
    assert main(["study", "run", "stability-map", "--set", "optim.lr=1e-3", "--store", store, "--dry-run"]) == 2
    err = _one_line(capsys)
    assert "optim.lr is an axis of study 'stability-map'" in err and "study TOML" in err, err
    assert main(["study", "run", "stability-map", "--set", "seed=3", "--store", store, "--dry-run"]) == 2
    assert "seeds = [...]" in _one_line(capsys)
    spec = tiny_spec(tmp_path / "spec.toml", axes='"model.placement" = ["post", "pre"]')
    assert main(["study", "run", str(spec), "--set", "model.placement=keel", "--store", store, "--dry-run"]) == 2
    assert "in the study file ([axes] or [[zip]])" in _one_line(capsys)
    assert not Path(store).exists()
    # a key no axis sets still applies to the base
    assert main(["study", "run", str(spec), "--set", "train.eval_batches=3", "--store", store, "--dry-run"]) == 0
