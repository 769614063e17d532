"""The monitors reach every tool that can compute them: probe rows (against a full Hessian and
the attention's own probabilities), a tiny training run's diagnostics.jsonl at their cadences,
and `normlab inspect` rows of that run, which leaves out, without failing, what one checkpoint
cannot have (an update, the optimizer's state)."""

from __future__ import annotations

import csv

import pytest
import torch

from normlab import ModelConfig, TransformerLM
from normlab.core.errors import ConfigError
from normlab.core.fsutil import read_jsonl
from normlab.diagnostics.catalogue import STATISTICS
from normlab.diagnostics.probe import probe_model
from normlab.diagnostics.statistic import chosen

PER_STEP = ("update_rms", "update_rms_ratio", "adam_m_rms", "adam_sqrt_v_rms", "attn_head_entropy")
CURVATURE = ("sharpness", "precond_sharpness")
ONE_CHECKPOINT_CANNOT = ("update_rms", "update_rms_ratio", "adam_m_rms", "adam_sqrt_v_rms", "precond_sharpness")


def _tiny() -> tuple[TransformerLM, torch.Tensor, torch.Tensor]:
    """Few enough parameters (about 400) for the full Hessian."""
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=7, context=5, n_layer=1, d_model=4, n_head=2, d_ff=8,
                                      placement="pre", init="xavier")).double()
    g = torch.Generator().manual_seed(3)
    return model, torch.randint(0, 7, (2, 5), generator=g), torch.randint(0, 7, (2, 5), generator=g)


def _full_hessian_top(model: TransformerLM, idx: torch.Tensor, tgt: torch.Tensor) -> float:
    names = [n for n, p in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    flat0 = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def loss(flat: torch.Tensor) -> torch.Tensor:
        parts, i = {}, 0
        for n, s in zip(names, shapes):
            parts[n] = flat[i:i + s.numel()].view(s)
            i += s.numel()
        return torch.func.functional_call(model, parts, (idx, tgt))[1]

    for b in model.blocks:  # the explicit attention (plain ops: a second derivative exists)
        b.attn.branch.record = True
    try:
        h = torch.autograd.functional.hessian(loss, flat0)
    finally:
        for b in model.blocks:
            b.attn.branch.record = False
    return float(torch.linalg.eigvalsh(h).max())


def test_probe_rows_hold_the_sharpness_and_each_heads_entropy() -> None:
    model, idx, tgt = _tiny()
    rows = {(li, s, p, m): v for li, s, p, m, v in probe_model(model, idx, tgt, n_proj=0, sharpness_iters=300)}
    assert rows[(0, "model", "sharpness", "sharpness")] == pytest.approx(_full_hessian_top(model, idx, tgt), rel=1e-4)
    a = model.blocks[0].attn.branch
    a.record = True
    with torch.no_grad():
        model(idx)
    a.record = False
    heads = {k: v for k, v in rows.items() if k[3] == "attn_head_entropy"}
    assert sorted(heads) == [(1, "attn", f"head{h}", "attn_head_entropy") for h in range(2)]
    assert [heads[(1, "attn", f"head{h}", "attn_head_entropy")] for h in range(2)] == pytest.approx(
        a.stats["head_entropy"].tolist(), rel=1e-6)
    # without the option: no sharpness row, and every other row as it was (the attention's second
    # forward leaves the first, fast one alone)
    without = probe_model(model, idx, tgt, n_proj=0)
    assert [r for r in without if r[3] == "sharpness"] == []
    assert without == [(li, s, p, m, v) for (li, s, p, m), v in rows.items() if m != "sharpness"]
    # at initialisation there is no step and no optimizer: the probe computes none of those
    assert not {k[3] for k in rows} & set(ONE_CHECKPOINT_CANNOT)


def _rows(path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_training_lines_and_inspect_rows_hold_the_monitors(tmp_path, data_dir) -> None:
    from normlab.inspect import inspect_model
    from normlab.run.resolve import resolve
    from normlab.train import run_training

    cfg = resolve(None, None, "pre", ["model.n_layer=2", "model.d_model=16", "model.n_head=2", "model.context=16",
                                      "train.batch_size=2", "train.steps=4", "train.eval_every=4",
                                      "train.eval_batches=1", "train.log_every=2", "train.threads=1",
                                      "train.diag_every=1", "train.sharpness_every=2", "train.sharpness_iters=3",
                                      f"data.data_dir={data_dir}"])
    run = tmp_path / "run"
    run_training(cfg, run, quiet=True)
    lines = read_jsonl(run / "diagnostics.jsonl")
    assert [r["step"] for r in lines] == [1, 2, 3, 4]
    for r in lines:
        assert all(k in r for k in PER_STEP), [k for k in PER_STEP if k not in r]
        assert len(r["update_rms"]) == len(r["adam_m_rms"]) == 4        # embeddings, 2 blocks, final norm/head
        assert len(r["attn_head_entropy"]) == 2 * 2                       # L x H, block 1's heads first
        assert 0 < r["update_rms"][1] and 0 < r["adam_sqrt_v_rms"][1]
        # the sharpness on its own cadence only (every 2nd step), both of them
        assert all((k in r) == (r["step"] % 2 == 0) for k in CURVATURE)
    assert all(r["sharpness"] > 0 and r["precond_sharpness"] > 0 for r in lines if r["step"] % 2 == 0)

    out = tmp_path / "inspect"
    inspect_model(str(run), out, str(data_dir / "tinyshakespeare.txt"), context=16, max_tokens=32, quiet=True,
                  sharpness_iters=3)
    rows = _rows(out / "probe.csv")
    metrics = {r["metric"] for r in rows}
    assert {"sharpness", "attn_head_entropy"} <= metrics
    heads = [(r["layer"], r["param"]) for r in rows if r["metric"] == "attn_head_entropy"]
    assert heads == [("1", "head0"), ("1", "head1"), ("2", "head0"), ("2", "head1")]
    assert not metrics & set(ONE_CHECKPOINT_CANNOT)  # left out, not failed
    # the registry says why: they need what only training captures
    for name in ONE_CHECKPOINT_CANNOT:
        assert STATISTICS.get(name).needs & {"update", "optimizer"}
    provided = {"stream", "loss", "attention", "hessian", "deletion", "state_grads", "block_grads", "log_z",
                "max_logit", "param_stats", "grad_stats"}
    inspected = {s.key for s in chosen([s for _, s in STATISTICS.items()], "inspect", provided)}
    assert "sharpness" in inspected and not inspected & set(ONE_CHECKPOINT_CANNOT)


def test_sharpness_cadence_must_fall_on_diagnostics_steps() -> None:
    from normlab.run.train_config import TrainConfig

    with pytest.raises(ConfigError, match="train.sharpness_every"):
        TrainConfig(diag_every=10, sharpness_every=15)
    with pytest.raises(ConfigError, match="train.sharpness_every"):
        TrainConfig(diag_every=0, sharpness_every=10)
    with pytest.raises(ConfigError, match="train.sharpness_iters"):
        TrainConfig(diag_every=10, sharpness_every=20, sharpness_iters=0)
    assert TrainConfig(diag_every=10, sharpness_every=20).sharpness_iters == 20
    # unset, the options leave a config (and a study trial's id) as it was
    assert "sharpness_every" not in TrainConfig().to_dict()
