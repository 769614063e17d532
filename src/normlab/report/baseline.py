"""A study's baseline arms, told apart from the lab's: trials whose ``model.impl`` is not the
lab's ``TransformerLM`` (``pre-vs-post``'s transformers GPT-2).

A baseline is a check of the lab's implementation, not a finding about normalization: the
study's own question is answered on the lab's arms only (``split``), and the check is stated on
its own line (``implementation_check``): per setting of the other axes, the lab arm of the same
placement minus the baseline, mean over seeds with its 95% Welch interval over seeds.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from normlab.report.numbers import num
from normlab.report.study_answer import side, summary, value_name
from normlab.stats.effects import MIN_SEEDS, welch

IMPL, LAB = "model.impl", "normlab"
# What a trial records rather than what it trains: never a setting the page compares (the
# baseline runs without in-training diagnostics, which read the lab model's blocks).
MEASUREMENT = ("train.diag_every",)
NAMES = {"hf-gpt2": "GPT-2 (transformers)"}

Point = tuple[dict[str, Any], tuple[float, str]]  # (trial params, (metric value, fate))


def impl_of(params: dict[str, Any]) -> str:
    """The trial's implementation; a trial of a store made before the axis existed is the lab's."""
    return str(params.get(IMPL, LAB))


def setting(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` without the implementation and the measurement settings."""
    return {k: v for k, v in params.items() if k != IMPL and k not in MEASUREMENT}


def split(points: Sequence[Point]) -> tuple[list[Point], list[Point]]:
    """(the lab's arms, the baseline arms), each point's params reduced to its ``setting``."""
    lab = [(setting(p), pt) for p, pt in points if impl_of(p) == LAB]
    base = [(p, pt) for p, pt in points if impl_of(p) != LAB]
    return lab, base


def implementation_check(points: Sequence[Point], unit: str = "nats/token") -> str | None:
    """'Check of the implementation ...: warm-up 0: lab Pre-LN minus GPT-2 (transformers) d,
    95% Welch interval [lo, hi] (n seeds each); ...', or None without a baseline arm."""

    lab, base = split(points)
    if not base:
        return None
    cells: dict[tuple, dict[str, list[tuple[float, str]]]] = defaultdict(lambda: defaultdict(list))
    for p, pt in lab:
        cells[_cell(p)]["lab"].append(pt)
    for p, pt in base:
        cells[_cell(setting(p))][impl_of(p)].append(pt)
    parts = []
    for cell, by in sorted(cells.items(), key=lambda kv: str(kv[0])):
        for impl in sorted(k for k in by if k != "lab"):
            where = ", ".join(value_name(k, v) for k, v in cell if k.split(".")[-1] != "placement")
            place = dict(cell).get("model.placement", "")
            ours, theirs = f"lab {value_name('model.placement', place)}", NAMES.get(impl, impl)
            head = f"{where}: " if where else ""
            if "lab" not in by:
                parts.append(f"{head}{summary(theirs, by[impl])}, no lab arm to compare")
                continue
            va, vb = side(by["lab"])[0], side(by[impl])[0]
            e = welch(va, vb)  # lab minus baseline
            text = f"{head}{summary(ours, by['lab'])} vs {summary(theirs, by[impl])}"
            if e.estimate is None:
                parts.append(text + ": no difference to weigh")
                continue
            text += f": lab minus baseline {'+' if e.estimate > 0 else ''}{num(e.estimate, 3)} {unit}"
            if e.lo is None or e.hi is None or e.n_min < MIN_SEEDS:
                text += f" (fewer than {MIN_SEEDS} seeds a side: no interval)"
            else:
                text += f", 95% Welch interval over seeds [{num(e.lo, 3)}, {num(e.hi, 3)}] ({len(va)} and {len(vb)} seeds)"
            parts.append(text)
    if not parts:
        return None
    return ("Check of the implementation, not a result about normalization: the lab's arm against the same "
            "architecture computed by transformers, from the same initial weights and settings; "
            + "; ".join(parts) + ".")


def _cell(params: dict[str, Any]) -> tuple:
    """The setting's axes except the seed, in a stable order."""
    return tuple(sorted((k, v) for k, v in params.items() if k.split(".")[-1] != "seed"))


def label_items(params: dict[str, Any]) -> list[tuple[str, Any]]:
    """A group's label items: no seed, no measurement setting, the implementation only when it is
    not the lab's (so the lab arms keep the labels of a study without a baseline)."""
    return [(k, v) for k, v in params.items() if k.split(".")[-1] != "seed" and k not in MEASUREMENT
            and not (k == IMPL and v == LAB)]


__all__ = ["IMPL", "MEASUREMENT", "implementation_check", "impl_of", "label_items", "setting", "split"]
