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

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from normlab.schema import Section, doc

COLUMNS = ("placement", "init", "n_layer", "d_model", "seed", "layer", "sublayer", "param", "metric", "value")


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
    seeds: int = doc("seeds 0..seeds-1 per configuration", 5)
    batches: int = doc("batches per seed (concatenated into one loss)", 1)
    batch_size: int = doc("sequences per batch", 8)
    context: int = doc("tokens per sequence", 64)
    data: str = doc("'tinyshakespeare' (random windows of the corpus) or 'random' (uniform tokens)",
                    "tinyshakespeare")
    n_proj: int = doc("random projections for the Jacobian norm (0 = skip it)", 2)

    def __post_init__(self) -> None:
        self.check(len(self.placements) > 0, "placements", "name at least one placement, e.g. post,pre")
        self.check(len(self.depths) > 0 and min(self.depths) >= 1, "depths", "list depths >= 1, e.g. 2,4,8")
        for name in ("seeds", "batches", "batch_size", "d_model", "n_head"):
            self.check(getattr(self, name) >= 1, name, "must be >= 1")
        self.check(self.context >= 2, "context", "must be >= 2 (token cosine needs two positions)")
        self.check(self.n_proj >= 0, "n_proj", "must be >= 0")
        self.check(self.data in ("tinyshakespeare", "random"), "data", "use tinyshakespeare or random")
        from normlab.model.build import resolve_model

        for p in self.placements:  # fail now, naming the bad value, not after minutes of probing
            resolve_model(self.model_config(p, 1))

    def model_config(self, placement: str, n_layer: int, vocab_size: int = 65) -> Any:
        from normlab.model.config import ModelConfig

        return ModelConfig(vocab_size=vocab_size, context=self.context, n_layer=n_layer, d_model=self.d_model,
                           n_head=self.n_head, d_ff=self.d_ff, placement=placement, norm=self.norm,
                           init=self.init, dropout=0.0)


