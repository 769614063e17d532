"""Pieces of the loop: AdamW groups, pickle-free optimizer state, atomic checkpoints, logs, loggers."""

from __future__ import annotations

import pytest
import torch

from normlab.core.errors import ConfigError, UserError
from normlab.core.fsutil import append_jsonl, atomic_write_text, read_jsonl
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM
from normlab.run import checkpoint
from normlab.run.checkpoint import flatten_state, unflatten_state
from normlab.run.train_config import OptimConfig
from normlab.train.optim import make_optimizer, param_groups


def _model(**kw) -> TransformerLM:
    torch.manual_seed(0)
    return TransformerLM(ModelConfig(n_layer=2, d_model=16, n_head=2, context=8, vocab_size=11, **kw))


def test_decay_only_on_matrices_not_embeddings_norms_biases():
    m = _model()
    decay, keep = param_groups(m, 0.1)
    assert decay["weight_decay"] == 0.1 and keep["weight_decay"] == 0.0
    assert "wte.weight" in keep["names"] and "wpe.weight" in keep["names"]
    assert all(p.ndim >= 2 for p in decay["params"])
    assert any(n.endswith("bias") for n in keep["names"]) and not any(n.endswith("bias") for n in decay["names"])
    assert not any("norm" in n.lower() or n.endswith(("gain", "weight_g")) for n in decay["names"])
    # every parameter exactly once (the tied head is the embedding)
    ids = [id(p) for g in (decay, keep) for p in g["params"]]
    assert sorted(ids) == sorted({id(p) for p in m.parameters()})


def _train_steps(model, opt, n=3):
    x = torch.randint(0, 11, (2, 8))
    for _ in range(n):
        _, loss = model(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad()


def test_optimizer_state_round_trips_without_pickle():
    m = _model()
    opt = make_optimizer(m, OptimConfig(lr=1e-2))
    _train_steps(m, opt)
    tensors, meta = flatten_state(opt)
    assert all(isinstance(t, torch.Tensor) for t in tensors.values())
    import json

    meta = json.loads(json.dumps(meta))  # must survive JSON
    opt2 = make_optimizer(m, OptimConfig(lr=1e-2))
    opt2.load_state_dict(unflatten_state(tensors, meta))
    a, b = opt.state_dict(), opt2.state_dict()
    for pid in a["state"]:
        for k, v in a["state"][pid].items():
            assert torch.equal(v, b["state"][pid][k])
    assert a["param_groups"] == b["param_groups"]


def test_checkpoint_restores_weights_optimizer_and_rng(tmp_path):
    m = _model(dropout=0.1)
    opt = make_optimizer(m, OptimConfig(lr=1e-2))
    _train_steps(m, opt)
    checkpoint.save(tmp_path / "latest", m, {"loop": {"step": 3}}, opt)
    expected_noise = torch.rand(5)
    m2 = _model(dropout=0.1)
    opt2 = make_optimizer(m2, OptimConfig(lr=1e-2))
    state = checkpoint.load(tmp_path / "latest", m2, opt2)
    assert state["loop"] == {"step": 3}
    assert torch.equal(torch.rand(5), expected_noise)  # RNG stream continues where it was saved
    for (n, p), (_, q) in zip(m.named_parameters(), m2.named_parameters()):
        assert torch.equal(p, q), n
    # the same next step from both (same data and dropout masks): optimizer moments were restored
    torch.manual_seed(1)
    _train_steps(m, opt, 1)
    torch.manual_seed(1)
    _train_steps(m2, opt2, 1)
    assert all(torch.equal(p, q) for p, q in zip(m.parameters(), m2.parameters()))


def test_interrupted_swap_falls_back_to_the_old_checkpoint(tmp_path):
    m = _model()
    checkpoint.save(tmp_path / "latest", m, {"loop": {"step": 1}})
    checkpoint.save(tmp_path / "latest", m, {"loop": {"step": 2}})
    assert not (tmp_path / "latest.old").exists() and not (tmp_path / "latest.tmp").exists()
    # simulate a kill between the two renames: only latest.old (complete) and a torn latest.tmp
    (tmp_path / "latest").rename(tmp_path / "latest.old")
    (tmp_path / "latest.tmp").mkdir()
    found = checkpoint.find(tmp_path / "latest")
    assert found == tmp_path / "latest.old" and checkpoint.read_state(found)["loop"]["step"] == 2
    assert checkpoint.find(tmp_path / "nothing") is None


def test_read_jsonl_ignores_only_a_torn_last_line(tmp_path):
    p = tmp_path / "m.jsonl"
    append_jsonl(p, {"step": 1})
    append_jsonl(p, {"step": 2, "x": float("nan")})
    with open(p, "a") as fh:
        fh.write('{"step": 3, "trai')
    rows = read_jsonl(p)
    assert [r["step"] for r in rows] == [1, 2]
    atomic_write_text(p, '{"step": 1}\n{bad\n{"step": 3}\n')
    with pytest.raises(ValueError, match="line 2"):
        read_jsonl(p)
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_unknown_logger_and_missing_extra(tmp_path, monkeypatch):
    import sys

    from normlab.run.train_config import TrainConfig
    from normlab.train.loggers import make_loggers, require_loggers

    # The config layer sits below training and takes any name; the run's start (train.plan calls
    # require_loggers) refuses an unknown one, listing the valid names.
    names = TrainConfig(loggers=["csv"]).loggers
    with pytest.raises(ConfigError, match="train.loggers.*valid: jsonl, tensorboard, wandb"):
        require_loggers(names)
    for extra in ("tensorboard", "wandb"):
        monkeypatch.setitem(sys.modules, extra, None)  # import now fails as if not installed
        with pytest.raises(UserError, match=rf"pip install 'normlab\[{extra}\]'"):
            make_loggers([extra], tmp_path, {}, lambda step, metrics: None)


def test_tensorboard_logger_writes_events(tmp_path, tiny):
    pytest.importorskip("tensorboard")
    from normlab.train import run_training

    run_training(tiny.cfg("train.steps=5", 'train.loggers=["tensorboard"]'), tmp_path / "run", quiet=True)
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 1  # jsonl still on
