"""Presets build valid grids at every scale; the CLI lists them and reports a store."""

from __future__ import annotations

import pytest

from normlab.core.errors import ConfigError
from normlab.study.presets import STUDY_PRESETS, study_preset

NAMES = ["pre-vs-post", "pre-vs-post-demo", "xiong-warmup", "init-gradients", "lr-sensitivity", "zloss", "depth",
         "deep-stability", "collapse", "stability-map", "recipe-variants", "stability-frontier", "frontier-ends",
         "frontier-bracket", "frontier-bracket-post6", "shallow-long", "new-methods", "pre-dropout", "deep-pre", "norm-vs-none", "attention-focus",
         "transfer-width-sp", "transfer-width-mup", "transfer-depth", "transfer-muon", "transfer-sharpness",
         "transfer-entropy", "stability-map-width"]


def test_every_preset_builds_valid_trials_at_every_scale() -> None:
    assert STUDY_PRESETS.names() == NAMES
    for name in NAMES:
        for scale in ("smoke", "cpu", "gpu"):
            spec = study_preset(name, scale)
            trials = spec.trials()  # every RunConfig built and validated
            assert len(trials) == len(spec.points()) * len(spec.seeds) >= 2


def test_pre_vs_post_sizes_match_the_docs() -> None:
    import json

    cpu = study_preset("pre-vs-post")
    assert len(cpu.trials()) == 36 and cpu.seeds == [0, 1, 2, 3, 4, 5]  # post, pre, GPT-2 x warm-up x seed
    cfg = json.loads(cpu.trials()[0].config_json)
    assert (cfg["model"]["n_layer"], cfg["model"]["d_model"], cfg["model"]["context"]) == (6, 128, 64)
    assert (cfg["train"]["batch_size"], cfg["train"]["steps"], cfg["optim"]["lr"]) == (16, 500, 1e-3)
    assert cfg["optim"]["grad_clip"] == 0.0  # seed 002's code has no clipping
    at_seed = study_preset("pre-vs-post", "seed").trials()
    # the seed scale is sized to one session: the two lab arms without warm-up, 6 seeds
    assert sorted({(t.params["model.placement"], t.params["model.impl"], t.params["optim.warmup_steps"])
                   for t in at_seed}) == [("post", "normlab", 0), ("pre", "normlab", 0)] and len(at_seed) == 12
    seed = json.loads(at_seed[0].config_json)
    # seed 002: lr 3e-4, batch 32, 10 epochs of ~1.0M training chars at 32 x 64 tokens per step
    assert (seed["optim"]["lr"], seed["train"]["batch_size"], seed["optim"]["schedule"]) == (3e-4, 32, "constant")
    assert seed["optim"]["grad_clip"] == 0.0
    assert seed["train"]["steps"] == 4900 and abs(10 * 1003854 / (32 * 64) - 4900) < 5
    # the seed's own code's init: PyTorch's module defaults, N(0, 1) embeddings, a separate output layer
    assert (seed["model"]["init"], seed["model"]["tie_embeddings"]) == ("torch_default", False)
    assert (cfg["model"]["init"], cfg["model"]["tie_embeddings"]) == ("gpt2", True)  # the cpu scale: the lab's default
    with pytest.raises(ConfigError, match="--scale.*smoke, cpu, seed, gpu"):
        study_preset("pre-vs-post", "huge")
    with pytest.raises(ConfigError, match="--scale"):
        study_preset("depth", "seed")


def test_demo_is_the_stability_map_cell_with_a_per_step_log() -> None:
    """The demo's arms differ in placement and warm-up only, and at cpu each is the stability
    map's trial of the same cell and seed except for length and logging cadence (so the map's
    published outcomes are those of this setting)."""
    import json

    demo = study_preset("pre-vs-post-demo")
    trials = demo.trials()
    assert len(trials) == 24 and demo.seeds == list(range(6))
    cadence = ("steps", "eval_every", "eval_batches", "log_every", "checkpoint_every")
    grid = {(t.params["model.placement"], t.params["optim.lr"], t.params["model.n_layer"],
             t.params["optim.warmup_steps"], t.params["seed"]): json.loads(t.config_json)
            for t in study_preset("stability-map").trials()}
    shared, twins = [], 0
    for t in trials:
        cfg = json.loads(t.config_json)
        assert (cfg["train"]["log_every"], cfg["train"]["eval_every"], cfg["train"]["steps"]) == (1, 25, 300)
        # the map has seeds 0-3: the demo's fifth and sixth seeds have no twin there
        twin = grid.get((cfg["model"]["placement"], cfg["optim"]["lr"], cfg["model"]["n_layer"],
                         cfg["optim"]["warmup_steps"], cfg["seed"]))
        if twin is not None:
            assert cfg["train"]["eval_batches"] == twin["train"]["eval_batches"]  # the map's validation windows
            twins += 1
        for c in (cfg, twin or {"train": {}}):
            for k in cadence:
                c["train"].pop(k, None)
        assert twin is None or cfg == twin
        for k in ("placement", "warmup_steps"):  # what the arms may differ in
            cfg.get("model", {}).pop(k, None)
            cfg.get("optim", {}).pop(k, None)
        cfg.pop("seed")
        shared.append(cfg)
    assert twins == 16 and all(c == shared[0] for c in shared)  # identical hyper-parameters otherwise
    assert shared[0]["optim"]["lr"] == 3e-3 and shared[0]["model"]["n_layer"] == 6
    with pytest.raises(ConfigError, match="--scale.*smoke, cpu, gpu"):
        study_preset("pre-vs-post-demo", "seed")


