"""Spec validation: every mistake is refused before any trial starts, naming the key."""

from __future__ import annotations

import pytest

from normlab.core.errors import ConfigError
from normlab.study.spec import StudySpec, load_spec, spec_from_dict

from .conftest import tiny_spec


def test_grid_expands_axes_zip_and_seeds_seed_major() -> None:
    spec = StudySpec(name="g", axes={"model.placement": ["post", "pre"]},
                     zip=[{"optim.lr": [1e-3, 3e-4], "optim.min_lr": [1e-4, 3e-5]}], seeds=[0, 1, 2])
    trials = spec.trials()
    assert len(trials) == 2 * 2 * 3  # zip pairs values instead of crossing them (would be 2*4*3)
    assert [t.params["seed"] for t in trials[:4]] == [0, 0, 0, 0]  # a full pass per seed first
    pairs = {(t.params["optim.lr"], t.params["optim.min_lr"]) for t in trials}
    assert pairs == {(1e-3, 1e-4), (3e-4, 3e-5)}
    assert len({t.id for t in trials}) == len(trials)
    assert spec.scientific == ["model.placement", "optim.lr", "optim.min_lr"]  # default: every axis
    import json
    cfg = json.loads(trials[5].config_json)
    assert cfg["model"]["placement"] == trials[5].params["model.placement"]
    assert cfg["seed"] == trials[5].params["seed"]
    # ids are a hash of the resolved config: rebuilding gives the same ids
    assert [t.id for t in spec.trials()] == [t.id for t in trials]


@pytest.mark.parametrize("axes, key, words", [
    ({"model.n_layr": [2]}, "axes.model.n_layr", "did you mean 'model.n_layer'"),
    ({"model.n_layer": []}, "axes.model.n_layer", "empty axis"),
    ({"model.n_layer": ["six"]}, "axes.model.n_layer[0]", "expected an integer"),
    ({"optim.lr": 1e-3}, "axes.optim.lr", "list of values"),
    ({"model": [1]}, "axes.model", "is a section"),
])
def test_bad_axes_name_the_key(axes: dict, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as e:
        StudySpec(name="bad", axes=axes)
    assert e.value.field == key and words in str(e.value)


def test_zip_lengths_roles_and_paths_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"zip\[0\].*same length"):
        StudySpec(name="z", zip=[{"optim.lr": [1, 2], "optim.min_lr": [0.1]}])
    with pytest.raises(ConfigError, match="not an axis"):
        StudySpec(name="r", axes={"optim.lr": [1e-3]}, nuisance=["optim.warmup_steps"])
    with pytest.raises(ConfigError, match="no role"):
        StudySpec(name="r", axes={"optim.lr": [1e-3], "model.n_layer": [2]}, scientific=["optim.lr"])
    with pytest.raises(ConfigError, match="seeds = "):
        StudySpec(name="s", axes={"seed": [1, 2]})
    for bad in ("../elsewhere", "/tmp/abs", "runs/../../x"):
        with pytest.raises(ConfigError) as e:
            StudySpec(name="p", runs_dir=bad)
        assert e.value.field == "runs_dir" and "inside the store" in str(e.value)


def test_each_trial_config_is_built_and_cross_checked() -> None:
    spec = StudySpec(name="x", base={"model": {"d_model": 32}}, axes={"model.n_head": [2, 3]})
    with pytest.raises(ConfigError) as e:
        spec.trials()
    assert e.value.field == "model.n_head" and "model.n_head=3" in str(e.value)
    with pytest.raises(ConfigError, match="same config"):
        StudySpec(name="d", axes={"model.dropout": [0, 0.0]}).trials()
    with pytest.raises(ConfigError) as e:
        StudySpec(name="b", base={"model": {"n_layers": 2}}).trials()
    assert e.value.field == "base.model.n_layers"


def test_toml_nested_axes_equal_dotted(tmp_path) -> None:
    p = tmp_path / "s.toml"
    p.write_text('name = "t"\nseeds = [0]\nnuisance = ["optim.lr"]\n[axes]\n"model.placement" = ["post"]\n'
                 'optim.lr = [1e-3, 3e-4]\n')
    spec = load_spec(p)
    assert spec.axes == {"model.placement": ["post"], "optim.lr": [1e-3, 3e-4]}
    assert spec.scientific == ["model.placement"] and spec.nuisance == ["optim.lr"]
    with pytest.raises(ConfigError, match="did you mean 'axes'"):
        spec_from_dict({"name": "t", "axis": {}})


@pytest.mark.parametrize("axes, key", [
    ('"model.n_layr" = [2]', "model.n_layr"),
    ('"model.n_layer" = []', "axes.model.n_layer"),
    ('"optim.lr" = ["fast"]', "axes.optim.lr[0]"),
])
def test_cli_rejects_bad_spec_before_any_trial(tmp_path, capsys, axes: str, key: str) -> None:
    from normlab.cli import main

    spec = tiny_spec(tmp_path / "bad.toml", axes=axes)
    store = tmp_path / "store"
    assert main(["study", "run", str(spec), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert key in err and len(err.strip().splitlines()) == 1
    assert not store.exists()  # nothing created, nothing started
