"""Synthetic study stores for the training claims: run directories with exactly the files the
claims read (config.json, metrics.jsonl, summary.json, diagnostics.jsonl), built from a
per-cell description, and a study context that serves them instead of training.

:class:`FakeContext` is a :class:`~normlab.claims.studies.StudyContext` whose ``trials``
serve the synthetic cells and whose data references are fixed (Tiny Shakespeare's unigram
cross-entropy, 65 symbols): ``outcome``, ``unigram_ce`` and ``uniform_ce`` are the real ones,
so a run's outcome follows from the best / final losses written, never typed beside them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

from normlab.claims.studies import StudyContext
from normlab.data.unigram import DataCE
from normlab.run.resolve import RunConfig
from normlab.study.store import TrialRecord

CE = DataCE(unigram=3.347, vocab_size=65)
INIT = math.log(65)      # the uniform prediction's loss, the reference of every gain
SEEDS = 5                # the map's seeds
STUDY_SEEDS = {"pre-vs-post": 6}  # studies whose preset runs another number of seeds
# mean 0 over the first 5 and over all 6: a cell with sigma * JITTER straddles its centre
JITTER = (-1.0, 1.0, -0.5, 0.5, 0.0, 0.0)
TRAINS = 2.6             # a best val loss that trains (0.75 below the unigram plateau)
STALLS = 3.36            # a best val loss on the unigram plateau (a stalled run)


def jit(seed: int, sigma: float) -> float:
    return JITTER[seed] * sigma


def write_run(d: Path, params: dict[str, Any], q: dict[str, Any]) -> None:
    """A run directory whose files give the quantities in ``q``: best / final val loss, status,
    first eval after step 0, logged pre-clip gradient norms, diagnostics lines, deletion."""
    d.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"optim": {"lr": params.get("optim.lr", 1e-3)}}
    (d / "config.json").write_text(RunConfig.from_dict(data).to_json())
    lines = [{"step": 0, "val/loss": INIT}]
    if "first" in q:
        lines.append({"step": 100, "val/loss": q["first"]})
    lines += [{"step": st, "val/loss": v} for st, v in q.get("curve", [])]  # (step, val loss) evaluations
    lines += [{"step": i + 1, "train/loss": 3.0, "grad_norm": g} for i, g in enumerate(q.get("grad", []))]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    status = q.get("status", "completed")
    summary = {"status": status, "best_val_loss": q.get("best"), "final_val_loss": q.get("final", q.get("best"))}
    (d / "summary.json").write_text(json.dumps(summary))
    if "diag" in q:
        (d / "diagnostics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in q["diag"]))
    if "deletion" in q:
        (d / "deletion.json").write_text(json.dumps(q["deletion"]))


Cell = tuple[str, dict[str, Any], Callable[[int], dict[str, Any]]]  # study, params, seed -> quantities


class FakeContext(StudyContext):
    """Serves synthetic trials per study; everything else is the real StudyContext's."""

    def __init__(self, root: Path, cells: list[Cell], seeds: dict[str, int] | None = None,
                 scale: str = "cpu") -> None:
        super().__init__(out=root, scale=scale, train=False)
        self.by_study: dict[str, list[TrialRecord]] = {}
        seen = set()
        for i, (study, params, fn) in enumerate(cells):
            key = (study, json.dumps(params, sort_keys=True))
            assert key not in seen, f"cell {key} given twice: a world must name each cell once"
            seen.add(key)
            for s in range(({**STUDY_SEEDS, **(seeds or {})}).get(study, SEEDS)):
                p = {**params, "seed": s}
                d = root / study / f"c{i}-s{s}"
                q = fn(s)
                write_run(d, p, q)
                summary = json.loads((d / "summary.json").read_text())
                self.by_study.setdefault(study, []).append(
                    TrialRecord(f"{study}-{i}-{s}", p, q.get("status", "completed"), summary, d, None))

    def trials(self, name: str) -> list[Any]:
        return self.by_study[name]

    def data_ce(self, t: Any) -> DataCE:  # noqa: ARG002 (every synthetic run trains on the same data)
        return CE


def best_run(centre: float, sigma: float = 0.0) -> Callable[[int], dict[str, Any]]:
    """A completed run whose best (= final) val loss is ``centre`` plus the seed's jitter."""
    return lambda s: {"best": centre + jit(s, sigma)}


def gain_run(g: float) -> dict[str, Any]:
    """A completed run whose gain (best val loss - loss at init) is ``g``."""
    return {"best": INIT + g}


def diag_lines(first: dict[str, Any], last: dict[str, Any], n: int = 4) -> list[dict[str, Any]]:
    """n diagnostic lines: the first with ``first``'s values, the rest with ``last``'s."""
    return [{"step": 0, **first}] + [{"step": 10 * (i + 1), **last} for i in range(n - 1)]


def deletion_from_file(ctx: Any, t: Any) -> float | None:  # noqa: ARG001 (the measurement's signature)
    """Stand-in for the layer-deletion measurement (the real one runs in the smoke end-to-end test)."""
    p = Path(t.run_dir) / "deletion.json"
    return json.loads(p.read_text()) if p.exists() else None