def test_stability_map_grid_is_the_table_at_the_top() -> None:
    import json

    from normlab.study.map_preset import STABILITY_GRID

    spec = study_preset("stability-map")
    g = STABILITY_GRID["cpu"]
    assert spec.axes == {"model.placement": ["post", "pre", "deepnorm", "admin", "sandwich", "pre_post"],
                         "optim.lr": [5e-4, 1e-3, 3e-3], "model.n_layer": [6, 18], "optim.warmup_steps": [0, 50]}
    assert spec.seeds == g["seeds"] == [0, 1, 2, 3] and len(spec.trials()) == 6 * 3 * 2 * 2 * 4
    assert spec.extend_stalled_to == g["extend_to"] == 400  # stalled runs resumed: outcomes at two horizons
    cfg = json.loads(spec.trials()[0].config_json)
    m, o, t = cfg["model"], cfg["optim"], cfg["train"]
    assert (m["d_model"], m["context"], m["init"], t["batch_size"], t["steps"]) == (64, 64, "xavier", 16, 200)
    assert (o["schedule"], o["grad_clip"]) == ("constant", 0.0)  # constant after warm-up, unclipped
    smoke = study_preset("stability-map", "smoke")
    assert len(smoke.trials()) == 6 * 3 * 2 * 2 * 2


def test_recipe_variants_differ_from_their_map_control_in_one_field() -> None:
    """Each recipe-variants trial has a stability-map trial (same seed) whose config differs only
    in the field the variant changes: the map cell is its control."""
    import json

    def flat(d: dict, pre: str = "") -> dict:
        out: dict = {}
        for k, v in d.items():
            out.update(flat(v, pre + k + ".") if isinstance(v, dict) else {pre + k: v})
        return out

    m = [flat(json.loads(t.config_json)) for t in study_preset("stability-map").trials()]
    for t in study_preset("recipe-variants").trials():
        v = flat(json.loads(t.config_json))
        diffs = [{k for k in v if v[k] != c.get(k)} for c in m]
        assert min(len(d) for d in diffs) == 1, (t.params, min(diffs, key=len))
        assert min(diffs, key=len) <= {"model.init", "model.final_norm"}


def test_cli_presets_dry_run_and_status(tmp_path, capsys, fake_path) -> None:
    from normlab.cli import main

    assert main(["study", "presets"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in NAMES)
    assert main(["study", "run", "pre-vs-post", "--scale", "smoke", "--store", str(tmp_path / "d"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "12 trials" in out and out.count("model.placement=") == 12 and out.count("model.impl=hf-gpt2") == 4 and not (tmp_path / "d").exists()
    assert main(["study", "run", "nonesuch", "--store", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "unknown name" in err and "pre-vs-post" in err and ".toml" in err
    spec = tmp_path / "s.toml"
    spec.write_text(f'name = "c"\ntrial = "{fake_path}:flaky"\nretries = 0\nseeds = [0]\n'
                    '[axes]\n"model.n_layer" = [2, 3]\n')
    assert main(["study", "run", str(spec), "--store", str(tmp_path / "s"), "--workers", "1"]) == 1  # one failed
    capsys.readouterr()
    assert main(["study", "status", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "2 trials: completed 1, failed 1" in out and "boom" in out
    assert main(["study", "status", str(tmp_path / "nowhere")]) == 2


def test_probe_trials_reproduce_normlab_probe_for_the_same_seed(tmp_path, data_dir) -> None:
    from normlab.diagnostics.probe import ProbeConfig, run_probe
    from normlab.study.runner import run_study

    spec = study_preset("init-gradients", "smoke")
    store = run_study(spec, tmp_path / "s", workers=1)
    trials = {(t.params["model.placement"], t.params["model.n_layer"]): t for t in store.trials()}
    assert len(trials) == 8 and {t.status for t in trials.values()} == {"completed"}
    rows = run_probe(ProbeConfig(placements=["post", "pre"], depths=[4], d_model=32, n_head=4, context=64,
                                 seeds=1, batch_size=8, init="xavier"), str(data_dir))
    for p in ("post", "pre"):
        want = next(r["value"] for r in rows if r["placement"] == p and r["param"] == "W_2"
                    and r["layer"] == 4 and r["metric"] == "grad_norm")
        assert trials[(p, 4)].summary["w2_grad_last"] == pytest.approx(want, rel=1e-6)
        assert (trials[(p, 4)].run_dir / "probe.csv").is_file()


def test_the_depth_study_names_its_placements() -> None:
    """A placement registered later (a plugin's, a test's) does not join the depth study: its
    axis is the named list, every name of it a built-in placement, so its trial ids hold."""
    from normlab.model.catalogue import PLACEMENTS
    from normlab.model.placements import Pre
    from normlab.study.presets import DEPTH_PLACEMENTS

    assert set(DEPTH_PLACEMENTS) <= set(PLACEMENTS.names()) and len(set(DEPTH_PLACEMENTS)) == len(DEPTH_PLACEMENTS)
    before = [t.id for t in study_preset("depth", "smoke").trials()]
    PLACEMENTS.add("later_pre", type("LaterPre", (Pre,), {}))
    try:
        spec = study_preset("depth", "smoke")
        assert spec.axes["model.placement"] == DEPTH_PLACEMENTS
        assert [t.id for t in spec.trials()] == before
    finally:
        PLACEMENTS.remove("later_pre")
