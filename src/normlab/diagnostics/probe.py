"""``normlab probe``: gradient and forward statistics at initialisation (docs/diagnostics.md).

One model per placement x depth x seed; per model one forward (with capture hooks), one
backward for every gradient (weights and residual stream together) and ``n_proj`` extra
vector-Jacobian products for the end-to-end Jacobian norms. Rows are long-format dicts
with the columns of :data:`COLUMNS`. Fits over the rows are in ``normlab.diagnostics.fits``.

Row conventions: ``layer`` of a weight is its 1-based block; the residual stream x_l
(sublayer ``stream``) uses l = 0 for the embedding output and l = L for the last block's
output, so block l maps x_{l-1} to x_l.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from normlab.core.schema import Section, doc
from normlab.data import load_corpus
from normlab.data.config import DataConfig
from normlab.diagnostics.capture import probe_capture
from normlab.diagnostics.catalogue import STATISTICS
from normlab.diagnostics.rows import COLUMNS as COLUMNS  # the probe's columns (others import them from here)
from normlab.diagnostics.rows import computed
from normlab.diagnostics.rows import write_csv as write
from normlab.diagnostics.statistic import chosen
from normlab.diagnostics.subject import as_subject
from normlab.model.build import resolve_model
from normlab.model.config import ModelConfig
from normlab.model.transformer import TransformerLM


@dataclass
class ProbeConfig(Section):
    """A grid of freshly initialised models to probe."""

    section = "probe"
    placements: list[str] = doc("placements to compare", ["post", "pre"])
    depths: list[int] = doc("numbers of blocks L", [2, 4, 8, 16, 32])
    d_model: int = doc("width d", 128)
    n_head: int = doc("attention heads", 4)
    d_ff: int | None = doc("FFN width (none = 4*d_model)", None)
    init: str = doc("weight init (Xiong et al. 2020 analyse xavier)", "xavier")
    norm: str = doc("norm used by the placements", "layernorm")
    seeds: int = doc("seeds first_seed..first_seed+seeds-1 per configuration", 5)
    first_seed: int = doc("the first seed (a confirmatory claims run registers seeds no earlier run used)", 0)
    batches: int = doc("batches per seed (concatenated into one loss)", 1)
    batch_size: int = doc("sequences per batch", 8)
    context: int = doc("tokens per sequence", 64)
    data: str = doc("'tinyshakespeare' (random windows of the corpus) or 'random' (uniform tokens)",
                    "tinyshakespeare")
    n_proj: int = doc("random projections for the Jacobian norm (0 = skip it)", 2)
    sharpness_iters: int = doc("power iterations for the sharpness, the top Hessian eigenvalue of the loss (0 = skip "
                               "it; each iteration costs about two backward passes)", 0, omit_default=True)

    def __post_init__(self) -> None:
        self.check(len(self.placements) > 0, "placements", "name at least one placement, e.g. post,pre")
        self.check(len(self.depths) > 0 and min(self.depths) >= 1, "depths", "list depths >= 1, e.g. 2,4,8")
        for name in ("seeds", "batches", "batch_size", "d_model", "n_head"):
            self.check(getattr(self, name) >= 1, name, "must be >= 1")
        self.check(self.first_seed >= 0, "first_seed", "must be >= 0")
        self.check(self.context >= 2, "context", "must be >= 2 (token cosine needs two positions)")
        self.check(self.n_proj >= 0, "n_proj", "must be >= 0")
        self.check(self.sharpness_iters >= 0, "sharpness_iters", "must be >= 0 (0 = skip the sharpness), e.g. 20")
        self.check(self.data in ("tinyshakespeare", "random"), "data", "use tinyshakespeare or random")

        for p in self.placements:  # fail now, naming the bad value, not after minutes of probing
            resolve_model(self.model_config(p, 1))

    def model_config(self, placement: str, n_layer: int, vocab_size: int = 65) -> Any:
        return ModelConfig(vocab_size=vocab_size, context=self.context, n_layer=n_layer, d_model=self.d_model,
                           n_head=self.n_head, d_ff=self.d_ff, placement=placement, norm=self.norm,
                           init=self.init, dropout=0.0)


def load_tokens(data: str, data_dir: str | None = None) -> tuple[torch.Tensor | None, int]:
    """Training tokens (1-D int64) and vocabulary size; (None, 65) for ``random``.

    The corpus comes from ``normlab.data.load_corpus`` (``data_dir`` / $NORMLAB_DATA_DIR),
    as for training, so probe batches and training batches are the same tokens.
    """
    if data == "random":
        return None, 65
    corpus = load_corpus(DataConfig(data_dir=data_dir))
    # a writable copy: the corpus array may be a read-only memory map
    return torch.from_numpy(np.array(corpus.train, dtype=np.int64)), int(corpus.vocab_size)


def sample_batch(tokens: torch.Tensor | None, vocab: int, n: int, T: int,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(idx, targets), each (n, T): random corpus windows, or uniform random tokens."""
    if tokens is None:
        seq = torch.randint(0, vocab, (n, T + 1), generator=gen)
    else:
        start = torch.randint(0, len(tokens) - T - 1, (n,), generator=gen)
        seq = torch.stack([tokens[s: s + T + 1] for s in start.tolist()])
    return seq[:, :-1], seq[:, 1:]


