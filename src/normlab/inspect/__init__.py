"""``normlab inspect MODEL``: a real checkpoint (or a lab model) under the lab's statistics.

``inspect_model`` resolves MODEL (``subject.py``), tokenises the text with the model's own
tokenizer, measures (``measure.py``) and writes OUT in the formats the lab already reads:

| file | format | read by |
|---|---|---|
| ``probe.csv`` | the probe's long format (``diagnostics.rows.COLUMNS``): every registered ``inspect`` statistic; ``init`` holds the model's name | ``normlab report OUT`` (probe page) |
| ``summary.json`` | family, placement, norm, loss, log Z, sizes, wall time | the probe page |
| ``probe_config.json`` | the inspect settings | the probe page |
| ``analysis/analysis.csv``, ``layer_pairs.csv``, ``analysis.json`` | ``normlab analyze``'s files | as a run's analysis |

With ``measure`` (``normlab inspect --measure``), analysis.json also holds ``measurements``:
the sub-layer measurements of :func:`normlab.diagnostics.sublayers.per_block` that fit the
model (a lab ``TransformerLM`` only), one entry per block, and ``not_measured``: why the others do not.

Everything is validated (model, tokenizer, text length) before OUT is created.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_text
from normlab.core.lazy import lazy_getattr
from normlab.core.progress import Progress
from normlab.data.record import load_located
from normlab.data.source import KNOWN, read_corpus_bytes
from normlab.diagnostics.capture import make_batch
from normlab.diagnostics.capture import measure as capture
from normlab.diagnostics.catalogue import STATISTICS
from normlab.diagnostics.rows import PAIR_COLUMNS, computed, long_rows, pair_rows, results, write_csv
from normlab.diagnostics.statistic import chosen
from normlab.inspect.subject import DTYPES, load_subject
from normlab.model import cost
from normlab.model.transformer import TransformerLM
from normlab.run.dir import RunDir
from normlab.run.outdir import (
    ANALYSIS,
    ANALYSIS_CSV,
    ANALYSIS_JSON,
    PAIRS_CSV,
    PROBE_CONFIG,
    PROBE_CSV,
    SUMMARY,
    OutDir,
)


def read_text(text: str | None, data_dir: str | None = None) -> tuple[str, str]:
    """(text, where it came from): a UTF-8 file, or Tiny Shakespeare's validation tenth (None,
    or its name ``tinyshakespeare``, to measure a lab run on it like for like)."""

    if text is not None and not (text in KNOWN and not Path(text).exists()):
        path = Path(text)
        try:
            return path.read_text(encoding="utf-8"), str(path)
        except FileNotFoundError:
            raise UserError(f"--text {path}: no such file") from None
        except UnicodeDecodeError as e:
            raise UserError(f"--text {path}: not UTF-8 text (byte {e.start})") from None

    data, source = read_corpus_bytes("tinyshakespeare", data_dir)
    s = data.decode("utf-8")
    return s[int(0.9 * len(s)):], f"{source} (last 10%, the lab's validation split)"


def measured_ids(subject: Any, text: str | None, data_dir: str | None, limit: int) -> tuple[list[int], str]:
    """(token ids, which data they are): ``text`` tokenised by the model's own tokenizer when
    given; else a lab run's own validation split (its corpus found where the run recorded it,
    or in ``data_dir``; the tokens it trained against, at most ``limit``); else Tiny
    Shakespeare's validation tenth."""
    run = subject.info.get("run")
    if text is None and run is not None:
        rd = RunDir(run)
        data = rd.config().data
        corpus = load_located(data, rd.data_record(), data_dir)
        frac = 1 - data.train_fraction
        return ([int(i) for i in corpus.val[:limit]],
                f"{run}'s own validation split: {corpus.source} (last {frac:.0%}, sha256 {corpus.sha256[:12]})")
    body, source = read_text(text, data_dir)
    return subject.encode(body), source


def rows_of(captured: Any, placement: str, name: str, d: int) -> list[dict[str, Any]]:
    """Long-format rows (the probe's columns) of every registered ``inspect`` statistic on
    what ``measure`` captured; the ``pairs`` rows (sublayer ``pair``) are layer_pairs.csv's."""

    stats = chosen([s for _, s in STATISTICS.items()], "inspect", captured.provided)
    base = {"placement": placement, "init": name, "n_layer": captured.n_layer, "d_model": d, "seed": 0}
    return long_rows(base, computed(stats, captured, by_layer=True, double=True))


