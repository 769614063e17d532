"""Layer similarity and layer deletion of a trained model (claim 12: representation collapse).

Angular distance between the outputs of layers i and j is arccos(cos(x_i, x_j)) / pi,
averaged over tokens (Gromov et al. 2024, "The Unreasonable Ineffectiveness of the Deeper
Layers"); deleting block l means h_l = h_{l-1} and the loss increase says what it did.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _main(h: Any) -> Any:
    return h[0] if isinstance(h, tuple) else h  # resi_dual carries (x, d); x is the main stream


def layer_outputs(model: Any, idx: Any) -> list[Any]:
    """Main-stream states [x_0 (embedding), x_1, ..., x_L], each (B, T, d)."""
    h = model.stream.begin(model.embed(idx))
    outs = [_main(h)]
    for block in model.blocks:
        h = block(h)
        outs.append(_main(h))
    return outs


def angular_distances(outs: list[Any]) -> np.ndarray:
    """(L+1, L+1) matrix of mean arccos(cos)/pi between token states of every pair of layers."""
    import torch

    flat = torch.stack([o.reshape(-1, o.size(-1)) for o in outs])       # (L+1, N, d)
    unit = torch.nn.functional.normalize(flat.double(), dim=-1)
    cos = torch.einsum("ind,jnd->ijn", unit, unit).clamp(-1, 1)         # (L+1, L+1, N)
    return (torch.arccos(cos) / torch.pi).mean(-1).numpy()


def deletion_losses(model: Any, idx: Any, targets: Any) -> tuple[float, list[float]]:
    """(full loss, [loss with block l skipped for l = 1..L]) on one batch."""
    import torch.nn.functional as F

    def loss(skip: int | None) -> float:
        h = model.stream.begin(model.embed(idx))
        for i, block in enumerate(model.blocks, start=1):
            if i != skip:
                h = block(h)
        logits = model.head(h)
        return float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1)))

    return loss(None), [loss(i) for i in range(1, len(model.blocks) + 1)]


def analyse_checkpoint(run_dir: Any, batch_size: int = 8) -> dict[str, Any] | None:
    """Similarity and deletion numbers for a run's best (else latest) checkpoint on validation
    text; None when the producers (model io, corpus loader) are not available."""
    from pathlib import Path

    import torch

    try:
        from normlab.config import RunConfig
        from normlab.data import load_corpus
        from normlab.model.io import load_model
    except ImportError:
        return None
    run_dir = Path(run_dir)
    ck = next((run_dir / "checkpoints" / n for n in ("best", "latest")
               if (run_dir / "checkpoints" / n / "model.safetensors").is_file()), None)
    if ck is None:
        return None
    cfg = RunConfig.from_json((run_dir / "config.json").read_text())
    model = load_model(ck)
    model.eval()
    corpus = load_corpus(cfg.data)
    val = torch.as_tensor(np.array(corpus.val), dtype=torch.long)  # a copy: corpus arrays may be read-only
    T = min(cfg.model.context, 128)
    g = torch.Generator().manual_seed(0)  # the same validation windows for every run
    starts = torch.randint(0, val.numel() - T - 1, (batch_size,), generator=g)
    idx = torch.stack([val[s:s + T] for s in starts])
    tgt = torch.stack([val[s + 1:s + T + 1] for s in starts])
    with torch.no_grad():
        dist = angular_distances(layer_outputs(model, idx))
        full, deleted = deletion_losses(model, idx, tgt)
    return {"distance": dist, "full_loss": full, "deleted": deleted}
