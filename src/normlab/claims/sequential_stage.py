"""A campaign stage whose seeds come in group-sequential looks (issue 40: a registered
group-sequential rule adds seeds only to undecided parts, up to a registered maximum).

The plan's stage says ``sequential = {looks = [4, 6, 8], alpha = 2.5e-4}``. Its registration
registers every study with the largest look's seeds and the design: the looks, ``alpha`` and
each look's share of it (``stats.sequential.SeedPlan.weights``: the Lan-DeMets O'Brien-Fleming
increments). The stage then runs look by look:

1. the registered claims run reads the first n_k seeds of each study still needed
   (``ClaimsRun.seed_counts``), trained or resumed into OUT/STAGE as any stage, settling
   included;
2. its claims.json is kept as OUT/STAGE/looks/<n_k>/claims.json, and each part not yet stopped
   is looked at (``SeedPlan.weighted_look``): it stops when its verdict is decisive and its p
   is below the look's share of ``alpha``, or at the largest look;
3. the studies of the claims with a part still open get the next look's seeds; a study that no
   open part reads keeps its seeds and trains nothing more.

When every part has stopped, OUT/STAGE/claims.json is composed from the looks: each part as
read at the look it stopped at, its ``p`` the combined p-value min_k p_k / w_k over the looks
made (valid whatever decided the stopping, so the catalogue's one Holm adjusts it as any other
p), with a ``sequential`` record (the p of each look, its level, where it stopped); each claim's
verdict is recombined from its parts, the stage's Holm recomputed, the table and page redrawn.
Register ``alpha`` as 0.05 / m, m the catalogue's p-values when the stage publishes: a part
that stops then also passes the catalogue's Holm (whose strictest step is 0.05 / m).

Rerunning continues: a look whose claims.json is kept is replayed from it (the decisions
depend on it alone) and the first look without one runs.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

from normlab.claims.folder import CLAIMS_JSON
from normlab.core.errors import ConfigError, UserError
from normlab.stats.sequential import INCONCLUSIVE, SeedPlan

LOOKS = "looks"  # OUT/STAGE/looks/<seeds>/claims.json: each look's reading (this module owns the folder)
RunAt = Callable[[dict[str, int]], None]  # run the stage's claims with these seed counts per study


def parse(where: str, d: Any) -> SeedPlan | None:
    """A stage's ``sequential`` table as a SeedPlan (None: not sequential); errors name the key."""
    if d is None:
        return None
    if not isinstance(d, dict) or "looks" not in d or set(d) - {"looks", "alpha"}:
        raise ConfigError(f"{where}.sequential", d, "a table {looks = [4, 6, 8], alpha = 2.5e-4}: the seed counts "
                          "of the looks (the last the registered maximum) and the level a part must pass to stop")
    looks, alpha = d["looks"], d.get("alpha", 0.05)
    if not isinstance(looks, list) or not all(isinstance(n, int) and not isinstance(n, bool) for n in looks):
        raise ConfigError(f"{where}.sequential.looks", looks, "a list of seed counts, e.g. [4, 6, 8]")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool):
        raise ConfigError(f"{where}.sequential.alpha", alpha, "a level in (0, 1), e.g. 2.5e-4 (0.05 / 200)")
    try:
        return SeedPlan(tuple(looks), float(alpha))
    except ConfigError as e:
        raise ConfigError(f"{where}.{e.field}", e.value, e.fix) from None


def spec(sp: SeedPlan) -> dict[str, Any]:
    """What a registration records of the design."""
    return {**sp.spec(), "weights": list(sp.weights()), "rule": "weighted Bonferroni over the looks"}


def registered(doc: dict[str, Any]) -> SeedPlan | None:
    """The design a registration document records (None: not a sequential stage)."""
    d = doc.get("sequential")
    return None if d is None else SeedPlan(tuple(d["looks"]), float(d["alpha"]))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read this look's claims.json ({e}); delete it and run the stage again, "
                        "which repeats the look from its stores") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise UserError(f"{path}: not a claims.json; delete it and run the stage again")
    return data


def _keep(out: Path, n: int) -> Path:
    """Copy the look's OUT/STAGE/claims.json to OUT/STAGE/looks/<n>/ (a reader sees all or none)."""
    from normlab.core.fsutil import atomic_write_bytes

    dst = out / LOOKS / str(n) / CLAIMS_JSON
    dst.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(dst, (out / CLAIMS_JSON).read_bytes())
    return dst


