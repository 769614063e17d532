"""The options of one claims run, checked when they are made: ``normlab claims``'s flags as a
record, so that the steps (``plan``, ``train``, ``decide``, ``publish``) take one argument and
a wrong value is a UserError that names its option before anything is measured or written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.claims.claim import CLAIMS
from normlab.core.errors import UserError
from normlab.study.presets import SCALES


@dataclass
class ClaimsRun:
    """What ``normlab claims`` (or :func:`normlab.claims.run_claims`) decides, where, and how."""

    quick: bool = True                  # --quick: only the claims decidable at initialisation
    out: Path = Path("claims")          # --out: claims.json, index.html, history.jsonl, figures/, stores/, cache/
    only: list[str] = field(default_factory=list)  # --only: these claim ids (empty: every claim)
    seeds: int = 5                      # --seeds: seeds of the quick measurements
    depths: list[int] | None = None     # the probe's depths (None: claims.measure.DEPTHS)
    d_model: int = 128                  # the probe's width
    scale: str = "cpu"                  # --scale: size of the training studies
    workers: int | None = None          # --workers: parallel training processes (None: one per core)
    train: bool = True                  # not --no-train: run the studies, else read their stores as they are
    progress: Any = False               # not --quiet: True, or a normlab.core.progress.Progress to feed
    cache: bool = True                  # not --no-cache: read and write OUT/cache
    registration: Path | None = None    # --registration: a committed `claims register` file
    allow_post_hoc: bool = False        # --allow-post-hoc
    exploratory: bool = False           # --exploratory: with --registration, seen seeds allowed, published as exploratory
    seen: list[Path] = field(default_factory=list)  # --seen PATH: more stores / claims folders / histories to consult
    embed: bool = True                  # not --link-figures: the page embeds its figures
    # study -> nested stages (e.g. {"stability-map": [200, 400, 1000, 2000]}): its claims are read
    # where they settle (claims/settling.py); empty: each study's own (the presets have none)
    stages: dict[str, list[int]] = field(default_factory=dict)
    # study -> how many of its registered seeds this run reads (the first ones): a group-sequential
    # stage's look (claims/sequential_stage.py); empty: every registered seed
    seed_counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.only = list(self.only or [])
        self.registration = None if self.registration is None else Path(self.registration)
        self.seen = [Path(p) for p in self.seen or []]
        missing = [str(p) for p in self.seen if not p.exists()]
        if missing:
            raise UserError(f"--seen {missing[0]}: no such file or folder; give a study store, a claims --out folder, "
                            "a claims.json or a history.jsonl")
        if self.seeds < 3:
            raise UserError(f"--seeds={self.seeds}: need at least 3 seeds (fewer is inconclusive by rule)")
        scales = (*SCALES, *self.extra_scales())
        if self.scale not in scales:
            raise UserError(f"--scale={self.scale}: choose one of {', '.join(scales)}")
        for i in self.only:
            CLAIMS.get(i, "--only")  # an unknown id fails listing the valid ones
        self.stages = {str(k): list(v) for k, v in (self.stages or {}).items()}  # checked with the study's spec
        self.seed_counts = {str(k): v for k, v in (self.seed_counts or {}).items()}
        for k, v in self.seed_counts.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 3:
                raise UserError(f"seed_counts[{k}]={v!r}: a count of at least 3 of the study's registered seeds")
        if self.seed_counts and self.registration is None:
            raise UserError("seed_counts: reads the first seeds of a registration's studies; give --registration")

    @staticmethod
    def extra_scales() -> list[str]:
        """Scales only some claims have (e.g. "seed": seed 002's own settings)."""
        return sorted({s for _, c in CLAIMS.items() for s in c.experiments})
