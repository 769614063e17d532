"""The study preset of ``normlab demo`` (``make demo``): ``pre-vs-post-demo``.

Seed 002's pet project asks whether Pre-LN trains faster and lower than Post-LN at identical
hyper-parameters, and whether Post-LN needs warm-up. ``pre-vs-post`` (36 runs, lr 1e-3
cosine) answers it at a learning rate where Post-LN without warm-up is a knife edge: which
seeds stall depends on the CPU's float kernels. This preset sits away from the edge, in a
cell of the lab's own stability map (``stability-map``; docs/evidence/maps/stability-map/):
the map's base (d=64, context 64, batch 16, xavier init, constant lr after linear warm-up, no
clipping) at 6 blocks and lr 3e-3, where Post-LN without warm-up stalled at step 200 in 5 of 5
seeds of the exploratory run and 4 of 4 of the confirmatory one, with warm-up 50 trained in
every seed of both, and Pre-LN trained in every seed either way. One seed more or less on either side moves no verdict.

It logs the training loss at every step and validates every ``eval_every`` steps, so the
page draws per-step training curves and a validation curve (``report.demo_page``).
"""

from __future__ import annotations

from typing import Any

from normlab.study.map_preset import map_base
from normlab.study.presets import _pick
from normlab.study.spec import StudySpec

NAME = "pre-vs-post-demo"

# The map's cell (lr, depth, warm-up W) and the demo's own length and cadences per scale.
# cpu: 300 steps (the map's 200 plus 100, so the page shows whether a stalled run leaves the
# plateau soon after the map's horizon), validation every 25 steps on the map's 10 fixed
# batches (12 points a run), 6 seeds (the smallest sample at which 6 of 6 shows "more than
# half" with an exact interval), one checkpoint, at the end. smoke: 3 seeds, so that the
# verdict is weighed (fewer than 3 a side never is). horizon: the step H at which the page
# counts the seeds still on the plateau, the stability map's length at that scale.
DEMO: dict[str, dict[str, Any]] = {
    "smoke": {"lr": 3e-3, "n_layer": 2, "warmup": 5, "steps": 20, "eval_every": 5, "eval_batches": 2,
              "seeds": [0, 1, 2], "horizon": 20},
    "cpu": {"lr": 3e-3, "n_layer": 6, "warmup": 50, "steps": 300, "eval_every": 25, "eval_batches": 10,
            "seeds": list(range(6)), "horizon": 200},
    # gpu: the gpu map's base (d=384, context 256, batch 64) at the same cell; that map is not
    # published yet, so this scale's setting is the cpu map's, not a measured cell of its own
    "gpu": {"lr": 3e-3, "n_layer": 6, "warmup": 300, "steps": 3000, "eval_every": 100, "eval_batches": 20,
            "seeds": list(range(6)), "horizon": 3000},
}


def horizon(spec: dict[str, Any]) -> int:
    """H, the step at which the page counts the seeds still on the plateau: the map's own length
    (200 at cpu) for the preset's scales, else (a study edited away from them) the run's length."""
    train = spec.get("base", {}).get("train", {})
    lr = spec.get("base", {}).get("optim", {}).get("lr")
    row = next((d for d in DEMO.values() if (d["steps"], d["lr"]) == (train.get("steps"), lr)), None)
    return int(row["horizon"]) if row else int(train.get("steps") or 0)


def demo_settings(scale: str) -> dict[str, Any]:
    """The table row of ``scale`` (a ConfigError naming the scales otherwise)."""
    return dict(_pick(scale, DEMO, NAME))


def pre_vs_post_demo(scale: str = "cpu") -> StudySpec:
    """Seed 002's pet project away from the knife edge, for ``normlab demo``: Post-LN and
    Pre-LN with identical hyper-parameters, warm-up {0, W}, the training loss logged at every
    step. cpu: the stability map's base at 6 blocks, lr 3e-3 (d=64, context 64, batch 16,
    xavier, constant lr, unclipped), 300 steps, warm-up {0, 50}, 6 seeds: 24 runs."""
    d = demo_settings(scale)
    base = map_base(scale)
    base["model"]["n_layer"] = d["n_layer"]
    base["optim"]["lr"] = d["lr"]
    base["train"].update({"steps": d["steps"], "eval_every": d["eval_every"], "eval_batches": d["eval_batches"],
                          "log_every": 1, "checkpoint_every": 0})
    return StudySpec(name=NAME, base=base, seeds=list(d["seeds"]),
                     axes={"model.placement": ["post", "pre"], "optim.warmup_steps": [0, d["warmup"]]},
                     description="Seed 002 away from the knife edge: Pre-LN and Post-LN at identical settings, "
                                 "with and without warm-up, where the stability map says Post-LN needs it")


__all__ = ["DEMO", "NAME", "demo_settings", "pre_vs_post_demo"]