def run_looks(out: Path, sp: SeedPlan, studies: dict[str, list[str]], run_at: RunAt) -> dict[str, Any]:
    """Run (or replay) the looks of a stage whose claims read ``studies`` (claim -> its studies)
    into ``out``; returns the composed claims.json document (written to OUT/claims.json)."""
    counts = {st: sp.looks[0] for sts in studies.values() for st in sts}
    stopped: dict[tuple[str, str], int] = {}
    ps: dict[tuple[str, str], dict[int, float | None]] = {}
    looks: dict[int, dict[str, Any]] = {}
    for k, n in enumerate(sp.looks):
        kept = out / LOOKS / str(n) / CLAIMS_JSON
        if not kept.exists():
            run_at(dict(counts))
            kept = _keep(out, n)
        looks[n] = _read(kept)
        open_claims: set[str] = set()
        for r in looks[n]["claims"]:
            for p in r["parts"]:
                key = (r["id"], p["id"])
                if key in stopped:
                    continue
                ps.setdefault(key, {})[n] = p.get("p")
                # a descriptive part (no verdict) holds no study open: it is read at the first look
                if p.get("descriptive") or sp.weighted_look(n, p.get("verdict", INCONCLUSIVE), p.get("p")).stop:
                    stopped[key] = n
                else:
                    open_claims.add(r["id"])
        if not open_claims:
            break
        for c in open_claims:  # only the studies an open part reads get the next look's seeds
            for st in studies.get(c, []):
                counts[st] = sp.looks[k + 1]
    doc = compose(sp, looks, stopped, ps)
    write(out, doc)
    return doc


def descriptive_text(at: int) -> str:
    """Where a descriptive part stopped (it is read at the first look and has no verdict)."""
    return f"registered as descriptive: read at the first look ({at} seeds), no verdict"


SEEDS_LIMIT = "inconclusive, limited by seeds"  # the tail stats.sequential.Look writes at the maximum


def text(part: dict[str, Any]) -> str | None:
    """A composed part's sequential sentence (None: not sequential). A descriptive part's is
    derived from its mark: stages composed before the mark existed wrote the undecided one. A part
    with no p-value at its last look was not stopped by its seeds, whatever the look wrote: its
    rule gave none (no run of either arm trained, say), and more seeds fail alike."""
    seq = part.get("sequential") or {}
    if not seq:
        return None
    if part.get("descriptive"):
        return descriptive_text(int(seq["stopped_at"]))
    said = str(seq.get("text") or "")
    last = (seq.get("p_by_look") or {}).get(str(seq.get("stopped_at")), 0.0)
    if last is None and said.endswith(SEEDS_LIMIT):
        return said[:-len(SEEDS_LIMIT)] + ("inconclusive, with no p-value that more seeds could lower (its limit: the table of the "
                                               "parts not decided)")
    return said


def compose(sp: SeedPlan, looks: dict[int, dict[str, Any]], stopped: dict[tuple[str, str], int],
            ps: dict[tuple[str, str], dict[int, float | None]]) -> dict[str, Any]:
    """The stage's claims.json from its looks: each part as read where it stopped (the last look
    made where it never did), with the combined p and its ``sequential`` record; each claim's
    verdict recombined and the stage's Holm recomputed."""
    from normlab.claims.claim import claim_verdict
    from normlab.claims.holm import adjust, holm_verdicts
    from normlab.claims.regime import scoped

    last = max(looks)
    doc = copy.deepcopy(looks[last])
    read = {n: {(r["id"], p["id"]): p for r in d["claims"] for p in r["parts"]} for n, d in looks.items()}
    levels = dict(zip(sp.looks, (w * sp.alpha for w in sp.weights())))
    for r in doc["claims"]:
        parts = []
        for p in r["parts"]:
            key = (r["id"], p["id"])
            at = stopped.get(key, last)
            part = copy.deepcopy(read[at].get(key, p))
            seen = ps.get(key, {at: part.get("p")})
            look = sp.weighted_look(at, part.get("verdict", INCONCLUSIVE), part.get("p"))
            text = descriptive_text(at) if part.get("descriptive") else look.text()
            part["sequential"] = {"stopped_at": at, "p_by_look": {str(n): v for n, v in seen.items()},
                                  "levels": {str(n): levels[n] for n in seen},
                                  "decided": look.verdict != INCONCLUSIVE and not part.get("descriptive"),
                                  "text": text}
            part["p_look"], part["p"] = part.get("p"), sp.combined_p(seen)
            parts.append(part)
        r["parts"] = parts
        r["verdict"] = scoped(*claim_verdict(parts))
    from normlab.claims.output import provenance

    doc["meta"] = {**doc.get("meta", {}), **provenance(), "sequential": spec(sp), "family_size": adjust(doc["claims"])}
    holm_verdicts(doc["claims"])
    return doc


def write(out: Path, doc: dict[str, Any]) -> None:
    """OUT/claims.json as composed, its history line, and the table and page drawn from it."""
    from normlab.claims.history import update_history
    from normlab.claims.output import render_from_json
    from normlab.core.fsutil import atomic_write_text

    atomic_write_text(out / CLAIMS_JSON, json.dumps(doc, indent=2, default=float))
    update_history(doc["claims"], out, doc["meta"])
    render_from_json(out)


__all__ = ["LOOKS", "compose", "descriptive_text", "parse", "registered", "run_looks", "spec", "text"]
