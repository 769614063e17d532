"""What the training claims decide on: study stores run on demand, and the statistics of
their decision rules.

``StudyContext.trials(name)`` runs the study (a preset of :mod:`normlab.study.presets`, or
one of the extra specs below) into ``OUT/stores/<name>`` with :func:`normlab.study.runner.run_study`
and returns its trial records. The store caches every finished trial by config hash, so a
second ``normlab claims`` trains nothing that is already there.

The rules are fixed before any data is seen: a difference of seed means counts as real when it
exceeds twice the pooled sample std over seeds (Welch-free and crude, but stated); with fewer
than two seeds per side there is no spread and the comparison is "unknown", never a verdict.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class StudyContext:
    """Runs and caches the studies of the full claims check."""

    out: Path
    scale: str = "cpu"
    workers: int | None = None
    quiet: bool = True
    _done: dict[str, list[Any]] = field(default_factory=dict)

    def store_dir(self, name: str) -> Path:
        return self.out / "stores" / name

    def spec(self, name: str) -> Any:
        from normlab.study.presets import study_preset

        return study_preset(name, self.scale)

    def trials(self, name: str) -> list[Any]:
        """The trial records of study ``name`` at this scale, training whatever is missing."""
        if name not in self._done:
            from normlab.study.runner import run_study

            spec = self.spec(name)
            store = run_study(spec, self.store_dir(name), workers=self.workers or 1)
            self._done[name] = store.trials()
            store.close()
        return self._done[name]

    def describe(self, name: str) -> str:
        t = self.trials(name)
        seeds = len({r.params.get("seed") for r in t})
        return f"study '{name}' at scale {self.scale}: {len(t)} trials, {seeds} seed(s), store {self.store_dir(name)}"


def metric(t: Any, key: str = "best_val_loss") -> float | None:
    """A finite summary value of a completed trial, else None (diverged, failed, missing)."""
    v = (t.summary or {}).get(key) if t.status == "completed" else None
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def select(trials: list[Any], **where: Any) -> list[Any]:
    """Trials whose params match ``where`` (keys with '__' for '.', e.g. model__placement)."""
    want = {k.replace("__", "."): v for k, v in where.items()}
    return [t for t in trials if all(t.params.get(k) == v for k, v in want.items())]


@dataclass
class Group:
    """Seeds of one setting: their metric values and how many diverged or failed."""

    values: list[float]
    diverged: int
    n: int

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None

    def text(self) -> str:
        if self.mean is None:
            return f"no finished seed ({self.diverged}/{self.n} diverged)"
        sd = f" ± {self.std:.3f}" if self.std is not None else " (1 seed)"
        return f"{self.mean:.3f}{sd}" + (f", {self.diverged}/{self.n} diverged" if self.diverged else "")

    def as_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "seeds": len(self.values), "diverged": self.diverged,
                "trials": self.n}


def group(trials: list[Any], key: str = "best_val_loss") -> Group:
    vals = [v for t in trials if (v := metric(t, key)) is not None]
    return Group(vals, sum(t.status == "diverged" for t in trials), len(trials))


def compare(a: Group, b: Group) -> tuple[str, float | None, float | None]:
    """Is a's metric larger than b's? ("larger" | "smaller" | "same" | "unknown", diff, pooled std).

    larger/smaller: |mean_a - mean_b| > 2 x pooled std; same: within it; unknown: a side has
    fewer than two finished seeds (no spread to compare with)."""
    if a.mean is None or b.mean is None:
        return "unknown", None, None
    d = a.mean - b.mean
    if a.std is None or b.std is None:
        return "unknown", d, None
    s = math.sqrt((a.std ** 2 + b.std ** 2) / 2)
    return ("larger" if d > 2 * s else "smaller" if d < -2 * s else "same"), d, s


def first_eval_after_start(run_dir: Path) -> float | None:
    """Validation loss at the first eval after step 0 (the 'converges faster' probe)."""
    from normlab.fsutil import read_jsonl

    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return None
    vals = [r["val/loss"] for r in read_jsonl(path) if "val/loss" in r and r.get("step", 0) > 0]
    return float(vals[0]) if vals and vals[0] is not None and math.isfinite(vals[0]) else None


def last_diag(run_dir: Path) -> dict[str, Any] | None:
    """The last line of RUN/diagnostics.jsonl, and the first one as ``first`` (None if absent)."""
    from normlab.fsutil import read_jsonl

    path = Path(run_dir) / "diagnostics.jsonl"
    recs = read_jsonl(path) if path.exists() else []
    return {**recs[-1], "first": recs[0]} if recs else None


def tail_mean(run_dir: Path, key: str, frac: float = 0.25, file: str = "metrics.jsonl") -> float | None:
    """Mean of a JSONL series of the run (metrics or diagnostics) over the last ``frac`` of its lines."""
    from normlab.fsutil import read_jsonl

    path = Path(run_dir) / file
    vals = [r[key] for r in read_jsonl(path) if r.get(key) is not None] if path.exists() else []
    if not vals:
        return None
    tail = vals[-max(1, int(len(vals) * frac)):]
    return float(statistics.fmean(tail))
