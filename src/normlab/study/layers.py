"""A run's in-training diagnostics (RUN/diagnostics.jsonl) as labelled long rows: one per step,
statistic and layer, for ``load(STORE).layers()`` and ``normlab study export --what layers``.

A line of diagnostics.jsonl holds, per training statistic of the registry, one number or a
list in the order of its ``over`` (``normlab.diagnostics.statistic``); the registry gives the
list its labels for the run's depth: ``x0`` .. ``xL`` (the stream), ``1`` .. ``L`` (blocks),
``emb``, ``1`` .. ``L``, ``head`` (parameter groups). A list the registry does not know, or
whose length is not the one it gives for this depth, is numbered from 1, as the run page
numbers it. A one-number statistic of the registry (``log_z``, ``output_change``) is one row
with an empty layer; numbers the registry does not name (``train/loss``, which the steps table
holds) are left out.
"""

from __future__ import annotations

from typing import Any, Iterator

from normlab.diagnostics.statistic import STATISTICS, Statistic

LAYER_FIELDS = ("step", "statistic", "layer", "value")


def training_statistics() -> dict[str, Statistic]:
    """{key: statistic} of what the in-training diagnostics write."""
    out: dict[str, Statistic] = {}
    for _, s in STATISTICS.items():
        if "training" in s.tools:
            out.setdefault(s.key, s)
    return out


def _labels(s: Statistic | None, n: int, n_layer: int | None) -> list[str]:
    if s is not None and n_layer is not None and s.size(n_layer) == n:
        if s.over == "pairs":  # (x_i, x_j), i major: the probe's layer_pairs order
            return [f"x{i}:x{j}" for i in range(n_layer + 1) for j in range(n_layer + 1)]
        return [str(v) for v in s.labels(n_layer)]
    return [str(i) for i in range(1, n + 1)]


def layer_rows(lines: list[dict[str, Any]], n_layer: int | None,
               known: dict[str, Statistic]) -> Iterator[dict[str, Any]]:
    """The long rows of one run's diagnostics lines (``step``, ``statistic``, ``layer``, ``value``),
    in the file's order; a missing or non-finite value is None."""
    for line in lines:
        step = line.get("step")
        for key, v in line.items():
            if key == "step":
                continue
            if isinstance(v, list):
                for label, e in zip(_labels(known.get(key), len(v), n_layer), v):
                    yield {"step": step, "statistic": key, "layer": label, "value": _number(e)}
            elif key in known and known[key].over == "scalar" and (v is None or isinstance(v, (int, float))):
                yield {"step": step, "statistic": key, "layer": None, "value": _number(v)}


def _number(v: Any) -> float | None:
    """A float, or None for what is not a finite number (a JSON null, a nested list)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if f == f and f not in (float("inf"), float("-inf")) else None


__all__ = ["LAYER_FIELDS", "layer_rows", "training_statistics"]
