"""A claim's regime: the settings its source's statement was made in, the lab's beside them,
and the factors on which the two part.

A verdict only speaks for its source where the lab's experiment lies inside the source's
regime on every factor the source says matters (docs/theory.md, "Regimes and the
scaled-down rule"). Each claim declares, per factor, what the source used and whether the
outcome depends on it (``matters``), and, per study scale, whether the lab's setting lies
inside the source's range (``inside``). The lab's side is not typed: :func:`lab_settings`
reads it off the study specs (or the probe's settings) the claim is decided on, so it
cannot drift from what ran.

Where a factor that matters departs, the verdict is scoped to the lab's settings
(:func:`scoped`): "contradicted" becomes "not seen at the lab's settings", never a
statement about the source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The factors compared, in the order the page shows them.
FACTORS = ("optimizer", "lr", "schedule", "warm-up", "init", "clipping", "steps", "depth", "width", "precision",
           "data")

# The scoping rule, registered with the rules (``scoping_spec``): every part of every claim is
# scoped alike. A factor scopes a part where the claim says it matters, and whatever the claim
# says, REQUIRED[kind] matters for every part of a claim of that kind: numbers at
# initialisation depend on the init (xavier vs GPT-2's N(0, 0.02)), and a training outcome on
# the horizon it is read at (a run on the plateau at 200 steps may train by 1000). A required
# factor the claim does not declare, or whose source setting is "not stated", departs (the
# lab's setting cannot lie inside a range the source does not give). Version 2 (issue 40): a
# training part's horizon departs at every scale but the seed scale (which runs a seed's own
# settings, its horizon included, where the claim may declare it inside); a part read
# where its outcome settled (``claims/settling.py``: its classification and effect stopped
# moving between the last two stages) is read free of its horizon, and the engine drops the
# departure there. Two parts that read the same effect are scoped alike because nothing but
# the rule and the settling decides it.
SCOPING_RULE = (2, "factors the claim says matter, plus REQUIRED[kind] for every part; an undeclared or unstated "
                   "required factor departs; a training part's steps depart unless the part settled (read where "
                   "its outcome stopped moving, by the registered settling rule) or, at the seed scale, the "
                   "claim declares the seed's own horizon inside")
SEED_SCALE = "seed"  # the study scale that runs a seed document's own settings, its horizon included
REQUIRED = {"init": ("init",), "training": ("steps",)}

SCOPED = {"supported": "seen at the lab's settings", "contradicted": "not seen at the lab's settings",
          "partly supported": "partly seen at the lab's settings", "inconclusive": "inconclusive"}


@dataclass(frozen=True)
class Factor:
    """One factor of a source's regime."""

    name: str                 # one of FACTORS
    source: str               # the source's setting, in its own terms
    matters: bool             # the source says (or its argument implies) the outcome depends on it
    inside: dict[str, bool] = field(default_factory=dict)  # per study scale: the lab's setting lies inside
    why: str = ""             # why it matters, or why the lab's setting counts as inside (or not)
    parts: tuple[str, ...] = ()  # only these parts (empty: every part of the claim)

    def __post_init__(self) -> None:
        if self.name not in FACTORS:
            raise ValueError(f"factor {self.name!r}: choose one of {', '.join(FACTORS)}")

    def departs(self, scale: str) -> bool:
        """A factor that matters and whose lab setting is not inside the source's range at ``scale``."""
        return self.matters and not self.inside.get(scale, self.inside.get("*", False))

    def departs_by_rule(self, scale: str, kind: str) -> bool:
        """:data:`SCOPING_RULE`: whether this factor departs for a claim of ``kind`` ("init" or "training")."""
        if self.name not in REQUIRED[kind]:
            return self.departs(scale)
        if self.source.lower().startswith("not stated"):
            return True
        if self.name == "steps":  # only the seed scale runs a source's own horizon; elsewhere only a
            return scale != SEED_SCALE or not self.inside.get(scale)  # settled part is free of it (settling.py)
        return not self.inside.get(scale, self.inside.get("*"))


