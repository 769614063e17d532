"""``normlab inspect MODEL``: a real checkpoint (or a lab model) under the lab's statistics.

``inspect_model`` resolves MODEL (``subject.py``), tokenises the text with the model's own
tokenizer, measures (``measure.py``) and writes OUT in the formats the lab already reads:

| file | format | read by |
|---|---|---|
| ``probe.csv`` | the probe's long format (``diagnostics.probe.COLUMNS``); ``init`` holds the model's name | ``normlab report OUT`` (probe page) |
| ``summary.json`` | family, placement, norm, loss, log Z, sizes, wall time | the probe page |
| ``probe_config.json`` | the inspect settings | the probe page |
| ``analysis/analysis.csv``, ``layer_pairs.csv``, ``analysis.json`` | ``normlab analyze``'s files | as a run's analysis |

Everything is validated (model, tokenizer, text length) before OUT is created.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from normlab.errors import UserError

PAIR_COLUMNS = ("layer_a", "layer_b", "metric", "value")


def read_text(text: str | None, data_dir: str | None = None) -> tuple[str, str]:
    """(text, where it came from): a UTF-8 file, or Tiny Shakespeare's validation tenth."""
    if text is not None:
        path = Path(text)
        try:
            return path.read_text(encoding="utf-8"), str(path)
        except FileNotFoundError:
            raise UserError(f"--text {path}: no such file") from None
        except UnicodeDecodeError as e:
            raise UserError(f"--text {path}: not UTF-8 text (byte {e.start})") from None
    from normlab.data.source import read_corpus_bytes

    data, source = read_corpus_bytes("tinyshakespeare", data_dir)
    s = data.decode("utf-8")
    return s[int(0.9 * len(s)):], f"{source} (last 10%, the lab's validation split)"


def rows_of(res: dict[str, Any], placement: str, name: str, L: int, d: int) -> list[dict[str, Any]]:
    """Long-format rows (the probe's columns) of a ``measure`` result."""
    base = {"placement": placement, "init": name, "n_layer": L, "d_model": d, "seed": 0}
    rows: list[dict[str, Any]] = []

    def add(layer: int, sub: str, param: str, metric: str, value: float) -> None:
        rows.append({**base, "layer": layer, "sublayer": sub, "param": param, "metric": metric, "value": value})

    add(0, "model", "loss", "loss", res["loss"])
    add(0, "model", "logits", "log_z", res["log_z"])
    for li in range(L + 1):
        for metric in ("rms", "mean_sq", "max_abs", "token_cos"):
            add(li, "stream", "x", metric, res[metric][li])
        add(li, "stream", "x", "grad_norm", res["grad_norm_stream"][li])
        add(li, "stream", "x", "angular_distance_to_last", res["angular_distance"][li][L])
        if li < L:
            add(li, "stream", "x", "cos_next", res["cos_next"][li])
    for li in range(1, L + 1):
        add(li, "block", "all", "grad_norm", res["grad_norm_block"][li - 1])
        add(li, "block", "all", "deletion_loss", res["deletion_loss"][li - 1])
        add(li, "block", "all", "deletion_delta", res["deletion_loss"][li - 1] - res["loss"])
        add(li, "block", "all", "block_influence", res["block_influence"][li - 1])
        add(li, "block", "all", "angular_distance", res["angular_distance"][li - 1][li])
        add(li, "attn", "all", "max_logit", res["attn_max_logit"][li - 1])
    return rows


