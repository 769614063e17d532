"""Registered statistics -> long-format rows -> CSV: the one path of probe, inspect and analyze.

``computed`` runs the statistics a tool chose on what it captured and reads every value
back at once; ``long_rows`` turns them into dicts over ``COLUMNS`` (the probe's format);
``pair_rows`` takes the ``pairs`` statistics out for layer_pairs.csv; ``write_csv`` is the
only writer of these files (full float precision, written atomically).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Sequence

from normlab.core.fsutil import atomic_write_text

COLUMNS = ("placement", "init", "n_layer", "d_model", "seed", "layer", "sublayer", "param", "metric", "value")
PAIR_COLUMNS = ("layer_a", "layer_b", "metric", "value")
Computed = list[tuple[int, str, str, str, float]]  # (layer, sublayer, param, metric, value)


def computed(stats: Sequence[Any], captured: Any, sequential: frozenset[str] = frozenset(),
             by_layer: bool = False, double: bool = False) -> Computed:
    """Every value of ``stats`` on ``captured`` as (layer, sublayer, param, key, value).

    Statistics that need any of ``sequential`` are written one after another; the others
    position by position (every statistic of x_0, then of x_1, ...), so one place's numbers
    sit together. ``by_layer`` puts the model's rows first, then the stream's, then the
    rest by layer (block l, then its attention, then block l+1). Tensors are read back in one transfer, in
    float32 (the probe's files have always held float32 values) or, with ``double``, float64.
    """
    import torch

    seq: list[tuple[tuple[int, str, str, str], Any]] = []
    groups: dict[tuple[int, str, str], list[tuple[str, Any]]] = {}
    for s in stats:
        for where, v in _labelled(s, s.compute(captured), captured.n_layer):
            if s.needs & sequential:
                seq.append(((*where, s.key), v))
            else:
                groups.setdefault(where, []).append((s.key, v))
    places = list(groups)
    if by_layer:
        rank = {"model": 0, "stream": 1, "pair": 2}  # then the rest, by layer
        places.sort(key=lambda p: (rank.get(p[1], 3), p[0] if p[1] not in rank else 0))
    pairs = seq + [((*where, key), v) for where in places for key, v in groups[where]]
    tensors = [v for _, v in pairs if isinstance(v, torch.Tensor)]
    back = iter(torch.stack([(t.double() if double else t.float()).detach().reshape(()) for t in tensors]).tolist() if tensors else [])
    return [(*k, next(back) if isinstance(v, torch.Tensor) else float(v)) for k, v in pairs]


def _labelled(s: Any, out: Any, n_layer: int) -> list[tuple[tuple[int, str, str], Any]]:
    """(row label, value) pairs of one statistic's output (nothing when it returned None)."""
    import torch

    if out is None:
        return []
    if s.over == "labelled":
        return list(out)
    values: list[Any]
    if isinstance(out, torch.Tensor):
        values = list(out.reshape(-1).unbind())
    elif isinstance(out, (int, float)):
        values = [out]
    else:
        values = list(out)
        if s.over == "pairs":  # a list of rows
            values = [v for row in values for v in row]
    where = s.rows(n_layer)
    if len(values) != len(where):
        raise ValueError(f"statistic {s.name!r} over {s.over}: {len(values)} values for {len(where)} rows")
    return list(zip(where, values))


def results(values: Computed) -> dict[str, Any]:
    """{metric: value} of one model: a number (model rows), a list in layer order, or a
    matrix (``pairs``); a metric written at two kinds of place keeps the matrix, else the first."""
    n = 1 + max((layer for layer, sub, *_ in values if sub == "pair"), default=-1)
    out: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for layer, sub, param, metric, v in values:
        if sub == "pair":
            out.setdefault(metric, [[math.nan] * n for _ in range(n)])[layer][int(param)] = v
            owner[metric] = "pair"
    for _, sub, _, metric, v in values:
        if owner.setdefault(metric, sub) != sub:
            continue
        if sub == "model":
            out[metric] = v
        elif sub != "pair":
            out.setdefault(metric, []).append(v)
    return out


def long_rows(base: dict[str, Any], values: Computed) -> list[dict[str, Any]]:
    """Dicts over COLUMNS: ``base`` (placement, init, n_layer, d_model, seed) and each value."""
    return [{**base, "layer": layer, "sublayer": sub, "param": param, "metric": metric, "value": v}
            for layer, sub, param, metric, v in values]


def pair_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``pairs`` rows as layer_pairs.csv rows (layer_a, layer_b, metric, value), by metric."""
    out = [{"layer_a": r["layer"], "layer_b": int(r["param"]), "metric": r["metric"], "value": r["value"]}
           for r in rows if r["sublayer"] == "pair"]
    order = list(dict.fromkeys(r["metric"] for r in out))
    return sorted(out, key=lambda r: order.index(r["metric"]))


def write_csv(rows: Iterable[dict[str, Any]], path: str | Path, columns: Sequence[str] = COLUMNS) -> None:
    """A CSV with ``columns``; values with full precision (repr of the float)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        v = float(r["value"])
        w.writerow({**r, "value": repr(v) if math.isfinite(v) else str(v)})
    atomic_write_text(path, buf.getvalue())