def inspect_model(model: str, out: str | Path, text: str | None = None, *, context: int | None = None,
                  max_tokens: int = 2048, dtype: str = "float32", device: str = "cpu", seed: int = 0,
                  data_dir: str | None = None, quiet: bool = False, force: bool = False,
                  measure: bool = False, sharpness_iters: int = 0) -> dict[str, Any]:
    """Measure MODEL (a name: ``subject.load_subject``) on the text and write OUT (see the
    module docstring); returns the summary. ``sharpness_iters`` > 0: also the sharpness (top
    Hessian eigenvalue of the loss on the batch) by that many power iterations."""

    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype}: use one of {', '.join(DTYPES)}")
    _check_out(out, max_tokens, context, force, sharpness_iters)
    t0 = time.perf_counter()
    subject = load_subject(model, dtype, device, context)
    settings = {"model": model, "dtype": dtype, "device": device}
    return inspect_subject(subject, out, text, max_tokens=max_tokens, seed=seed, data_dir=data_dir, quiet=quiet,
                           force=force, settings=settings, started=t0, measure=measure, sharpness_iters=sharpness_iters)


def _check_out(out: str | Path, max_tokens: int, context: int | None, force: bool, sharpness_iters: int = 0) -> None:
    if max_tokens < 2 or (context is not None and context < 2):
        raise UserError("--max-tokens and --context must be >= 2")
    if sharpness_iters < 0:
        raise UserError(f"--sharpness-iters {sharpness_iters}: must be >= 0 (0 = no sharpness), e.g. 20")

    if OutDir(out, "inspect").contents() and not force:
        raise UserError(f"--out {out}: already exists and is not empty; choose another or pass --force")


def inspect_subject(subject: Any, out: str | Path, text: str | None = None, *, max_tokens: int = 2048,
                    seed: int = 0, data_dir: str | None = None, quiet: bool = True, force: bool = False,
                    settings: dict[str, Any] | None = None, started: float | None = None,
                    measure: bool = False, sharpness_iters: int = 0) -> dict[str, Any]:
    """``normlab inspect`` of a :class:`~normlab.inspect.subject.Subject` (any causal LM, from
    ``subject_from_module``): measure it on ``text`` (a file; default a lab run's own validation
    split, else Tiny Shakespeare's validation tenth: ``measured_ids``) and write OUT, which
    ``normlab report OUT`` and ``normlab report A B`` read. Returns the summary (summary.json)
    with the raw results under ``result`` (with ``measure``, a lab model's sub-layer measurements
    too: the module docstring). OUT is held while it is written
    (``normlab.run.outdir.OutDir``): a second writer is refused."""

    t0 = time.perf_counter() if started is None else started
    _check_out(out, max_tokens, None, force, sharpness_iters)
    out = Path(out)
    name = subject.name
    if not subject.family.causal and subject.mask_id is None:
        raise UserError(f"{name}: the tokenizer has no mask token, needed for a masked-LM loss")
    ids, source = measured_ids(subject, text, data_dir, limit=max_tokens + subject.context)
    inner = subject.context - len(subject.prefix) - len(subject.suffix)
    if len(ids) < inner:
        raise UserError(f"{source}: {len(ids)} tokens, shorter than one context of {inner} text tokens; "
                        "give a longer --text or a smaller --context")
    vocab = subject.info.get("vocab_size")
    top = max(ids + subject.prefix + subject.suffix)
    if vocab is not None and top >= vocab:
        raise UserError(f"{name}: the tokenizer gives token id {top} but the model has {vocab} embeddings; "
                        "the tokenizer does not belong to this model")
    if measure and not isinstance(subject.model, TransformerLM):
        raise UserError(f"--measure: {name} is not a lab TransformerLM, and the sub-layer measurements read its "
                        "sub-layers (branch, norm); `normlab import` converts the families it can into one")
    with OutDir(out, "inspect").writing("--out", check=lambda: _check_out(out, max_tokens, None, force)):
        return _measure_into(subject, out, ids, source, text, max_tokens, seed, settings, t0, quiet, measure,
                             sharpness_iters)


