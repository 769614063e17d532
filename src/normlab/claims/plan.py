"""Step 1 of a claims run: which claims, what data they need, and the registration checked,
before anything is measured or trained.

:func:`plan` chooses the claims (``--only``, ``--quick``, ``--scale``), checks a
``--registration`` against their rules, and puts all the work of the run on one progress
display: the probe cells and extra measurements the quick claims declare (``Claim.needs``;
the whole grid when every quick claim is chosen, for the page's context figures) and the
trials of the studies the training claims read (``Claim.studies``), each counted against what
``OUT/cache`` and ``OUT/stores`` already hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from normlab.claims import ledger
from normlab.claims.cache import Cache
from normlab.claims.claim import CLAIMS, Claim
from normlab.claims.measure import FIGURE_NEEDS, Needs
from normlab.claims.options import ClaimsRun
from normlab.claims.quickrun import QuickRun
from normlab.claims.registration import Registration, load, require_match
from normlab.claims.studies import StudyContext
from normlab.core.errors import UserError
from normlab.core.progress import Progress
from normlab.study.presets import SCALES


@dataclass
class ClaimsPlan:
    """A planned claims run: the chosen claims and what measures, trains and caches them."""

    run: ClaimsRun
    claims: list[Claim]                # in the order of the records (the catalogue's, or --only's)
    registration: Registration | None
    display: Progress
    store: Cache                       # OUT/cache (the training claims'; the quick ones' unless registered)
    ctx: StudyContext                  # the studies' stores
    quick: QuickRun | None             # the quick claims' measurements (None: no quick claim chosen)
    figures: list[Needs] = field(default_factory=list)  # the page's context figures: the whole grid
    studies: list[str] = field(default_factory=list)    # the studies the training claims read, each once
    # "confirmatory": registered, and every registered seed unseen by the sources consulted
    # (claims/ledger.py); "exploratory": anything else (no registration, or --exploratory)
    mode: str = "exploratory"

    @property
    def quick_claims(self) -> list[Claim]:
        return [c for c in self.claims if c.quick]

    @property
    def training_claims(self) -> list[Claim]:
        return [c for c in self.claims if not c.quick]

    def close(self) -> None:
        """Close the display, unless the caller gave it (the caller closes its own)."""
        if self.display is not self.run.progress:
            self.display.close()


def choose(run: ClaimsRun) -> list[Claim]:
    """The claims ``run`` decides; a UserError naming the option when there are none, or when
    ``--scale`` is one only some of them have."""
    chosen = [CLAIMS.get(i, "--only") for i in run.only] if run.only else [c for _, c in CLAIMS.items()]
    chosen = [c for c in chosen if c.quick or not run.quick]
    if run.scale not in SCALES:
        have = sorted(i for i, c in CLAIMS.items() if run.scale in c.experiments)
        lacking = [c.id for c in chosen if run.scale not in c.experiments]
        if run.quick or lacking:
            raise UserError(f"--scale={run.scale}: only claims {', '.join(have)} have this scale; "
                            f"run `normlab claims --scale {run.scale} {' '.join('--only ' + i for i in have)}`")
    if not chosen:
        raise UserError("--only: every named claim needs training; drop --quick to run them")
    return chosen


def stages_of(run: ClaimsRun, reg: Registration | None) -> dict[str, list[int]]:
    """The studies' stages: a registration's (which the run may repeat, not change), else the run's."""
    got = {} if reg is None else {n: s for n in reg.doc.get("studies", {}) if (s := reg.stages(n))}
    for n, s in run.stages.items():
        if reg is not None and got.get(n) != list(s):
            raise UserError(f"stages of study {n}: {list(s)} differ from the registered {got.get(n) or 'none'} "
                            f"({run.registration}); run with the registered stages")
    return got if reg is not None else dict(run.stages)


def seeds_of(run: ClaimsRun, reg: Registration | None) -> dict[str, list[int]]:
    """Each registered study's seeds, the first ``run.seed_counts[study]`` of them where a
    group-sequential look names a count (a count beyond the registered seeds is refused)."""
    if reg is None:
        return {}
    got = {n: s for n in reg.doc.get("studies", {}) if (s := reg.seeds(n))}
    from normlab.claims.sequential_stage import registered

    design = registered(reg.doc)
    looks = list(design.looks) if design is not None else []
    for n, k in run.seed_counts.items():
        if k not in looks:
            raise UserError(f"seed_counts[{n}]={k}: {run.registration} registers "
                            + (f"looks at {', '.join(map(str, looks))} seeds" if looks else "no sequential looks")
                            + "; a run may read only a registered look's seeds")
        if n not in got:
            raise UserError(f"seed_counts[{n}]: not a study of {run.registration} with registered seeds; "
                            f"valid: {', '.join(sorted(got)) or 'none'}")
        if k > len(got[n]):
            raise UserError(f"seed_counts[{n}]={k}: {run.registration} registers {len(got[n])} seeds for it")
        got[n] = got[n][:k]
    return got


def plan(run: ClaimsRun) -> ClaimsPlan:
    """Choose, check the registration (before anything is measured or trained), plan the work."""
    chosen = choose(run)
    reg, mode = None, "exploratory"
    if run.registration is not None:
        reg = load(run.registration)
        require_match(reg, chosen, run.scale, run.quick, run.allow_post_hoc)
    quick_seeds = (reg.quick_seeds() if reg is not None else None) or list(range(run.seeds))
    if reg is not None and not run.exploratory:
        seen = ledger.read(ledger.sources(reg, run.out, run.seen), own=run.out, before=reg.committed_at,
                           looks=bool(run.seed_counts))
        ledger.require_unseen(reg, chosen, run.scale, quick_seeds, seen)
        mode = "confirmatory"
    display = run.progress if isinstance(run.progress, Progress) else Progress("claims", enabled=bool(run.progress))
    store = Cache(run.out / "cache" if run.cache else None)
    ctx = StudyContext(run.out, scale=run.scale, workers=run.workers, train=run.train, display=display,
                       seeds=seeds_of(run, reg), stages=stages_of(run, reg))
    p = ClaimsPlan(run, chosen, reg, display, store, ctx, None, mode=mode)
    try:
        fast = p.quick_claims
        if fast:
            # a registered run measures the quick claims now (their data must not predate the registration)
            p.quick = QuickRun(len(quick_seeds), run.depths, run.d_model, Cache(None) if reg is not None else store,
                               display, first_seed=quick_seeds[0])
            # the context figures of the page need the whole grid: only when every quick claim is decided
            p.figures = [FIGURE_NEEDS] if {c.id for c in fast} == {i for i, c in CLAIMS.items() if c.quick} else []
            p.quick.plan(fast, p.figures)
        p.studies = list(dict.fromkeys(n for c in p.training_claims for n in c.studies))
        if p.studies and run.train:
            ctx.plan(p.studies)
    except BaseException:
        p.close()
        raise
    return p


__all__ = ["ClaimsPlan", "choose", "plan"]
