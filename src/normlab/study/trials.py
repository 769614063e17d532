"""What one trial of a study does: a name in ``TRIALS`` or a ``"module:function"`` path.

A trial function is ``fn(cfg: RunConfig, run_dir: Path, *, resume: bool) -> dict``: it
fills ``run_dir`` (the training run contract) and returns the summary dict, whose
``status`` is completed, diverged, failed or interrupted. Raising an exception is a
failure (retried by the store). Workers import the function by name, so it crosses
process and Ray boundaries without pickling code.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from normlab.core.errors import ConfigError
from normlab.core.lazy import load_object
from normlab.diagnostics.probe import load_tokens, probe_model, sample_batch, write_csv
from normlab.model.build import lab_internals
from normlab.model.transformer import TransformerLM
from normlab.run.dir import RunDir
from normlab.study.registries import TRIALS, TrialFn
from normlab.train import run_training

if TYPE_CHECKING:
    from normlab.run.resolve import RunConfig

def train(cfg: RunConfig, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """Train one model with ``normlab.train.run_training`` (resuming from its checkpoint)."""

    return run_training(cfg, run_dir, resume=resume, quiet=True)


def load_trial(name: str) -> TrialFn:
    """Resolve a trial name in the worker process."""
    if ":" not in name:
        return TRIALS.get(name)
    try:  # a module the user names (the spec's `trial = "module:function"`), not a dependency of ours
        fn = load_object(name)
    except (ImportError, AttributeError) as e:
        raise ConfigError("trial", name, f"cannot import it ({e}); is the module on PYTHONPATH?") from None
    if not callable(fn):
        raise ConfigError("trial", name, "is not a function")
    return fn


def probe(cfg: RunConfig, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """Probe one freshly initialised model (``normlab.diagnostics.probe``): gradient and forward
    statistics at init, no training. Same batch and weights as ``normlab probe`` for that seed,
    so study trials and probe runs are paired. Writes RUN/probe.csv, config.json, summary.json."""
    import torch

    if not lab_internals(cfg.model):
        raise ConfigError("model.impl", cfg.model.impl, "a probe trial reads the lab model's blocks; "
                          "probe model.impl='normlab'")
    run_dir = Path(run_dir)
    tokens, vocab = load_tokens("tinyshakespeare", cfg.data.data_dir)
    seed, m = cfg.seed, cfg.model
    gen = torch.Generator().manual_seed(1_000_003 * seed + 17)  # normlab probe's batch for this seed
    idx, tgt = sample_batch(tokens, vocab, cfg.train.batch_size, m.context, gen)
    torch.manual_seed(seed)
    import dataclasses

    model = TransformerLM(dataclasses.replace(m, vocab_size=vocab))
    rows = [{"placement": str(m.placement), "init": m.init, "n_layer": m.n_layer, "d_model": m.d_model,
             "seed": seed, "layer": layer, "sublayer": sub, "param": param, "metric": metric, "value": value}
            for layer, sub, param, metric, value in probe_model(model, idx, tgt, 2, torch.Generator().manual_seed(seed))]
    run = RunDir(run_dir)
    run.write_config(cfg)  # a probe trial is a run directory too (config.json, summary.json)
    write_csv(rows, run.probe_csv)
    pick = {(r["layer"], r["param"], r["metric"]): r["value"] for r in rows}
    summary = {"status": "completed", "steps": 0, "seed": seed, "placement": m.placement,
               "w2_grad_last": pick.get((m.n_layer, "W_2", "grad_norm")),
               "loss_at_init": pick.get((0, "loss", "loss")), "best_val_loss": None}
    run.write_summary(summary)
    return summary