def probe_model(model: Any, idx: torch.Tensor, targets: torch.Tensor, n_proj: int = 2,
                gen: torch.Generator | None = None, sharpness_iters: int = 0,
                seed: int = 0) -> list[tuple[int, str, str, str, float]]:
    """Every registered probe statistic of one model on one batch: rows (layer, sublayer,
    param, metric, value); the statistics come from ``normlab.diagnostics.catalogue``.

    ``model``: a lab ``TransformerLM``, a ``normlab.inspect.Subject`` (any causal LM, built
    by ``normlab.inspect.subject_from_module``), or any other ``nn.Module``, which is made a
    subject with the blocks and embedding found for it. ``targets`` are the next tokens.
    ``sharpness_iters`` > 0: also the sharpness, by that many power iterations from a start
    seeded with ``seed``."""

    wanted = [s for _, s in STATISTICS.items() if "probe" in s.tools]
    needs = set().union(*(s.needs for s in wanted))
    c = probe_capture(as_subject(model), idx, targets, n_proj, gen, needs, sharpness_iters, seed)
    # the statistics of the backward pass one after another, then the others position by
    # position: the order probe.csv has always had
    return computed(chosen(wanted, "probe", c.provided), c, frozenset({"param_grads", "stream_grads", "jacobian"}))


def run_probe(cfg: ProbeConfig, data_dir: str | None = None, progress: Any = None) -> list[dict[str, Any]]:
    """Probe every placement x depth x seed; returns long-format rows (dicts over COLUMNS).

    Seed s fixes the weights (``torch.manual_seed(s)`` before building each model) and the
    batch, which is shared by every placement and depth of that seed: comparisons are paired.
    """

    tokens, vocab = load_tokens(cfg.data, data_dir)
    rows: list[dict[str, Any]] = []
    for seed in range(cfg.first_seed, cfg.first_seed + cfg.seeds):
        gen = torch.Generator().manual_seed(1_000_003 * seed + 17)
        idx, tgt = sample_batch(tokens, vocab, cfg.batch_size * cfg.batches, cfg.context, gen)
        for placement in cfg.placements:
            for L in cfg.depths:
                torch.manual_seed(seed)
                model = TransformerLM(cfg.model_config(placement, L, vocab))
                jgen = torch.Generator().manual_seed(seed)
                for layer, sub, param, metric, value in probe_model(model, idx, tgt, cfg.n_proj, jgen,
                                                                    cfg.sharpness_iters, seed):
                    rows.append({"placement": placement, "init": cfg.init, "n_layer": L, "d_model": cfg.d_model,
                                 "seed": seed, "layer": layer, "sublayer": sub, "param": param,
                                 "metric": metric, "value": value})
                if progress:
                    progress(placement, L, seed)
    return rows


def write_csv(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Long-format CSV with the columns of COLUMNS (floats with full precision)."""

    write(rows, path)
