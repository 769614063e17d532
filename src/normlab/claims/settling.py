"""The settling engine: training claims read where their outcomes have settled (issue 40).

A training claim whose studies are staged (``StudySpec.stages``, e.g. 200 -> 400 -> 1000 -> 2000
steps; or a claims run's ``stages``) is not read at train.steps alone. Its runs train the first
stage (``StudyContext.trials``), then, stage after stage:

1. each part not yet settled is read at the stage (``HorizonContext(ctx, H)``: its measure run
   on the runs' files up to step H, ``claims/at_horizon.py``): the outcome of every run it reads, its effect,
   and the critical lrs of a frontier part;
2. the registered rule (``study.settle.settle``) says whether it has settled (nothing moved by
   more than its tolerance over the last stage), must be extended, or is unsettled at the
   longest stage;
3. only the runs read by parts to extend are resumed to the next stage
   (``study.extend.extend_to``: one ``extended`` event each in the store's log).

It stops when every part is settled or unsettled at the longest stage. Each part is then
decided at its own horizon, the record at that stage, and gets ``settled_at`` (the horizon),
``drift`` (its effect's change over the last stage), ``lr_drift``, ``settle_status`` and
``settle_text``; an unsettled part is read at the longest stage, scoped to it (its ``steps``
depart from the source's regime) and its note says it was still moving there. The claim's verdict is combined from these parts as ``Claim.decide`` combines
them. Rerunning the command continues: a stage's reading depends only on the runs' files up to
that stage, which never change once passed, so the decisions replay, and a run already at a
stage is not resumed again.

The tolerances: ``tolerances`` maps "claim/part" (or "claim") to the effect tolerance in the
part's own units; without one, a difference of critical lrs (decades) uses ``LR_TOL`` and any
other effect ``EFFECT_TOL``. A registration will fix them per part (issue 40, item 2).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from normlab.claims.at_horizon import HorizonContext, NotAtHorizon
from normlab.claims.claim import Claim, claim_verdict
from normlab.claims.regime import FACTORS, scoped
from normlab.claims.studies import StudyContext
from normlab.core.errors import UserError
from normlab.stats.frontier import Frontier
from normlab.study.at_horizon import reached
from normlab.study.settle import EXTEND, LR_TOL, UNSETTLED, Settled, Settling, Stage, settle

EFFECT_TOL = 0.02  # an effect's tolerance where none is registered: nats for the loss contrasts (margins are 0.05)
Extend = Callable[[StudyContext, str, list[str], int], int]  # (ctx, study, trial ids, step) -> runs resumed


def staged(ctx: StudyContext, claims: list[Claim]) -> dict[str, tuple[int, ...]]:
    """The stages of each claim whose studies are staged (claim id -> stages); a claim whose
    studies are staged differently (or only some of them) is refused in one line."""
    out: dict[str, tuple[int, ...]] = {}
    for c in claims:
        if c.quick or not c.studies:
            continue
        got = {n: tuple(ctx.spec(n).stages or ()) for n in c.studies}
        kinds = set(got.values())
        if kinds == {()}:
            continue
        if len(kinds) > 1:
            shown = ", ".join(f"{n}: {list(s) or 'none'}" for n, s in got.items())
            raise UserError(f"claim {c.id}: its studies are not staged alike ({shown}); give them the same stages")
        out[c.id] = kinds.pop()
    return out


def extend_store(ctx: StudyContext, study: str, ids: list[str], to: int) -> int:
    """Resume the runs ``ids`` of ``study``'s store to step ``to`` (``study.extend.extend_to``)."""
    from normlab.study.executors import default_workers
    from normlab.study.extend import extend_to

    if not ctx.train:
        return 0  # read as they are: a run short of the stage is named by the check after extending
    return extend_to(ctx.store_dir(study), ids, to, workers=ctx.workers or default_workers(1), display=ctx.display)


def _rule(c: Claim, part: str, stages: tuple[int, ...], rec: dict[str, Any],
          tolerances: Mapping[str, float]) -> Settling:
    tol = tolerances.get(f"{c.id}/{part}", tolerances.get(c.id))
    if tol is None:
        tol = LR_TOL if "log10_ratio" in (rec.get("numbers") or {}) else EFFECT_TOL
    return Settling(stages, effect_tol=tol)


