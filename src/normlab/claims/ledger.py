"""Seen seeds: every (study, seed) and every trial the lab has trained or decided on, read from
the files that already record them (no state of its own).

**The key.** A study's seeds are keyed by the study's name (``spec.json``'s ``name``; the quick
measurements at initialisation are the study ``probe``), whatever its config; a trial is also
keyed exactly, by its id (the hash of its whole resolved config, seed included). The name is
the conservative key on purpose: a seed fixes a model's weights at init and its data order, so
two versions of a study that share a seed share their at-init numbers and, with a constant lr
after warm-up, their first steps (a 1000-step run begins with the 200-step run). A config hash
without the seed would call such a seed unseen. Unseen seeds cost nothing (any other integer);
a seen seed called unseen costs the confirmation. The trial id catches the same config under
another study's name (a map cell that another study also trains).

**The sources** (:func:`read`), each a path:

- a study store (``spec.json`` beside ``study.sqlite``): every trial that started;
- a claims folder (``normlab claims --out``): its ``stores/``, ``cache/`` (probe cells and
  decided claims), ``claims.json`` and ``history.jsonl``, and any claims folder below it
  (``docs/evidence/seed/``);
- a ``claims.json`` (``meta.seeds``; else the probe's seeds and the trial ids of every part,
  mapped to seeds through the study presets where they still match) or a ``history.jsonl``
  (each verdict line's ``seeds``; lines older than this field name none; launch and end lines
  name no seeds: what a launch trained is in its stores).

``before``: a store trial or cache file of the run's own ``--out`` counts only when it started
(was written) before that time, the registration's commit: what a confirmatory run trained
after its registration is its own work, resumed; history and claims.json always count, except
for a look of a group-sequential stage (``looks``): its own earlier looks' claims.json and
history lines, written after the registration, are that same registered work
(``claims/sequential_stage.py``), and only the looks the registration names may run so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from normlab.claims.folder import CLAIMS_JSON, HISTORY, PROBE
from normlab.claims.history import is_verdict
from normlab.claims.registration import study_spec
from normlab.core.errors import UserError
from normlab.core.fsutil import read_jsonl
from normlab.study.presets import study_preset
from normlab.study.store import SPEC, Store, peek

_QUICK_SEED = re.compile(r"(?:^|/)seed(\d+)$")


@dataclass
class Seen:
    """Seeds per study and trial ids, each with where it was seen."""

    seeds: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    trials: dict[str, set[str]] = field(default_factory=dict)

    def add_seed(self, study: str, seed: int, where: str) -> None:
        self.seeds.setdefault(study, {}).setdefault(int(seed), set()).add(where)

    def add_trial(self, tid: str, where: str) -> None:
        self.trials.setdefault(tid, set()).add(where)

    def clash(self, study: str, seeds: Iterable[int], trials: dict[str, int] | None = None) -> dict[int, set[str]]:
        """The seeds of ``seeds`` already seen for ``study`` (or whose trial, of ``trials``: id ->
        seed, was seen under any name), each with where."""
        out: dict[int, set[str]] = {}
        for s in seeds:
            if s in self.seeds.get(study, {}):
                out.setdefault(s, set()).update(self.seeds[study][s])
        for tid, s in (trials or {}).items():
            if tid in self.trials:
                out.setdefault(s, set()).update(self.trials[tid])
        return dict(sorted(out.items()))


def read(paths: Iterable[Path], own: Path | None = None, before: float | None = None, looks: bool = False) -> Seen:
    """The ledger of every source in ``paths`` (see the module); ``own``: the run's --out, whose
    stores and cache count only before ``before`` (and, for a sequential stage's look, its
    claims.json and history lines too)."""
    seen = Seen()
    for p in paths:
        p = Path(p)
        mine = own is not None and p.resolve() == Path(own).resolve()
        if p.is_file():
            (_history if p.suffix == ".jsonl" else _claims_json)(seen, p)
        elif Store.is_store(p):
            _store(seen, p, before if mine else None)
        elif p.is_dir():
            _folder(seen, p, before if mine else None, looks and mine)
    return seen


def _written(stamp: Any) -> float | None:
    """A ``written_at`` (2026-12-06T16:00:48Z) in seconds since the epoch (None: none, or another form)."""
    import calendar
    import time

    try:
        return float(calendar.timegm(time.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _folder(seen: Seen, root: Path, before: float | None, looks: bool = False) -> None:
    late = before if looks else None  # a look's own earlier looks: written after the registration
    for f in sorted(root.rglob(CLAIMS_JSON)):
        if "cache" not in f.relative_to(root).parts:
            _claims_json(seen, f, late)
    for f in sorted(root.rglob(HISTORY)):
        _history(seen, f, late)
    for spec in sorted(root.rglob(SPEC)):
        if Store.has_db(spec.parent):
            _store(seen, spec.parent, before)
    for f in sorted(root.rglob("cache/*/*.json")):
        if before is None or f.stat().st_mtime < before:
            _cache_file(seen, f)


def _store(seen: Seen, root: Path, before: float | None) -> None:
    try:
        spec, trials = peek(root)  # read-only: the ledger never writes a store it reads
        name = spec["name"]
    except (OSError, ValueError, KeyError, UserError):
        return  # not a store this version reads: nothing recorded in it can be named
    for t in trials:
        if t.status == "pending" or t.started_at is None or (before is not None and float(t.started_at) >= before):
            continue
        where = f"store {root}"
        seen.add_trial(t.id, where)
        seed = t.params.get("seed")
        if seed is not None:
            seen.add_seed(name, seed, where)


def _records(seen: Seen, records: list[dict[str, Any]], where: str) -> list[str]:
    """Add the probe seeds and trial ids the records' parts used; returns the training trial ids."""
    ids = []
    for r in records:
        for p in [*r.get("parts", []), *r.get("checks", [])]:
            for t in p.get("trials", []):
                if r.get("quick"):
                    m = _QUICK_SEED.search(str(t))
                    if m:
                        seen.add_seed(PROBE, int(m.group(1)), where)
                else:
                    seen.add_trial(str(t), where)
                    ids.append(str(t))
    return ids


