"""The seen-data priors: the effects the lab's published runs saw, per claim part and scale, read
once from ``docs/evidence`` at development time into the committed
``claims/catalogue/seen_priors.json`` (``python -m normlab.claims.seen_priors docs/evidence``).
The design analysis (``claims/design_seen.py``) reads only that file, never docs/.

The published runs (``docs/evidence/claims.json``, ``docs/evidence/*/claims.json`` and a
campaign's stages one level further down) used seeds that a confirmatory campaign will not use
again, so their effects are legitimate exploratory priors.

Which run gives a part's prior, per scale: a prior from another scale is another horizon (the
seed scale trains ten times longer than cpu), so priors are kept per scale and a design reads
those of its own scale. Among the runs at a scale that hold a usable effect for the part, a
confirmatory one (``meta.mode`` "confirmatory", not ``meta.superseded``) wins over an
exploratory or superseded one, and then the most recent (``meta.written_at``): a superseded
run may have measured a quantity since replaced (seed002-clipping), and a confirmatory run's
quantity and rule are those registered now. Only the readings of the quantity the latest run
measured compete: a pilot of a part whose measurement changed (seed001-ln-amplifies, at GPT-2's
init since issue 40) is its prior, not the older confirmatory run of the old quantity.
Critical-lr effects (MOVER, censored) are not priors here: those claims declare their own design
(``catalogue/frontier_design.py``). Quick claims (measured at initialisation by the probe) keep
their probe values under the key ``"probe"`` whatever the run's scale (the probe has no horizon).
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any

from normlab.claims.folder import CLAIMS_JSON, PROBE
from normlab.core.errors import UserError

FORMAT, VERSION = "normlab-seen-priors", 1
PRIORS = Path(__file__).parent / "catalogue" / "seen_priors.json"
MEAN = ("one-sample t", "paired t")  # the effect methods whose prior is one arm's per-seed values


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
        raise UserError(f"{path}: not a seen-priors file; write it with `python -m normlab.claims.seen_priors "
                        "docs/evidence`")
    return doc




def main(argv: list[str]) -> int:
    """Write the committed priors from an evidence folder and say what they hold."""
    from normlab.core.fsutil import atomic_write_text

    if len(argv) != 1:
        print("usage: python -m normlab.claims.seen_priors EVIDENCE_DIR (docs/evidence)", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["FORMAT", "MEAN", "PRIORS", "VERSION", "dumps", "extract", "load"]