def _frontier(d: dict[str, Any]) -> Frontier:
    """A frontier back from its record (``Frontier.as_dict``: its tuples stored as lists)."""
    kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    return Frontier(**kw)


def reading(hctx: Any, rec: dict[str, Any], views: Mapping[str, Any]) -> Stage:
    """A part's reading at ``hctx``'s horizon from its record there: the outcome of each run it
    read, its effect estimate, and the critical lrs of a frontier part (every line record among
    its numbers: a and b, or the four lines of a difference of gaps)."""
    outcomes = {i: hctx.outcome(views[i]) for i in rec.get("trials", []) if i in views}
    numbers = rec.get("numbers") or {}
    critical = {line_name(line): _frontier(line["critical_lr"]) for line in numbers.values()
                if isinstance(line, dict) and isinstance(line.get("critical_lr"), dict)}
    return Stage(hctx.read_at, outcomes, (rec.get("effect") or {}).get("estimate"), critical)


def line_name(line: dict[str, Any]) -> str:
    """A line record's name among a part's critical lrs: placement, depth and warm-up, then its
    parametrisation, width and label where it has them (two lines of a width or optimiser contrast
    share the first three; a part may read four lines, a difference of two gaps)."""
    extra = [str(line[k]) for k in ("param", "width", "label") if line.get(k) is not None]
    return " ".join([f"{line.get('placement')} L{line.get('depth')} w{line.get('warmup')}", *extra])


