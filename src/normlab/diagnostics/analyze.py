"""``normlab analyze RUN``: what a trained model's layers do (claim pre-collapse in docs/theory.md).

- layer deletion: validation loss with block l skipped (its input passed on unchanged);
  a small increase means the block is nearly redundant (Gromov et al. 2024; Men et al. 2024);
- angular distance arccos(cos(x_i, x_j))/pi between stream states, averaged over tokens
  (Gromov et al. 2024), for every pair i, j of x_0..x_L;
- block influence 1 - mean_t cos(x_{l-1}, x_l) of each block (ShortGPT, Men et al. 2024);
- linear CKA (Kornblith et al. 2019) between every pair of stream states, tokens as samples.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch


def load_run_model(run_dir: str | Path, checkpoint: str = "best") -> tuple[Any, Any]:
    """(model in eval mode, RunConfig) from RUN/checkpoints/<checkpoint> (latest when the run has no
    best). A damaged checkpoint is an error naming it, never passed over for the other one."""
    from normlab.rundir import RunDir

    model, cfg, _ = RunDir(run_dir).load_model(checkpoint)  # hash-checked against the manifest first
    return model, cfg


@torch.no_grad()
def analyze_model(model: Any, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, Any]:
    """Deletion losses, and pairwise angular distance / CKA of x_0..x_L over ``batches``."""
    from normlab.diagnostics import stats
    from normlab.model.capture import main_stream

    L = len(model.blocks)

    def loss_without(skip: int | None) -> float:
        tot = 0.0
        for idx, tgt in batches:
            logits = model.run(idx, skip=() if skip is None else (skip,))
            tot += torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten()).item()
        return tot / len(batches)

    base = loss_without(None)
    deletion = [loss_without(i) for i in range(L)]
    xs: list[list[torch.Tensor]] = [[] for _ in range(L + 1)]
    for idx, _ in batches:
        states: list = []
        model.run(idx, states=states)
        for i, h in enumerate(states):
            xs[i].append(main_stream(h))
    stream = [torch.cat(x) for x in xs]  # each (B_total, T, d)
    angle = [[stats.angular_distance(a, b).item() for b in stream] for a in stream]
    cka = [[stats.linear_cka(a.flatten(0, 1), b.flatten(0, 1)).item() for b in stream] for a in stream]
    influence = [stats.block_influence(stream[i], stream[i + 1]).item() for i in range(L)]
    return {"val_loss": base, "deletion_loss": deletion, "block_influence": influence,
            "angular_distance": angle, "cka": cka}


def analysis_rows(res: dict[str, Any], cfg: Any) -> tuple[list[dict], list[dict]]:
    """(per-layer rows in the probe's long format, pairwise rows layer_a, layer_b, metric, value)."""
    m = cfg.model
    base = {"placement": json.dumps(m.placement) if not isinstance(m.placement, str) else m.placement,
            "init": m.init, "n_layer": m.n_layer, "d_model": m.d_model, "seed": cfg.seed}
    rows = [{**base, "layer": 0, "sublayer": "model", "param": "all", "metric": "val_loss", "value": res["val_loss"]}]
    for li, (dl, bi) in enumerate(zip(res["deletion_loss"], res["block_influence"]), start=1):
        rows.append({**base, "layer": li, "sublayer": "block", "param": "all", "metric": "deletion_loss", "value": dl})
        rows.append({**base, "layer": li, "sublayer": "block", "param": "all", "metric": "deletion_delta",
                     "value": dl - res["val_loss"]})
        rows.append({**base, "layer": li, "sublayer": "block", "param": "all", "metric": "block_influence", "value": bi})
        rows.append({**base, "layer": li, "sublayer": "block", "param": "all", "metric": "angular_distance",
                     "value": res["angular_distance"][li - 1][li]})
    pairs = [{"layer_a": i, "layer_b": j, "metric": key, "value": res[key][i][j]}
             for key in ("angular_distance", "cka") for i in range(len(res[key])) for j in range(len(res[key]))]
    return rows, pairs


def analyze_run(run_dir: str | Path, checkpoint: str = "best", n_batches: int = 4, batch_size: int = 8,
                out: str | Path | None = None) -> dict[str, Any]:
    """Analyse a run on its fixed validation batches; writes analysis.csv, layer_pairs.csv, analysis.json."""
    import csv
    import io

    from normlab.data import load_corpus
    from normlab.data.batches import val_batches
    from normlab.diagnostics.probe import COLUMNS
    from normlab.fsutil import atomic_write_text

    model, cfg = load_run_model(run_dir, checkpoint)
    corpus = load_corpus(cfg.data)
    batches = val_batches(corpus.val, model.cfg.context, batch_size, n_batches)
    res = analyze_model(model, batches)
    rows, pairs = analysis_rows(res, cfg)
    out = Path(out) if out else Path(run_dir) / "analysis"
    for name, data, cols in (("analysis.csv", rows, COLUMNS), ("layer_pairs.csv", pairs,
                                                                ("layer_a", "layer_b", "metric", "value"))):
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        w.writerows(data)
        atomic_write_text(out / name, buf.getvalue())
    atomic_write_text(out / "analysis.json", json.dumps(res, indent=2))
    return res