def _measure_into(subject: Any, out: Path, ids: list[int], source: str, text: str | None, max_tokens: int,
                  seed: int, settings: dict[str, Any] | None, t0: float, quiet: bool,
                  measure: bool = False, sharpness_iters: int = 0) -> dict[str, Any]:
    """``inspect_subject``'s work on the checked token ids ``ids``, into the folder it holds."""
    import torch

    name = subject.name
    fam = subject.family
    if not quiet:
        logging.getLogger(__name__).info(f"{name}: {fam.describe()}")
        logging.getLogger(__name__).info(f"measuring on {source}")
    x, y = make_batch(subject, ids, max_tokens, seed)
    torch.manual_seed(seed)
    # the one progress display: a bar on a terminal, plain lines in a pipe or a log
    with Progress("normlab inspect", enabled=not quiet) as bar:
        bar.add("layer", len(subject.layers))
        bar.item("skipping blocks")
        bar.start("layer")
        captured, raw = capture(subject, x, y, lambda done, total: bar.advance("layer"), sharpness_iters, seed)
        if measure:  # after the statistics, which it leaves as they were
            bar.item("sub-layer measurements")
            raw.update(_sublayer_measurements(subject.model, x, y, seed))
    L, d = len(subject.layers), subject.d_model
    first = next(subject.model.parameters())
    given = settings or {}  # inspect_model's own words for them
    dtype = given.get("dtype", str(first.dtype).removeprefix("torch."))
    device = given.get("device", first.device.type)
    params = cost.count(subject.model)
    rows = rows_of(captured, fam.placement, name, d)
    res = {**raw, **results([(r["layer"], r["sublayer"], r["param"], r["metric"], r["value"]) for r in rows])}
    summary = {"model": name, "source": subject.info.get("source"), "family": fam.name,
               "placement": fam.placement, "norm": fam.norm, "notes": fam.notes, "causal": fam.causal,
               "importable": fam.importable, "n_layer": L, "d_model": d, "params": params,
               "dtype": dtype, "device": device, "text": source, "tokens": res["tokens"],
               "sequences": res["sequences"], "context": res["context"], "loss": res["loss"],
               "log_z": res["log_z"], "wall_time_s": round(time.perf_counter() - t0, 3)}
    settings = {"model": given.get("model", name), "text": text, "context": subject.context,
                "max_tokens": max_tokens, "dtype": dtype, "device": device, "seed": seed}
    if measure:  # (only then: the settings of an inspection without it stay as they were)
        settings["measure"] = True
    if sharpness_iters:  # (the same)
        settings["sharpness_iters"] = sharpness_iters
    # analysis/ holds what ``normlab analyze`` writes: the rows of the statistics it computes too
    per_block = {s.key for _, s in STATISTICS.items() if "analyze" in s.tools and s.over == "blocks"}
    arows = [r for r in rows if r["metric"] in per_block and r["sublayer"] == "block"]
    analysis = {"val_loss": res["loss"], "deletion_loss": res["deletion_loss"],
                "block_influence": res["block_influence"], "angular_distance": res["angular_distance"]}
    folder = OutDir(out, "inspect")
    write_csv([r for r in rows if r["sublayer"] != "pair"], folder.file(PROBE_CSV))
    atomic_write_text(folder.file(SUMMARY), json.dumps(_finite(summary), indent=2))
    atomic_write_text(folder.file(PROBE_CONFIG), json.dumps(settings, indent=2))
    write_csv(arows, folder.file(ANALYSIS, ANALYSIS_CSV))
    write_csv(pair_rows(rows), folder.file(ANALYSIS, PAIRS_CSV), PAIR_COLUMNS)
    atomic_write_text(folder.file(ANALYSIS, ANALYSIS_JSON), json.dumps(_finite({**analysis, **res}), indent=2))
    return {**summary, "result": res}


def _sublayer_measurements(model: Any, x: Any, y: Any, seed: int) -> dict[str, Any]:
    """analysis.json's ``measurements`` (per block) and ``not_measured`` (why not) of the lab
    model on the inspection's batch (its loss is not read: causal targets are the inputs here)."""
    from normlab.diagnostics import sublayers

    dev = next(model.parameters()).device
    return {"measurements": sublayers.per_block(model, x.to(dev), y.to(dev), seed),
            "not_measured": sublayers.not_applicable(model)}


# The public Python API (docs/inspect.md), imported on first use: torch loads only then.
_LAZY = {"Subject": "normlab.diagnostics.subject", "Family": "normlab.diagnostics.families",
         "subject_from_module": "normlab.diagnostics.subject", "subject_from_bridge": "normlab.inspect.bridge",
         "find_blocks": "normlab.diagnostics.subject", "no_attention": "normlab.diagnostics.subject"}
__getattr__ = lazy_getattr("normlab.inspect", _LAZY)


__all__ = ["inspect_model", "inspect_subject", "measured_ids", "read_text", "rows_of", *_LAZY]


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