class Engine:
    """One settling of ``claims`` (see the module doc); :meth:`run` returns their records."""

    def __init__(self, ctx: StudyContext, claims: list[Claim], cache: Any, *,
                 tolerances: Mapping[str, float] | None = None, extend: Extend | None = None) -> None:
        self.ctx, self.cache, self.tol = ctx, cache, dict(tolerances or {})
        self.plan = staged(ctx, claims)
        self.claims = [c for c in claims if c.id in self.plan]
        self.extend = extend or extend_store
        self.records: dict[tuple[str, int], dict[str, Any]] = {}  # (claim, horizon) -> its record there
        self.readings: dict[tuple[str, str], list[Stage]] = {}
        self.result: dict[tuple[str, str], Settled] = {}
        self.rules: dict[tuple[str, str], Settling] = {}
        self._at: dict[int, Any] = {}  # the horizon contexts of this round (their views are written once)

    def at(self, horizon: int) -> Any:
        if horizon not in self._at:
            self._at[horizon] = HorizonContext(self.ctx, horizon)
        return self._at[horizon]

    def record_at(self, c: Claim, horizon: int) -> dict[str, Any]:
        """Claim ``c``'s record read at ``horizon`` (cached per horizon, ``ctx.record``)."""
        if (c.id, horizon) not in self.records:
            try:
                self.records[(c.id, horizon)] = self.at(horizon).record(c, self.cache)
            except NotAtHorizon as e:
                raise UserError(f"claim {c.id} cannot be read at step {horizon}: {e}") from None
        return self.records[(c.id, horizon)]

    def _open(self, c: Claim) -> list[str]:
        return [p.id for p in c.parts if (r := self.result.get((c.id, p.id))) is None or r.status == EXTEND]

    def run(self) -> dict[str, dict[str, Any]]:
        k = 0
        while True:
            todo: dict[tuple[str, int], set[str]] = {}
            active = [c for c in self.claims if k < len(self.plan[c.id]) and self._open(c)]
            if not active:
                break
            for c in active:
                self._read(c, self.plan[c.id][k], todo)
            for (study, to), ids in sorted(todo.items()):
                if self.ctx.display is not None:
                    self.ctx.display.note(f"study {study}: {len(ids)} run(s) of unsettled parts resumed to step {to}")
                self.extend(self.ctx, study, sorted(ids), to)
                self._check_reached(study, ids, to)
            self._at.clear()  # the runs moved on: the next stage's views are written after it
            k += 1
        return {c.id: self._assemble(c) for c in self.claims}

    def _read(self, c: Claim, horizon: int, todo: dict[tuple[str, int], set[str]]) -> None:
        rec = self.record_at(c, horizon)
        hctx = self.at(horizon)
        views = {t.id: t for n in c.studies for t in hctx.trials(n)}
        study_of = {t.id: n for n in c.studies for t in self.ctx.trials(n)}
        parts = {p["id"]: p for p in [*rec["parts"], *rec.get("checks", [])]}
        for pid in self._open(c):
            key = (c.id, pid)
            rule = self.rules.setdefault(key, _rule(c, pid, self.plan[c.id], parts[pid], self.tol))
            self.readings.setdefault(key, []).append(reading(hctx, parts[pid], views))
            got = self.result[key] = settle(rule, self.readings[key])
            if got.status == EXTEND and got.next_horizon is not None:
                for i in parts[pid].get("trials", []):
                    if i in study_of:
                        todo.setdefault((study_of[i], got.next_horizon), set()).add(i)

    def _check_reached(self, study: str, ids: set[str], to: int) -> None:
        """Every run to read at ``to`` is there, or stopped (diverged): none is read short of it."""
        short = [t.id for t in self.ctx.trials(study) if t.id in ids and t.status == "completed"
                 and (reached(t) or 0) < to and not _diverged(t)]
        if short:
            how = "rerun without --no-train to resume them" if not self.ctx.train else "rerun the same command"
            raise UserError(f"study {study}: {len(short)} run(s) of unsettled parts have not reached step {to} "
                            f"(first: {short[0]}); {how}")

    def _assemble(self, c: Claim) -> dict[str, Any]:
        """The claim's record: each part from the stage it settled at (unsettled: the longest it
        was read at), with its settling, and the claim's verdict combined from them."""
        where = {p.id: self.result[(c.id, p.id)].horizon for p in c.parts}
        out = dict(self.record_at(c, max(where.values())))
        for kind in ("parts", "checks"):
            recs = []
            for p in out.get(kind, []):
                got = self.result[(c.id, p["id"])]
                rec = dict(next(x for x in self.record_at(c, got.horizon)[kind] if x["id"] == p["id"]))
                rec.update(horizon=got.horizon, settled_at=got.horizon, drift=got.drift, lr_drift=got.lr_drift,
                           settle_status=got.status, settle_text=got.text(),
                           settling=self.rules[(c.id, p["id"])].spec())
                if got.status == UNSETTLED:  # scoped to the longest stage: its steps depart from the source's
                    rec["departures"] = [f for f in FACTORS if f in {*rec.get("departures", []), "steps"}]
                    rec["verdict"] = scoped(rec["rule_verdict"], rec["departures"])
                    rec["note"] = "; ".join(x for x in (rec.get("note"), f"read at step {got.horizon}, still "
                                                        f"moving ({'; '.join(got.moved)})") if x)
                else:  # read where its outcome settled: the horizon no longer scopes it (SCOPING_RULE 2)
                    rec["departures"] = [f for f in rec.get("departures", []) if f != "steps"]
                    rec["verdict"] = scoped(rec["rule_verdict"], rec["departures"])
                recs.append(rec)
            out[kind] = recs
        raw, away = claim_verdict(out["parts"])
        out.update(rule_verdict=raw, verdict=scoped(raw, away), departures=away, stages=list(self.plan[c.id]))
        return out


def _diverged(t: Any) -> bool:
    from normlab.run.dir import RunDir

    own = RunDir(t.run_dir).summary() or {}
    return own.get("status") == "diverged" or own.get("diverged_at_step") is not None


def settle_claims(ctx: StudyContext, claims: list[Claim], cache: Any, **kw: Any) -> dict[str, dict[str, Any]]:
    """The records of the staged claims among ``claims`` (none staged: an empty dict)."""
    return Engine(ctx, claims, cache, **kw).run()


__all__ = ["EFFECT_TOL", "Engine", "extend_store", "line_name", "reading", "settle_claims", "staged"]
