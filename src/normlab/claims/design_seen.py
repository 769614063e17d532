"""The design analysis of a training part from the lab's seen data: each part's own rule at the
seeds its study plans, with the spread and effect its published runs saw (``claims/design.py``).

The published runs (``docs/evidence/claims.json`` and ``docs/evidence/*/claims.json``) used seeds
that a confirmatory campaign will not use again, so their effects are legitimate exploratory
priors. :func:`extract` reads them once, at development time, into the committed
``claims/catalogue/seen_priors.json`` (``python -m normlab.claims.design_seen docs/evidence``);
the package reads only that file, never docs/.

Which run gives a part's prior, per scale: a prior from another scale is another horizon (the
seed scale trains ten times longer than cpu), so priors are kept per scale and a design reads
those of its own scale. Among the runs at a scale that hold a usable effect for the part, a
confirmatory one (``meta.mode`` "confirmatory", not ``meta.superseded``) wins over an
exploratory or superseded one, and then the most recent (``meta.written_at``): a superseded
run may have measured a quantity since replaced (seed002-clipping), and a confirmatory run's
quantity and rule are those registered now. Only the readings of the quantity the latest run
measured compete: a pilot of a part whose measurement changed (seed001-ln-amplifies, at GPT-2's
init since issue 40) is its prior, not the older confirmatory run of the old quantity. Critical-lr effects (MOVER, censored) are not
priors here: those claims declare their own design (``catalogue/frontier_design.py``).

:func:`seen_design` maps each part's seen effect to a design:

- one-sample / paired t: :func:`mean_design` with the SD of the seen per-seed values;
- welch: :func:`mean_design` with each arm's own SD;
- interaction ((a1 - a0) - (b1 - b0), four cells): a Welch difference of two arms of SD
  ``se * sqrt(n / 2)`` (the seen standard error at the seen n); slightly conservative, since
  Welch's degrees of freedom (up to 2(n - 1)) are fewer than the four cells' (4(n - 1));
- rates (clopper-pearson, wilson, exact-unconditional: any effect with counts): :func:`rate_design`
  at the seen rate (a difference: the control's seen rate ``p_b``).

Planned n per arm = the seen n x (the seeds the claim's study plans at the scale) / (the seeds of
that study in the prior's run); with several studies the smallest ratio (the conservative one).
A degenerate spread (SD 0, as when every run diverged to the same value, or fewer than two
values) is replaced by ``SD_FLOOR``, 0.01 in the quantity's own unit (0.01 nats for a loss: the
published runs' per-seed SDs of a loss gain at step 200 lie between 0.002 and 0.014 nats; as many
decades or cosine units elsewhere): no spread is not a noiseless quantity, and would claim
infinite power. A small but real spread is kept as seen.

Quick claims (measured at initialisation by the probe) are designed the same way, from the probe
values of the latest confirmatory run that measured them, kept under the key ``"probe"`` whatever
the run's scale (the probe has no horizon). Their planned n is the seen n x the quick seeds a
registration plans (:func:`at_quick_seeds`: a campaign stage's ``quick_seeds``) / the seen run's
probe seeds; outside it, a quick claim declares its own design or has none.

A prior measured another quantity than the part does now (its ``quantity`` text differs) is no
prior, unless ``REWORDED`` says the text alone changed (the measuring code did not). A part with
no prior of its own takes that of a part with exactly its quantity text (one measurement that two
claims read, e.g. Post-LN's init effect in seed002-init-sensitive and seed004-lr-sensitive).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Iterator

from normlab.claims.design import Design, level, mean_design, planned_seeds, rate_design
from normlab.claims.folder import CLAIMS_JSON
from normlab.core.errors import ConfigError, UserError
from normlab.study.presets import study_preset

FORMAT, VERSION = "normlab-seen-priors", 1
PRIORS = Path(__file__).parent / "catalogue" / "seen_priors.json"
SD_FLOOR = 0.01
MEAN, RATES = ("one-sample t", "paired t"), ("clopper-pearson", "wilson", "exact-unconditional")
# Parts whose quantity text changed after the seen run while what is measured did not.
REWORDED = {k: "b28b60a names the schedule in the text; the measurement (best val loss, post minus pre, shallow-long, "
               "end_gap) is the one the confirm-2a run made"
            for k in ("seed002-post-shallow-long/negligible", "seed004-post-ceiling/ceiling")}
PROBE = "probe"  # the priors' key of the quick claims, and the seeds key of the probe's runs (meta.seeds)
_MEMO: dict[tuple[str, str, str, float, int | None, int | None], dict[str, Design]] = {}
_QUICK: contextvars.ContextVar[int | None] = contextvars.ContextVar("normlab_design_quick_seeds", default=None)


def planned_quick_seeds() -> int | None:
    """The probe seeds a registration plans inside :func:`at_quick_seeds` (None outside)."""
    return _QUICK.get()


@contextlib.contextmanager
def at_quick_seeds(n: int) -> Iterator[None]:
    """Every quick claim's design inside plans ``n`` probe seeds from its seen probe values (a
    campaign stage that registers its quick seeds), instead of its declared design or none."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 3:
        raise ConfigError("quick_seeds", n, "a count of at least 3 probe seeds")
    token = _QUICK.set(n)
    try:
        yield
    finally:
        _QUICK.reset(token)