@dataclass(frozen=True)
class Regime:
    """The source's regime of a claim, factor by factor."""

    factors: tuple[Factor, ...]
    note: str = ""

    def departures(self, scale: str, part: str | None = None, kind: str | None = None) -> list[str]:
        """Names of the factors that depart at ``scale`` (for ``part``, or for any part when None);
        ``kind`` ("init" or "training"): by :data:`SCOPING_RULE` (a required factor the claim does
        not declare departs too, for every part), else by the claim's own declarations."""
        if kind is None:
            return [f.name for f in self.factors if f.departs(scale) and (part is None or not f.parts or part in f.parts)]
        out = [f.name for f in self.factors if f.departs_by_rule(scale, kind)
               and (part is None or not f.parts or part in f.parts or f.name in REQUIRED[kind])]
        declared = {f.name for f in self.factors}
        out += [n for n in REQUIRED[kind] if n not in declared]
        return [n for n in FACTORS if n in out]

    def scoping_spec(self, kind: str) -> dict[str, Any]:
        """What decides this claim's scoping (hashed and registered with its rules): the rule and
        every factor's declaration (not the lab's settings, which are read off the studies)."""
        return {"rule": list(SCOPING_RULE), "required": list(REQUIRED[kind]),
                "factors": [{"name": f.name, "source": f.source, "matters": f.matters, "inside": dict(sorted(f.inside.items())),
                             "parts": list(f.parts)} for f in self.factors]}

    def spec(self, scale: str, lab: dict[str, str], kind: str | None = None) -> dict[str, Any]:
        """The claims.json record: every factor with the source's and the lab's setting (``kind``:
        scoped by :data:`SCOPING_RULE`, a required factor the claim does not declare listed too)."""
        rows = []
        required = REQUIRED[kind] if kind else ()
        for f in self.factors:
            req = f.name in required
            departs = f.departs_by_rule(scale, kind) if kind else f.departs(scale)
            rows.append({"factor": f.name, "source": f.source, "lab": lab.get(f.name, "-"), "matters": f.matters or req,
                         "inside": not departs if req else f.inside.get(scale, f.inside.get("*", False)),
                         "departs": departs, "why": f.why, "parts": [] if req else list(f.parts)})
        rows += [{"factor": n, "source": "not stated", "lab": lab.get(n, "-"), "matters": True, "inside": False,
                  "departs": True, "why": "required by the scoping rule, not declared by the claim", "parts": []}
                 for n in required if n not in {f.name for f in self.factors}]
        return {"factors": rows, "departures": self.departures(scale, kind=kind), "note": self.note}


def factor(name: str, source: str, *, matters: bool = True, inside: bool | dict[str, bool] = True, why: str = "",
           parts: tuple[str, ...] = ()) -> Factor:
    """A :class:`Factor`; ``inside`` a bool applies at every scale."""
    return Factor(name, source, matters, {"*": inside} if isinstance(inside, bool) else dict(inside), why, parts)


def scoped(verdict: str, departures: list[str]) -> str:
    """The verdict as it may be stated: the rule's own where no factor departs, else scoped."""
    return SCOPED.get(verdict, verdict) if departures else verdict


def lab_settings(base: dict[str, Any], axes: dict[str, list[Any]], seeds: int) -> dict[str, str]:
    """The lab's side of a regime, read off a study's base config and axes."""
    m, o, t = base.get("model", {}), base.get("optim", {}), base.get("train", {})

    def ax(key: str, default: Any) -> str:
        vals = axes.get(key, [default])
        return ", ".join(str(v) for v in vals)

    warm = axes.get("optim.warmup_steps", [o.get("warmup_steps", 100)])
    steps = t.get("steps", 2000)
    clip = o.get("grad_clip", 1.0)
    return {
        "optimizer": f"AdamW (beta1 {o.get('beta1', 0.9):g}, beta2 {o.get('beta2', 0.99):g}, "
                     f"weight decay {o.get('weight_decay', 0.1):g})",
        "lr": ", ".join(f"{v:g}" for v in axes.get("optim.lr", [o.get("lr", 1e-3)])),
        "schedule": ax("optim.schedule", o.get("schedule", "cosine")),
        "warm-up": f"{', '.join(str(w) for w in warm)} of {steps} steps",
        "init": ax("model.init", m.get("init", "gpt2")),
        "clipping": "none" if not clip else f"global norm {clip:g}",
        "steps": f"{steps} steps of {t.get('batch_size', 12)} x {m.get('context', 256)} tokens, {seeds} seeds",
        "depth": ax("model.n_layer", m.get("n_layer", 6)) + " blocks",
        "width": f"d = {m.get('d_model', 128)}",
        "precision": t.get("dtype", "float32"),
        "data": "Tiny Shakespeare, characters",
    }


def probe_settings(probe: dict[str, Any]) -> dict[str, str]:
    """The lab's side for claims decided at initialisation (the probe's settings)."""
    return {"init": str(probe.get("init", "-")), "steps": "at initialisation (no training)",
            "depth": ", ".join(str(d) for d in probe.get("depths", [])) + " blocks",
            "width": f"d = {probe.get('d_model', '-')}, d_ff = {probe.get('d_ff', '-')}", "precision": "float32",
            "data": f"Tiny Shakespeare, {probe.get('batch', '')}", "optimizer": "-", "lr": "-", "schedule": "-",
            "warm-up": "-", "clipping": "-"}


def merge_settings(many: dict[str, dict[str, str]]) -> dict[str, str]:
    """Several studies' settings (study name -> settings) as one: a factor on which the studies
    differ lists each study's value with its name."""
    out: dict[str, str] = {}
    for k in FACTORS:
        vals = {name: s[k] for name, s in many.items() if k in s}
        if len(set(vals.values())) == 1:
            out[k] = next(iter(vals.values()))
        elif vals:
            out[k] = "; ".join(f"{name}: {v}" for name, v in vals.items())
    return out
