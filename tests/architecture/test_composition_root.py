"""The composition root (issue: a run assembled from components that own their config).

``train/run.py`` and its pre-flight ``train/plan.py`` see the whole RunConfig; every component
below gets its own section. A run is built through the root with every component's constructor
watched: none receives a RunConfig, and after the run none of the objects reachable from the
Trainer (or a batched trial) holds one. The model is built once per run (on the meta device,
then materialised), and a counter sees it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from normlab.model import transformer
from normlab.run.config import RunConfig
from normlab.run.resolve import resolve

SMOKE = ["train.steps=4", "train.eval_every=2", "train.checkpoint_every=2", "model.n_layer=1",
         "train.log_every=1", "train.keep_checkpoints=true"]


def holders(obj: Any, path: str = "", seen: set[int] | None = None, depth: int = 6) -> list[str]:
    """Paths under ``obj`` (attributes, dataclass fields, list/tuple/dict items of normlab's own
    objects) that lead to a RunConfig."""
    seen = set() if seen is None else seen
    if isinstance(obj, RunConfig):
        return [path or "<the object itself>"]
    if id(obj) in seen or depth == 0 or isinstance(obj, (str, bytes, int, float, bool, type(None), Path)):
        return []
    seen.add(id(obj))
    if isinstance(obj, dict):
        items = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    elif type(obj).__module__.startswith("normlab") and not isinstance(obj, type):
        names = [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []
        attrs = getattr(obj, "__dict__", {})
        if hasattr(obj, "_modules"):  # a torch module: its own attributes, not its parameters
            attrs = {k: v for k, v in attrs.items() if not k.startswith("_")}
        items = [(f"{path}.{k}", getattr(obj, k)) for k in dict.fromkeys([*names, *attrs])]
    else:
        return []
    return [hit for p, v in items for hit in holders(v, p, seen, depth - 1)]


def test_the_walker_finds_a_config_however_deep_it_is_held() -> None:
    """The property below is not vacuous: a config three objects down is found."""

    @dataclasses.dataclass
    class Box:
        inner: Any

    Box.__module__ = "normlab.fake"
    assert holders(Box([{"cfg": RunConfig()}])) == [".inner[0]['cfg']"]
    assert holders(Box([{"cfg": RunConfig().model}])) == []


@pytest.mark.usefixtures("data_dir")
def test_every_component_gets_only_its_own_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.diagnostics.training import TrainingDiagnostics
    from normlab.train import loop, run
    from normlab.train.batches import Batches
    from normlab.train.checkpointer import Checkpointer
    from normlab.train.metrics import Metrics

    received: dict[str, list[Any]] = {}
    for cls in (loop.Trainer, Checkpointer, Metrics, TrainingDiagnostics, Batches):
        real = cls.__init__

        def spy(self, *args, _real=real, _name=cls.__name__, **kw):  # type: ignore[no-untyped-def]
            received.setdefault(_name, []).append((args, kw))
            _real(self, *args, **kw)

        monkeypatch.setattr(cls, "__init__", spy)
    trainers: list[Any] = []
    real_run = loop.Trainer.run
    monkeypatch.setattr(loop.Trainer, "run", lambda self, st: trainers.append(self) or real_run(self, st))
    cfg = resolve("smoke", overrides=[*SMOKE, "train.diag_every=2"])
    assert run.run_training(cfg, tmp_path / "run", quiet=True)["status"] == "completed"
    assert set(received) == {"Trainer", "Checkpointer", "Metrics", "TrainingDiagnostics", "Batches"}
    for name, calls in received.items():
        assert holders(calls) == [], f"{name} received a RunConfig"
    (args, kw), = received["Trainer"]
    loop_cfg = args[0]
    assert (loop_cfg.train, loop_cfg.optim) == (cfg.train, cfg.optim)  # its two sections, no more
    assert holders(trainers[0]) == []


@pytest.mark.usefixtures("data_dir")
def test_batched_trials_hold_no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normlab.train import batched
    from normlab.train.run import run_batched

    seen: list[Any] = []
    real = batched.train_trials
    monkeypatch.setattr(batched, "train_trials", lambda trials, *a: seen.append((trials, a)) or real(trials, *a))
    monkeypatch.setattr("normlab.train.run.train_trials", batched.train_trials)
    cfgs = [resolve("smoke", overrides=[*SMOKE, f"seed={s}"]) for s in (1, 2)]
    out = run_batched(cfgs, [tmp_path / "a", tmp_path / "b"], quiet=True)
    assert [o["status"] for o in out] == ["completed", "completed"]
    assert seen and holders(seen) == []


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The device of every TransformerLM built (counted at its constructor)."""
    import torch

    made: list[str] = []
    real = transformer.TransformerLM.__init__

    def counted(self, *a, **kw):  # type: ignore[no-untyped-def]
        made.append(str(torch.get_default_device()) if not torch.empty(0).is_meta else "meta")
        real(self, *a, **kw)

    monkeypatch.setattr(transformer.TransformerLM, "__init__", counted)
    return made


@pytest.mark.usefixtures("data_dir")
def test_a_run_builds_its_model_once(builds: list[str], tmp_path: Path) -> None:
    from normlab.train import run_training

    cfg = resolve("smoke", overrides=SMOKE)
    assert run_training(cfg, tmp_path / "run", quiet=True)["status"] == "completed"
    assert builds == ["meta"]  # the pre-flight's meta model, costed, then materialised
    assert run_training(None, tmp_path / "run", resume=True, steps=6, quiet=True)["steps"] == 6
    assert builds == ["meta", "meta"]  # a resume is a run of its own: once again


@pytest.mark.usefixtures("data_dir")
def test_a_batch_builds_each_trial_once(builds: list[str], tmp_path: Path) -> None:
    from normlab.train.run import run_batched

    cfgs = [resolve("smoke", overrides=[*SMOKE, f"seed={s}"]) for s in (1, 2, 3)]
    run_batched(cfgs, [tmp_path / str(i) for i in range(3)], quiet=True)
    assert builds == ["meta"] * 3


def test_the_build_counter_counts(builds: list[str]) -> None:
    from normlab.model.build import build_model

    build_model(resolve("smoke", overrides=["model.n_layer=1"]).model)
    assert builds == ["cpu"]


def test_only_the_root_names_the_whole_config() -> None:
    """In train/, only the composition root (run.py, plan.py) and config.json's writer
    (lifecycle.open_files) name RunConfig: a component that took the whole config would."""
    root = Path(__file__).resolve().parents[2] / "src" / "normlab" / "train"
    naming = sorted(p.name for p in root.glob("*.py") if "RunConfig" in p.read_text(encoding="utf-8"))
    assert naming == ["lifecycle.py", "plan.py", "run.py"], naming