def _runs(evidence: Path) -> list[tuple[str, dict[str, Any]]]:
    """(folder relative to ``evidence``, "." for itself; its claims.json) of every published run:
    the runs in ``evidence`` and its folders, and a campaign's stages one level further down
    (campaign/new-methods-settled: seeds a later campaign will not use again either)."""
    files = [evidence / CLAIMS_JSON, *sorted(evidence.glob(f"*/{CLAIMS_JSON}")),
             *sorted(evidence.glob(f"*/*/{CLAIMS_JSON}"))]
    return [(f.parent.relative_to(evidence).as_posix(), json.loads(f.read_text(encoding="utf-8")))
            for f in files if f.is_file()]


def _usable(e: dict[str, Any]) -> bool:
    """Whether an effect record can be a prior here (critical-lr effects, no data: not)."""
    m = e.get("method")
    if e.get("counts"):
        return all(int(n) > 0 for n in e["counts"][1::2])  # every arm has runs
    if m in MEAN:
        return bool(e.get("values_a"))
    if m == "welch":
        return bool(e.get("values_a")) and bool(e.get("values_b"))
    return m == "interaction" and e.get("estimate") is not None and bool(e.get("n_a")) and bool(e.get("n_b"))


def _prior(run: str, meta: dict[str, Any], claim: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    e = part["effect"]
    seeds = meta.get("seeds") or {}
    # A sequential stage reads a part at the look it stopped at, on that look's seeds (its first
    # ones): the later seeds other parts took are no runs of it that gave no value.
    looked = (part.get("sequential") or {}).get("stopped_at")
    if looked:
        seeds = {s: list(v)[:int(looked)] for s, v in seeds.items()}
    studies = [PROBE] if claim.get("quick") else claim.get("studies", [])
    return {"method": e["method"],
            "estimate": e.get("estimate"), "values_a": list(e.get("values_a") or []),
            "values_b": list(e.get("values_b") or []), "counts": list(e["counts"]) if e.get("counts") else None,
            "n_a": e.get("n_a"), "n_b": e.get("n_b"), "se": e.get("se"), "run": run,
            "written_at": meta.get("written_at", ""), "confirmatory": _confirmatory(meta),
            "seeds": {s: list(seeds[s]) for s in studies if s in seeds},
            "horizon": part.get("horizon"), "quantity": part.get("quantity", "")}


def _confirmatory(meta: dict[str, Any]) -> bool:
    return meta.get("mode") == "confirmatory" and not meta.get("superseded")


def extract(evidence_dir: str | Path) -> dict[str, Any]:
    """{"format", "version", "priors": {scale: {"claim/part": prior}}} from the published runs
    under ``evidence_dir``: per training part and scale, the prior of the run chosen as the module
    docstring says (the method, estimate, per-seed values or counts, n per arm, the run's folder,
    its seeds of the claim's studies, the horizon when recorded, and the quantity measured)."""
    evidence = Path(evidence_dir)
    runs = _runs(evidence)
    if not runs:
        raise UserError(f"{evidence}: no claims.json here or in its folders; pass the evidence folder (docs/evidence)")
    seen: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for run, doc in runs:
        meta = doc.get("meta") or {}
        scale = meta.get("scale")
        for c in doc.get("claims") or []:
            if not c.get("quick") and not scale:
                continue
            for p in c.get("parts") or []:
                if not isinstance(p.get("effect"), dict) or not _usable(p["effect"]):
                    continue
                at = seen.setdefault(PROBE if c.get("quick") else str(scale), {})
                at.setdefault(f"{c['id']}/{p['id']}", []).append(_prior(run, meta, c, p))
    best: dict[str, dict[str, dict[str, Any]]] = {}
    for scale, parts in seen.items():
        for key, found in parts.items():
            # the part's quantity is the one its latest reading measured; among those readings, as above
            now = max(found, key=lambda x: (x["written_at"], x["run"]))["quantity"]
            best.setdefault(scale, {})[key] = max((x for x in found if x["quantity"] == now),
                                                  key=lambda x: (x["confirmatory"], x["written_at"], x["run"]))
    return {"format": FORMAT, "version": VERSION, "priors": best}


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def load(path: Path = PRIORS) -> dict[str, Any]:
    """The committed priors (the file :func:`extract` wrote)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("format") != FORMAT:
        raise UserError(f"{path}: not a seen-priors file; write it with `python -m normlab.claims.design_seen "
                        "docs/evidence`")
    return doc


def _sd(xs: list[float]) -> float:
    """The per-seed spread; ``SD_FLOOR`` when it is degenerate (see the module docstring)."""
    v = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
    sd = statistics.stdev(v) if len(v) >= 2 else 0.0
    return sd if sd > 0 else SD_FLOOR


def ratio(studies: tuple[str, ...] | list[str], scale: str, seen: dict[str, list[int]]) -> float:
    """Planned over seen seeds, the smallest over the studies the prior's run ran (1 if none)."""
    got = []
    for s in studies:
        if seen.get(s):
            try:
                planned = planned_seeds() or len(study_preset(s, scale).seeds)  # design.at_seeds, else the preset's
                got.append(planned / len(seen[s]))
            except UserError:  # the study has no such scale: it plans nothing to scale by
                continue
    return min(got) if got else 1.0


def quick_ratio(prior: dict[str, Any], fixed: int | None = None) -> float:
    """Planned over seen probe seeds (1 outside :func:`at_quick_seeds`, or when the run's are unknown);
    a measurement that reads ``fixed`` seeds whatever the probe's count plans those (the exact checks)."""
    seen, planned = len((prior.get("seeds") or {}).get(PROBE) or []), planned_quick_seeds()
    if fixed is not None and planned:
        return fixed / max(1, len(prior.get("values_a") or []))
    return planned / seen if planned and seen else 1.0


def design_from(name: str, rule: Any, prior: dict[str, Any], factor: float = 1.0, via: str = "") -> Design:
    """The design of ``rule`` at ``factor`` x the prior's n per arm, from its seen effect (``via``:
    the part whose prior it is, when another's)."""
    def n(x: Any) -> int:
        return max(0, round(int(x) * factor))

    m, est = prior["method"], prior.get("estimate")
    at = f"step {prior['horizon']}, " if prior.get("horizon") is not None else ""
    seen = f"seen {prior['run']}{' as ' + via if via else ''}, {at}"
    if prior.get("counts"):
        c = [int(x) for x in prior["counts"]]
        if len(c) == 2:
            d = rate_design(name, rule, n(c[1]), effect=c[0] / c[1] if c[1] else None)
            note = f"{seen}{c[0]} of {c[1]}"
        else:
            pb = c[2] / c[3] if c[3] else 0.0
            d = rate_design(name, rule, n(c[1]), n(c[3]), p_b=pb, effect=(c[0] / c[1] if c[1] else 0.0) - pb)
            note = f"{seen}{c[0]} of {c[1]} against {c[2]} of {c[3]}"
    elif m in MEAN:
        sd = _sd(prior["values_a"])
        d = mean_design(name, rule, n(len(prior["values_a"])), sd, effect=est)
        note = f"{seen}SD {sd:.3g}"
    elif m == "welch":
        sa, sb = _sd(prior["values_a"]), _sd(prior["values_b"])
        d = mean_design(name, rule, n(len(prior["values_a"])), sa, n(len(prior["values_b"])), sb, effect=est)
        note = f"{seen}SD {sa:.3g} / {sb:.3g}"
    elif m == "interaction":
        k = min(int(prior["n_a"]), int(prior["n_b"]))
        se = prior.get("se")
        sd = se * math.sqrt(k / 2) if se is not None and math.isfinite(se) and se > 0 else SD_FLOOR
        d = mean_design(name, rule, n(prior["n_a"]), sd, n(prior["n_b"]), sd, effect=est)
        note = f"{seen}interaction as two arms of SD {sd:.3g}"
    else:
        raise ValueError(f"{name}: no design for a prior of method {m!r}")
    ran = min((len(v) for v in (prior.get("seeds") or {}).values()), default=0)
    short = [len(prior.get(k) or []) for k in ("values_a", "values_b") if prior.get(k)]
    if not prior.get("counts") and short and min(short) < ran:  # runs with no value: diverged, unfinished
        note += f"; {min(short)} of {ran} seeds gave a value"
    return dataclasses.replace(d, plan=f"{d.plan} ({note})")


def seen_design(claim: Any, scale: str, priors: dict[str, Any] | None = None) -> dict[str, Design]:
    """{part id: Design} of training ``claim`` at ``scale`` from the seen priors (``priors``: a
    document as :func:`extract` gives; None: the committed file). A part with no prior at this
    scale, a prior of another quantity, or a check, is absent."""
    key = (claim.id, scale, claim.rule_hash(scale), level(), planned_seeds(), planned_quick_seeds())
    if priors is None and key in _MEMO:  # another level or count: another analysis
        return dict(_MEMO[key])
    got = (priors if priors is not None else load())["priors"].get(PROBE if claim.quick else scale, {})
    same: dict[str, str] = {}  # quantity text -> the first part (by key) with a prior of it
    for k in sorted(got):
        same.setdefault(got[k].get("quantity", ""), k)
    out: dict[str, Design] = {}
    for p in claim.parts:
        prior = got.get(f"{claim.id}/{p.id}")
        if prior is not None and prior.get("quantity", p.quantity) != p.quantity \
                and f"{claim.id}/{p.id}" not in REWORDED:
            prior = None  # it measured another quantity
        via = "" if prior is not None or p.quantity not in same else same[p.quantity]
        prior = got[via] if via else prior
        if prior is None or p.check:
            continue
        needs = getattr(claim, "needs", None)
        factor = quick_ratio(prior, needs.fixed_seeds() if needs is not None else None) if claim.quick \
            else ratio(claim.studies, scale, prior["seeds"])
        out[p.id] = design_from(f"{claim.id}/{p.id}", p.rule, prior, factor, via)
    if priors is None:
        _MEMO[key] = dict(out)
    return out


def main(argv: list[str]) -> int:
    """Write the committed priors from an evidence folder and say what they hold."""
    from normlab.core.fsutil import atomic_write_text

    if len(argv) != 1:
        print("usage: python -m normlab.claims.design_seen EVIDENCE_DIR (docs/evidence)", file=sys.stderr)
        return 2
    doc = extract(argv[0])
    atomic_write_text(PRIORS, dumps(doc))
    for scale, got in sorted(doc["priors"].items()):
        by = collections.Counter(f"{p['run']} ({p['method']})" for p in got.values())
        print(f"scale {scale}: {len(got)} parts: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))
    print(f"wrote {PRIORS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["PROBE", "REWORDED", "SD_FLOOR", "at_quick_seeds", "design_from", "extract", "load", "planned_quick_seeds",
           "quick_ratio", "ratio", "seen_design"]