def _claims_json(seen: Seen, path: Path, late: float | None = None) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        meta, records = data.get("meta") or {}, data["claims"]
    except (OSError, ValueError, KeyError, AttributeError):
        return
    at = _written(meta.get("written_at"))
    if late is not None and at is not None and at >= late:
        return
    where = f"{path} ({meta.get('written_at', 'undated')})"
    ids = set(_records(seen, records, where))
    probe = meta.get("probe") or {}
    if probe.get("seeds"):
        for s in probe.get("seed_list") or _count(probe):
            seen.add_seed(PROBE, s, where)
    if meta.get("seeds"):
        for study, seeds in meta["seeds"].items():
            for s in seeds:
                seen.add_seed(study, s, where)
        return
    for study in meta.get("studies") or {}:  # an older claims.json: its ids, through the presets
        for s in seeds_of(study, str(meta.get("scale")), ids):
            seen.add_seed(study, s, where)


def _count(probe: dict[str, Any]) -> range:
    first = int(probe.get("first_seed", 0))
    return range(first, first + int(probe["seeds"]))


def sources(reg: Any, out: Path, extra: Iterable[Path] = ()) -> list[Path]:
    """What a confirmatory run consults by default: its own --out, the committed evidence
    (``docs/evidence`` of the repository holding the registration, when there is one) and ``extra``
    (``--seen PATH``: other stores, claims folders, claims.json or history.jsonl files)."""
    got = [Path(out)]
    if reg is not None and reg.file:
        root = Path(reg.path).resolve().parents[len(Path(reg.file).parts) - 1]
        if (root / "docs" / "evidence").is_dir():
            got.append(root / "docs" / "evidence")
    return [*got, *(Path(p) for p in extra)]


def require_unseen(reg: Any, chosen: list[Any], scale: str, quick_seeds: list[int], seen: Seen) -> None:
    """Before anything runs: a confirmatory run refuses, in one line naming each study and its
    seeds, the registered seeds already seen for any study its claims read (``probe``: the quick
    measurements' ``quick_seeds``)."""

    clashes = []
    if any(c.quick for c in chosen):
        got = seen.clash(PROBE, quick_seeds)
        if got:
            clashes.append((PROBE, got))
    for name in dict.fromkeys(n for c in chosen if not c.quick for n in c.studies):
        spec = study_spec(name, scale, reg.seeds(name))
        got = seen.clash(name, spec.seeds, {t.id: int(t.params["seed"]) for t in spec.trials()})
        if got:
            clashes.append((name, got))
    if clashes:
        said = "; ".join(f"study {n} seeds {', '.join(map(str, got))} (seen in {_where(got)})" for n, got in clashes)
        raise UserError(f"--registration {reg.path}: a confirmatory run needs unseen seeds, and these were seen: "
                        f"{said}; register unseen seeds (`normlab claims register --first-seed N`) and commit, or "
                        "pass --exploratory (published as exploratory)")


def _where(got: dict[int, set[str]]) -> str:
    places = sorted({w for ws in got.values() for w in ws})
    return ", ".join(places[:2]) + (f" and {len(places) - 2} more" if len(places) > 2 else "")


def seeds_of(study: str, scale: str, ids: set[str]) -> list[int]:
    """The seeds of study preset ``study`` at ``scale`` whose trials are among ``ids`` (none when
    the preset has changed since those ids were made)."""

    try:
        return sorted({int(t.params["seed"]) for t in study_preset(study, scale).trials() if t.id in ids})
    except Exception:  # an unknown study or scale: nothing to map through  # noqa: BLE001
        return []


def _history(seen: Seen, path: Path, late: float | None = None) -> None:
    try:
        lines = read_jsonl(path)
    except (OSError, ValueError):
        return
    for h in lines:
        if not is_verdict(h):  # a launch or end line: what a launch trained is in its stores
            continue
        at = _written(h.get("written_at"))
        if late is not None and at is not None and at >= late:
            continue
        for study, seeds in (h.get("seeds") or {}).items():
            for s in seeds:
                seen.add_seed(study, s, f"{path} ({h.get('written_at', 'undated')}, {h.get('id')})")


def _cache_file(seen: Seen, path: Path) -> None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))["value"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    where = f"cache {path}"
    if path.parent.name == "probe":
        col = value["columns"].index("seed")
        for row in value["rows"]:
            seen.add_seed(PROBE, int(row[col]), where)
    elif path.parent.name == "claims":
        _records(seen, [value], where)