def load_tokens(data: str, data_dir: str | None = None) -> tuple[torch.Tensor | None, int]:
    """Training tokens (1-D int64) and vocabulary size; (None, 65) for ``random``.

    Uses ``normlab.data.load_corpus`` when the data package provides it; otherwise reads
    tinyshakespeare.txt from ``data_dir`` / $NORMLAB_DATA_DIR with a character vocabulary.
    """
    if data == "random":
        return None, 65
    try:
        from normlab.data import load_corpus  # type: ignore[attr-defined]
    except ImportError:
        load_corpus = None
    if load_corpus is not None:
        from normlab.data.config import DataConfig

        corpus = load_corpus(DataConfig(data_dir=data_dir))
        import numpy as np

        # a writable copy: the corpus array may be a read-only memory map
        return torch.from_numpy(np.array(corpus.train, dtype=np.int64)), int(corpus.vocab_size)
    from normlab.errors import UserError

    d = data_dir or os.environ.get("NORMLAB_DATA_DIR")
    path = Path(d) / "tinyshakespeare.txt" if d else None
    if path is None or not path.exists():
        raise UserError("tinyshakespeare.txt not found: set NORMLAB_DATA_DIR to its directory, "
                        "or use --data random")
    text = path.read_text(encoding="utf-8")
    chars = sorted(set(text))
    lut = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([lut[c] for c in text[: int(0.9 * len(text))]], dtype=torch.long)
    return ids, len(chars)


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
                gen: torch.Generator | None = None) -> list[tuple[int, str, str, str, float]]:
    """All statistics of one model on one batch: rows (layer, sublayer, param, metric, value)."""
    from normlab.diagnostics import stats
    from normlab.model.capture import capture

    keys: list[tuple[int, str, str, str]] = []
    vals: list[torch.Tensor] = []  # 0-d tensors, read back in one transfer at the end

    def add(layer: int, sub: str, param: str, metric: str, v: torch.Tensor) -> None:
        keys.append((layer, sub, param, metric))
        vals.append(v.detach().float().reshape(()))

    with capture(model) as cap:
        _, loss = model(idx, targets)
    L = len(model.blocks)
    params, pkeys = [], []
    for li, block in enumerate(model.blocks, start=1):
        for sub in ("attn", "ffn"):
            for pname, p in getattr(block, sub).named_parameters():
                if pname.startswith("branch.") and pname.endswith("weight") and p.dim() == 2:
                    continue  # the matrices are split below into W_Q, W_K, ...
                params.append(p)
                pkeys.append((li, sub, pname.removeprefix("branch.")))
        params += [block.attn.branch.qkv.weight, block.attn.branch.proj.weight,
                   block.ffn.branch.fc.weight, block.ffn.branch.proj.weight]
        pkeys += [(li, "attn", "qkv"), (li, "attn", "W_O"), (li, "ffn", "W_1"), (li, "ffn", "W_2")]
    grads = torch.autograd.grad(loss, params + list(cap.block_in), retain_graph=n_proj > 0, allow_unused=True)
    pgrads, sgrads = grads[: len(params)], grads[len(params):]
    dev = loss.device  # everything stays on the model's device until the one read-back
    per_layer = torch.zeros(L + 1, device=dev)
    sq = torch.stack([g.pow(2).sum() if g is not None else torch.zeros((), device=dev) for g in pgrads])
    for (li, sub, pname), g, s in zip(pkeys, pgrads, sq):
        per_layer[li] += s
        if pname == "qkv" and g is not None:
            for i, part in enumerate(("W_Q", "W_K", "W_V")):
                add(li, sub, part, "grad_norm", torch.linalg.matrix_norm(g.chunk(3, dim=0)[i]))
        else:
            add(li, sub, pname, "grad_norm", s.sqrt())
    for li in range(1, L + 1):
        add(li, "block", "all", "grad_norm", per_layer[li].sqrt())
    xs = cap.stream  # x_0 .. x_L
    for li, g in enumerate(sgrads):
        add(li, "stream", "x", "grad_norm", g.norm())
    if n_proj > 0:
        jac = stats.jacobian_rms(cap.block_out[-1], cap.block_in, n_proj, gen)
        for li in range(L):
            add(li, "stream", "x", "jac_rms_to_last", jac[li])
    for li, x in enumerate(xs):
        add(li, "stream", "x", "mean_sq", stats.mean_sq(x))
        add(li, "stream", "x", "max_abs", stats.max_abs(x))
        add(li, "stream", "x", "token_cos", stats.token_cosine(x))
        if li < L:
            add(li, "stream", "x", "cos_next", stats.cosine(x, xs[li + 1]))
    for name, x in cap.norm_in.items():
        parts = name.split(".")
        if parts[0] == "blocks":
            layer, sub, param = int(parts[1]) + 1, parts[2], ".".join(parts[3:])
        else:
            layer, sub, param = L, "final", name
        add(layer, sub, param + ".input", "mean_sq", stats.mean_sq(x))
        add(layer, sub, param + ".input", "max_abs", stats.max_abs(x))
    add(0, "model", "loss", "loss", loss)
    values = torch.stack(vals).tolist()
    return [(*k, v) for k, v in zip(keys, values)]


def run_probe(cfg: ProbeConfig, data_dir: str | None = None, progress: Any = None) -> list[dict[str, Any]]:
    """Probe every placement x depth x seed; returns long-format rows (dicts over COLUMNS).

    Seed s fixes the weights (``torch.manual_seed(s)`` before building each model) and the
    batch, which is shared by every placement and depth of that seed: comparisons are paired.
    """
    from normlab.model.transformer import TransformerLM

    tokens, vocab = load_tokens(cfg.data, data_dir)
    rows: list[dict[str, Any]] = []
    for seed in range(cfg.seeds):
        gen = torch.Generator().manual_seed(1_000_003 * seed + 17)
        idx, tgt = sample_batch(tokens, vocab, cfg.batch_size * cfg.batches, cfg.context, gen)
        for placement in cfg.placements:
            for L in cfg.depths:
                torch.manual_seed(seed)
                model = TransformerLM(cfg.model_config(placement, L, vocab))
                jgen = torch.Generator().manual_seed(seed)
                for layer, sub, param, metric, value in probe_model(model, idx, tgt, cfg.n_proj, jgen):
                    rows.append({"placement": placement, "init": cfg.init, "n_layer": L, "d_model": cfg.d_model,
                                 "seed": seed, "layer": layer, "sublayer": sub, "param": param,
                                 "metric": metric, "value": value})
                if progress:
                    progress(placement, L, seed)
    return rows


def write_csv(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Long-format CSV with the columns of COLUMNS (floats with full precision)."""
    import csv
    import io

    from normlab.fsutil import atomic_write_text

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({**r, "value": repr(float(r["value"])) if math.isfinite(r["value"]) else str(r["value"])})
    atomic_write_text(path, buf.getvalue())
