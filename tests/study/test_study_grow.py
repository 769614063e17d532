"""Studies that grow: more seeds or axis values keep every finished trial (same ids, not run
again) and run only the new ones; any other change is refused naming the field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from normlab.core.errors import UserError
from normlab.study.grow import growth_refusal
from normlab.study.runner import open_store, run_study
from normlab.study.spec import StudySpec, load_spec

from .conftest import cli, tiny_spec


def _trainings(store: Path) -> dict[str, int]:
    """Claims per trial: how many times each trial was started (the store's event log)."""
    from normlab.study.store import Store

    s = Store(store)
    try:
        out: dict[str, int] = {}
        for e in s.events():
            if e["event"] == "claim":
                out[e["trial"]] = out.get(e["trial"], 0) + 1
        return out
    finally:
        s.close()


def test_a_finished_smoke_study_grows_by_a_seed_and_trains_only_the_new_trials(tmp_path: Path) -> None:
    store = tmp_path / "store"
    spec = tiny_spec(tmp_path / "s.toml", steps=2, every=2, ckpt=2, seeds="[0]")
    assert subprocess.run(cli("study", "run", str(spec), "--store", str(store), "--workers", "1", "--quiet"),
                          capture_output=True, text=True, timeout=600).returncode == 0
    before = {t.id: t for t in open_store(None, store).trials()}
    assert len(before) == 2 and all(t.status == "completed" for t in before.values())
    runs = {tid: (store / "runs" / tid / "summary.json").read_bytes() for tid in before}

    grown = tiny_spec(tmp_path / "s.toml", steps=2, every=2, ckpt=2, seeds="[0, 1]")
    done = subprocess.run(cli("study", "run", str(grown), "--store", str(store), "--workers", "1", "--quiet"),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    after = {t.id: t for t in open_store(None, store).trials()}
    new = set(after) - set(before)
    assert len(after) == 4 and len(new) == 2 and {after[t].params["seed"] for t in new} == {1}
    assert set(before) <= set(after) and all(after[t].params == before[t].params for t in before)  # ids kept
    assert _trainings(store) == {tid: 1 for tid in after}  # the old trials were not trained again
    assert all((store / "runs" / tid / "summary.json").read_bytes() == b for tid, b in runs.items())
    assert all(t.status == "completed" for t in after.values())
    assert load_spec(grown).seeds == [0, 1] and '"seeds": [\n    0,\n    1\n  ]' in (store / "spec.json").read_text()
    assert "completed 4" in done.stdout

    # a changed base field is refused, naming it; the store is left as it was
    changed = tiny_spec(tmp_path / "c.toml", steps=3, every=2, ckpt=2, seeds="[0, 1, 2]")
    bad = subprocess.run(cli("study", "run", str(changed), "--store", str(store), "--quiet"),
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "base.train.steps: 2 in the store, 3 in the spec" in bad.stderr
    assert len(open_store(None, store).trials()) == 4


def test_axis_values_grow_with_fake_trials(tmp_path: Path, fake_path: str) -> None:
    def spec(**kw) -> StudySpec:
        kw.setdefault("axes", {"model.n_layer": [2], "optim.lr": [1e-3]})
        return StudySpec(name="fake", trial=f"{fake_path}:ok", seeds=kw.pop("seeds", [0]), **kw)

    store = run_study(spec(), tmp_path / "s", workers=1, progress=False)
    first = [t.id for t in store.trials()]
    store = run_study(spec(axes={"model.n_layer": [2, 4], "optim.lr": [1e-3, 3e-3]}), store.root, workers=1,
                      progress=False)
    ids = [t.id for t in store.trials()]
    assert ids[:1] == first and len(ids) == 4  # the held trial stays first; three new ones after it
    calls = (store.root / "calls.log").read_text().split()
    assert sorted(calls) == sorted(ids) and len(set(calls)) == 4  # each trial ran once


@pytest.mark.parametrize("change, field", [
    ({"base": {"train": {"steps": 9}}}, "base.train.steps: (not set) in the store, 9 in the spec"),
    ({"seeds": [1]}, "seeds: [0] are in the store but not in the spec"),
    ({"axes": {"optim.lr": [3e-3]}}, "axes.optim.lr: [0.001] in the store but not in the spec"),
    ({"axes": {"optim.lr": [1e-3], "model.n_layer": [2]}}, "axes: ['optim.lr'] in the store"),
    ({"metric": "final_val_loss"}, "metric: \"best_val_loss\" in the store, \"final_val_loss\" in the spec"),
])
def test_other_changes_are_refused_naming_the_field(tmp_path: Path, fake_path: str, change: dict,
                                                     field: str) -> None:
    base = {"name": "fake", "trial": f"{fake_path}:ok", "seeds": [0], "axes": {"optim.lr": [1e-3]}}
    open_store(StudySpec(**base), tmp_path / "s").close()
    other = StudySpec(**{**base, **change})
    with pytest.raises(UserError, match="holds a different study") as e:
        open_store(other, tmp_path / "s")
    assert field in str(e.value)
    assert growth_refusal(StudySpec(**base).to_json_data(), other.to_json_data()) is not None
    assert growth_refusal(StudySpec(**base).to_json_data(), StudySpec(**{**base, "seeds": [0, 3]}).to_json_data()) is None
