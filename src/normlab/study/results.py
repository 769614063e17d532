"""The results table of a study: scientific axes compared with nuisance axes tuned away.

Following the tuning playbook (Godbole et al. 2023): for every setting of the scientific
axes, each setting of the nuisance axes is scored by its mean best validation loss over
seeds, the best one is kept, and its mean +/- sample std over seeds is reported. A
diverged run is a result, not a failure: a nuisance setting with fewer diverged seeds
always wins, so "best" never means "the one seed that happened to survive".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from normlab.study.store import TrialRecord


@dataclass
class ResultRow:
    """One setting of the scientific axes."""

    scientific: dict[str, Any]
    nuisance: dict[str, Any]     # the best nuisance setting (empty when there is no nuisance axis)
    mean: float | None           # mean of the metric (best val loss) over the completed seeds
    std: float | None            # sample std (None with fewer than two seeds)
    seeds: int                   # completed seeds behind mean/std
    diverged: int                # diverged trials in this row's best nuisance setting
    trials: int                  # trials of the whole row (all nuisance settings and seeds)
    final: int                   # of which completed or diverged or failed


def _key(params: dict[str, Any], axes: list[str]) -> tuple[str, ...]:
    return tuple(repr(params.get(a)) for a in axes)


def results(trials: list[TrialRecord], scientific: list[str], nuisance: list[str],
            metric: str = "best_val_loss") -> list[ResultRow]:
    """Group ``trials`` into rows (in first-seen order), best over nuisance, stats over seeds."""
    rows: dict[tuple[str, ...], dict[tuple[str, ...], list[TrialRecord]]] = {}
    for t in trials:
        rows.setdefault(_key(t.params, scientific), {}).setdefault(_key(t.params, nuisance), []).append(t)
    out = []
    for settings in rows.values():
        scored = []
        for group in settings.values():
            losses = [t.summary[metric] for t in group if t.status == "completed" and t.summary
                      and _finite(t.summary.get(metric))]
            diverged = sum(t.status == "diverged" for t in group)
            mean = statistics.fmean(losses) if losses else None
            scored.append(((diverged, mean if mean is not None else math.inf), group, losses, diverged))
        scored.sort(key=lambda s: s[0])
        _, best, losses, diverged = scored[0]
        first = best[0].params
        every = [t for g in settings.values() for t in g]
        out.append(ResultRow(
            scientific={a: first.get(a) for a in scientific},
            nuisance={a: first.get(a) for a in nuisance},
            mean=statistics.fmean(losses) if losses else None,
            std=statistics.stdev(losses) if len(losses) > 1 else None,
            seeds=len(losses), diverged=diverged, trials=len(every),
            final=sum(t.status in ("completed", "diverged", "failed") for t in every)))
    return out


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, dict)):
        return str(v).replace(" ", "")
    return str(v)


def format_results(rows: list[ResultRow], metric: str = "best_val_loss") -> str:
    """A plain-text table (the same bytes for the same results: executors compare equal)."""
    if not rows:
        return "(no trials)"
    sci = list(rows[0].scientific)
    nui = list(rows[0].nuisance)
    head = sci + [f"best {a}" for a in nui] + [metric.replace("_", " "), "seeds", "diverged", "done"]
    body = []
    for r in rows:
        loss = "-" if r.mean is None else f"{r.mean:.4f}" + ("" if r.std is None else f" +/- {r.std:.4f}")
        body.append([_fmt(r.scientific[a]) for a in sci] + [_fmt(r.nuisance[a]) for a in nui]
                    + [loss, str(r.seeds), str(r.diverged), f"{r.final}/{r.trials}"])
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
