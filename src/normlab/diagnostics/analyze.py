"""``normlab analyze RUN``: what a trained model's layers do (claim pre-collapse in docs/theory.md).

- layer deletion: validation loss with block l skipped (its input passed on unchanged);
  a small increase means the block is nearly redundant (Gromov et al. 2024; Men et al. 2024);
- angular distance arccos(cos(x_i, x_j))/pi between stream states, averaged over tokens
  (Gromov et al. 2024), for every pair i, j of x_0..x_L;
- block influence 1 - mean_t cos(x_{l-1}, x_l) of each block (ShortGPT, Men et al. 2024);
- linear CKA (Kornblith et al. 2019) between every pair of stream states, tokens as samples.

Each is a registered statistic whose ``tools`` name ``analyze`` (``diagnostics/catalogue.py``);
this module captures what they need and writes their rows with ``diagnostics/rows.py``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import torch

from normlab.core.fsutil import atomic_write_text
from normlab.data.batches import val_batches
from normlab.data.record import load_located
from normlab.diagnostics.capture import deletion_losses, mean_loss, stream_states
from normlab.diagnostics.catalogue import STATISTICS
from normlab.diagnostics.rows import PAIR_COLUMNS, computed, long_rows, pair_rows, results, write_csv
from normlab.diagnostics.statistic import Captured, StreamStates, chosen
from normlab.diagnostics.subject import as_subject
from normlab.run.dir import RunDir, note_if_written
from normlab.run.outdir import ANALYSIS_CSV, ANALYSIS_JSON, PAIRS_CSV, OutDir


def load_run_model(run_dir: str | Path, checkpoint: str = "best") -> tuple[Any, Any]:
    """(model in eval mode, RunConfig) from RUN/checkpoints/<checkpoint> (latest when the run has no
    best). A damaged checkpoint is an error naming it, never passed over for the other one."""
    model, cfg, _ = RunDir(run_dir).load_model(checkpoint)  # hash-checked against the manifest first
    return model, cfg


@torch.no_grad()
def analyze_values(model: Any, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> list[tuple[Any, ...]]:
    """Every registered ``analyze`` statistic of ``model`` over ``batches``, as
    (layer, sublayer, param, metric, value): what one no-grad forward per batch (stream
    x_0..x_L, loss) and one more per block (that block skipped: deletion loss) capture,
    through inspect's capture (``diagnostics/capture.py``): the model as a Subject, its
    targets already shifted (the run's own next-token batches)."""

    subject = as_subject(model)
    L = len(subject.layers)

    def ce(logits: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten())

    base = mean_loss(subject, batches, ce)
    deletion = deletion_losses(subject, batches, ce)
    # the loss in float64, so that the deletion deltas are the differences of the floats
    c = Captured(n_layer=L, stream=StreamStates(stream_states(subject, batches)),
                 loss=torch.tensor(base, dtype=torch.float64), measured={"deletion": deletion})
    c.provided = {"stream", "loss", "deletion"}
    stats = chosen([s for _, s in STATISTICS.items()], "analyze", c.provided)
    return computed(stats, c, by_layer=True, double=True)


def analyze_model(model: Any, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, Any]:
    """{metric: value} of ``analyze_values``: deletion losses, pairwise angular distance and
    CKA of x_0..x_L, and every other registered ``analyze`` statistic."""

    return results(analyze_values(model, batches))


def analysis_rows(values: list[tuple[Any, ...]], cfg: Any) -> tuple[list[dict], list[dict]]:
    """(per-layer rows in the probe's long format, pairwise rows layer_a, layer_b, metric, value)."""

    m = cfg.model
    base = {"placement": json.dumps(m.placement) if not isinstance(m.placement, str) else m.placement,
            "init": m.init, "n_layer": m.n_layer, "d_model": m.d_model, "seed": cfg.seed}
    rows = long_rows(base, values)
    return [r for r in rows if r["sublayer"] != "pair"], pair_rows(rows)


def analyze_run(run_dir: str | Path, checkpoint: str = "best", n_batches: int = 4, batch_size: int = 8,
                out: str | Path | None = None, data_dir: str | None = None) -> dict[str, Any]:
    """Analyse a run on its fixed validation batches; writes analysis.csv, layer_pairs.csv, analysis.json
    (with ``checkpoint``: the name, step and weights' sha256 it measured) into OUT (default
    RUN/analysis). Writing inside RUN holds RUN (``RunDir.writing``: refused while a training
    writes it); OUT is held as an ``analysis`` folder (``normlab.run.outdir``).
    The run's own corpus is read (``normlab.data.record``: ``data_dir`` is where it was moved)."""

    flag = "--out" if out else "RUN"
    out = Path(out) if out else RunDir(run_dir).analysis_dir
    with contextlib.ExitStack() as held:
        if out.resolve().is_relative_to(Path(run_dir).resolve()):
            held.enter_context(RunDir(run_dir).writing("RUN", other="give --out DIR outside the run"))
        else:
            note_if_written(run_dir, "analyze")  # only read: it never locks, and says so
        held.enter_context(OutDir(out, "analysis").writing(flag))
        return _analyze_into(run_dir, checkpoint, n_batches, batch_size, out, data_dir)


def _analyze_into(run_dir: str | Path, checkpoint: str, n_batches: int, batch_size: int, out: Path,
                  data_dir: str | None) -> dict[str, Any]:
    # asked before loading: should newer weights land in between, the record names the older
    # ones and the next report measures again, never the other way round
    measured = RunDir(run_dir).checkpoint_identity(checkpoint)
    model, cfg = load_run_model(run_dir, checkpoint)
    corpus = load_located(cfg.data, RunDir(run_dir).data_record(), data_dir)
    batches = val_batches(corpus.val, model.cfg.context, batch_size, n_batches)
    values = analyze_values(model, batches)
    res = results(values)
    rows, pairs = analysis_rows(values, cfg)
    folder = OutDir(out, "analysis")
    write_csv(rows, folder.file(ANALYSIS_CSV))
    write_csv(pairs, folder.file(PAIRS_CSV), PAIR_COLUMNS)
    # which weights were measured (name, step, sha256): a page tells a stale analysis by it
    atomic_write_text(folder.file(ANALYSIS_JSON), json.dumps({**res, "checkpoint": measured}, indent=2))
    return res