def inspect_model(model: str, out: str | Path, text: str | None = None, *, context: int | None = None,
                  max_tokens: int = 2048, dtype: str = "float32", device: str = "cpu", seed: int = 0,
                  data_dir: str | None = None, quiet: bool = False, force: bool = False) -> dict[str, Any]:
    """Measure MODEL on the text and write OUT (see the module docstring); returns the summary."""
    import csv
    import io

    import torch

    from normlab.diagnostics.probe import COLUMNS
    from normlab.fsutil import atomic_write_text
    from normlab.inspect.measure import make_batch, measure
    from normlab.inspect.subject import DTYPES, load_subject

    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype}: use one of {', '.join(DTYPES)}")
    if max_tokens < 2 or (context is not None and context < 2):
        raise UserError("--max-tokens and --context must be >= 2")
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not force:
        raise UserError(f"--out {out}: already exists and is not empty; choose another or pass --force")
    body, source = read_text(text, data_dir)
    t0 = time.perf_counter()
    subject = load_subject(model, dtype, device, context)
    if not subject.family.causal and subject.mask_id is None:
        raise UserError(f"{model}: the tokenizer has no mask token, needed for a masked-LM loss")
    ids = subject.encode(body)
    inner = subject.context - len(subject.prefix) - len(subject.suffix)
    if len(ids) < inner:
        raise UserError(f"{source}: {len(ids)} tokens, shorter than one context of {inner} text tokens; "
                        "give a longer --text or a smaller --context")
    vocab = subject.info.get("vocab_size")
    top = max(ids + subject.prefix + subject.suffix)
    if vocab is not None and top >= vocab:
        raise UserError(f"{model}: the tokenizer gives token id {top} but the model has {vocab} embeddings; "
                        "the tokenizer does not belong to this model")
    fam = subject.family
    if not quiet:
        logging.getLogger(__name__).info(f"{subject.name}: {fam.describe()}")
    x, y = make_batch(subject, ids, max_tokens, seed)
    torch.manual_seed(seed)
    bar = None
    if not quiet:
        from tqdm import tqdm

        bar = tqdm(total=len(subject.layers), desc="skipping blocks", unit="layer", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.update(1)

    res = measure(subject, x, y, progress)
    if bar is not None:
        bar.close()
    L, d = len(subject.layers), subject.d_model
    params = sum(p.numel() for p in subject.model.parameters())
    summary = {"model": subject.name, "source": subject.info.get("source"), "family": fam.name,
               "placement": fam.placement, "norm": fam.norm, "notes": fam.notes, "causal": fam.causal,
               "importable": fam.importable, "n_layer": L, "d_model": d, "params": params,
               "dtype": dtype, "device": device, "text": source, "tokens": res["tokens"],
               "sequences": res["sequences"], "context": res["context"], "loss": res["loss"],
               "log_z": res["log_z"], "wall_time_s": round(time.perf_counter() - t0, 3)}
    settings = {"model": model, "text": text, "context": subject.context, "max_tokens": max_tokens,
                "dtype": dtype, "device": device, "seed": seed}
    rows = rows_of(res, fam.placement, subject.name, L, d)
    analysis = {"val_loss": res["loss"], "deletion_loss": res["deletion_loss"],
                "block_influence": res["block_influence"], "angular_distance": res["angular_distance"]}
    arows = [r for r in rows if r["metric"] in ("deletion_loss", "deletion_delta", "block_influence")
             or (r["metric"] == "angular_distance" and r["sublayer"] == "block")]
    pairs = [{"layer_a": i, "layer_b": j, "metric": "angular_distance", "value": v}
             for i, row in enumerate(res["angular_distance"]) for j, v in enumerate(row)]

    def table(data: list[dict[str, Any]], cols: tuple[str, ...]) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
        w.writeheader()
        w.writerows({**r, "value": repr(float(r["value"]))} for r in data)
        return buf.getvalue()

    atomic_write_text(out / "probe.csv", table(rows, COLUMNS))
    atomic_write_text(out / "summary.json", json.dumps(_finite(summary), indent=2))
    atomic_write_text(out / "probe_config.json", json.dumps(settings, indent=2))
    atomic_write_text(out / "analysis" / "analysis.csv", table(arows, COLUMNS))
    atomic_write_text(out / "analysis" / "layer_pairs.csv", table(pairs, PAIR_COLUMNS))
    atomic_write_text(out / "analysis" / "analysis.json", json.dumps(_finite({**analysis, **res}), indent=2))
    return {**summary, "result": res}


__all__ = ["inspect_model", "read_text", "rows_of"]


def _finite(obj: Any) -> Any:
    """JSON has no NaN: non-finite floats become null (as in metrics.jsonl)."""
    import math

    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj
