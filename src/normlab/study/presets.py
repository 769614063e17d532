"""Study presets: functions ``fn(scale) -> StudySpec`` reproducing published or seed experiments.

``scale`` picks the size: ``smoke`` (seconds, for checking the pipeline), ``cpu`` (the
default: minutes on a laptop), ``gpu`` (the papers' sizes, nanoGPT's baby GPT), and for
``pre-vs-post`` also ``seed`` (seed 002's own hyper-parameters), for ``stability-frontier``
also ``quick``. A preset whose function also takes ``placements`` lets ``--placements`` choose
them. Throughput behind the cpu sizes is measured in docs/studies.md.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from normlab.core.errors import NO_VALUE, ConfigError
from normlab.core.registry import Registry
from normlab.model.catalogue import PLACEMENTS
from normlab.study.spec import StudySpec

StudyPreset = Callable[..., StudySpec]  # (scale) -> StudySpec; some also take placements=
STUDY_PRESETS: Registry[StudyPreset] = Registry("study preset", "study", catalogue="normlab.study.catalogue")
SCALES = ("smoke", "cpu", "gpu")

# Model and loop per scale. cpu: d=128, 4 heads, context 64, batch 16 trains at about
# 7k tokens/s on one core (docs/studies.md), i.e. ~6 steps/s for a 6-block model.
_MODEL: dict[str, dict[str, Any]] = {
    "smoke": {"d_model": 32, "n_head": 2, "context": 32},
    "cpu": {"d_model": 128, "n_head": 4, "context": 64},
    "gpu": {"d_model": 384, "n_head": 6, "context": 256, "dropout": 0.2},
}
_BATCH = {"smoke": 8, "cpu": 16, "gpu": 64}


def _base(scale: str, steps: int, *, lr: float, warmup: int = 0, schedule: str = "cosine",
          n_layer: int = 6, evals: int = 5, **model: Any) -> dict[str, Any]:
    """Base RunConfig data shared by the presets: one model size per scale."""
    every = max(1, steps // evals)
    return {
        "model": {**_MODEL[scale], "n_layer": n_layer, **model},
        "optim": {"lr": lr, "min_lr": lr / 10 if schedule != "constant" else lr, "warmup_steps": warmup,
                  "schedule": schedule},
        "train": {"steps": steps, "batch_size": _BATCH[scale], "eval_every": every,
                  "eval_batches": 4 if scale == "smoke" else 10, "log_every": max(1, min(10, steps // 20)),
                  "checkpoint_every": every},
    }


def _pick(scale: str, table: dict[str, Any], preset: str) -> Any:
    if scale not in table:
        raise ConfigError("--scale", scale, f"preset {preset!r} has scales {', '.join(table)}")
    return table[scale]


def _placements(wanted: list[str]) -> list[str]:
    """``wanted`` minus placements this build does not register (listed in the preset's doc)."""

    return [p for p in wanted if p in PLACEMENTS]


def pre_vs_post(scale: str = "cpu") -> StudySpec:
    """Seed 002's pet project: Post-LN vs Pre-LN, 6 blocks, identical hyper-parameters, with and
    without warm-up, 6 seeds (docs/theory.md, claim seed002-pet-project). No gradient clipping:
    the seed's code has none, and a clip would hide the divergence the seed predicts (the
    pre-clip norm is still logged). A third arm, the baseline, is transformers' GPT-2 at the
    same settings (``model.impl = "hf-gpt2"``: Pre-LN computed by transformers, started from the
    lab Pre-LN's seeded weights), a check of the lab's implementation; it runs without in-training
    diagnostics, which read the lab model's blocks. cpu: d=128, 4 heads, context 64, batch 16,
    500 steps, lr 1e-3 cosine, warm-up {0, 50}: 36 runs, about 24 min on 2 idle cores.
    seed: lr 3e-4 constant, batch 32, 10 epochs (4900 steps), the two lab arms without warm-up
    only, what seed002-pet-project's parts read: 12 runs of ~16-20 min on one core, about two
    hours on 2 workers (the full grid, 36 runs, would be three sessions). The seed scale starts
    from the seed's own code's init: PyTorch's module defaults (``model.init = "torch_default"``:
    N(0, 1) embeddings, nn.Linear's and nn.MultiheadAttention's uniform draws) with a separate
    output layer (the seed builds "an embedding layer and an output linear layer"; PyTorch ties
    nothing by default). Its width d = 128, 4 heads and context 64 are the lab's (the seed's code
    takes d_model as a parameter and states none)."""
    steps, warm = _pick(scale, {"smoke": (20, 5), "cpu": (500, 50), "seed": (4900, 490), "gpu": (5000, 200)},
                        "pre-vs-post")
    if scale == "seed":
        # 10 epochs of the 1.0M training characters at 32 x 64 tokens per step = 4900 steps.
        base = _base("cpu", steps, lr=3e-4, schedule="constant", evals=20, init="torch_default",
                     tie_embeddings=False)
        base["train"]["batch_size"] = 32
    else:
        base = _base(scale, steps, lr=1e-3 if scale != "gpu" else 6e-4)
    base["optim"]["grad_clip"] = 0.0
    # per-block gradient norms for seed 001's "1K steps" statement (step 1000 at seed scale)
    diag = {"smoke": 10, "seed": 100}.get(scale, 100 if scale == "cpu" else 500)
    # The arms, a zip group: (placement, implementation, diagnostics). The lab arms' configs
    # are those of the two-arm study (model.impl is not written at its default), so their trial
    # ids are unchanged; the baseline's diagnostics are off (they read TransformerLM's blocks).
    arms = [("post", "normlab", diag), ("pre", "normlab", diag), ("pre", "hf-gpt2", 0)]
    if scale == "seed":  # sized to one session: the arms the seed's statements are about
        arms = arms[:2]
    keys = ("model.placement", "model.impl", "train.diag_every")
    # 6 seeds: the smallest sample at which "more than half of the runs fail" can be shown
    # (6 of 6 has an exact lower bound of 0.54; 5 of 5 only 0.48)
    return StudySpec(name="pre-vs-post", base=base, seeds=[0, 1] if scale == "smoke" else list(range(6)),
                     axes={"optim.warmup_steps": [0] if scale == "seed" else [0, warm]},
                     zip=[{k: [a[i] for a in arms] for i, k in enumerate(keys)}],
                     scientific=["model.placement", "model.impl", "train.diag_every", "optim.warmup_steps"],
                     description="Seed 002: does Pre-LN converge faster and lower than Post-LN, "
                                 "and does Post-LN need warm-up? (Xiong et al. 2020)")


def xiong_warmup(scale: str = "cpu") -> StudySpec:
    """Xiong et al. 2020 (On Layer Normalization in the Transformer Architecture): Post/Pre x
    warm-up {0, W} x lr_max {5e-4, 1e-3, 3e-3}, linear decay, no gradient clipping (a clip
    would mask the divergence warm-up is meant to prevent), 3 seeds. The warm-up length W is
    fixed here, before any data (claims compare these two cells, never a best cell).
    cpu: 6 blocks d=128, 300 steps, W = 60: 36 runs."""
    steps, warm = _pick(scale, {"smoke": (20, 5), "cpu": (300, 60), "gpu": (5000, 500)}, "xiong-warmup")
    base = _base(scale, steps, lr=1e-3, schedule="linear")
    base["optim"]["grad_clip"] = 0.0
    return StudySpec(name="xiong-warmup", base=base,
                     axes={"model.placement": ["post", "pre"], "optim.warmup_steps": [0, warm],
                           "optim.lr": [5e-4, 1e-3, 3e-3]},
                     seeds=[0, 1] if scale == "smoke" else [0, 1, 2],
                     description="Xiong et al. 2020: Post-LN needs warm-up at lr_max 5e-4..1e-3; Pre-LN does not")


def init_gradients(scale: str = "cpu") -> StudySpec:
    """Xiong et al. 2020 Thm 1 at initialisation, as a study of ``normlab.diagnostics.probe``
    trials (no training): Post/Pre/Sandwich/DeepNorm x depth {2, 4, 8, 16, 32} x 5 seeds, xavier
    init, d=128, batch 8. Metric: ||dLoss/dW2|| of the last block; RUN/probe.csv has the rest."""
    depths = _pick(scale, {"smoke": [2, 4], "cpu": [2, 4, 8, 16, 32], "gpu": [2, 4, 8, 16, 32, 64]},
                   "init-gradients")
    base = {"model": {"d_model": 128 if scale != "smoke" else 32, "n_head": 4, "context": 64, "init": "xavier"},
            # eval_every: probe trials never validate; pinned to the old default so that the
            # trial ids of existing stores hold (left unset it would follow steps=1)
            "train": {"batch_size": 8, "steps": 1, "eval_every": 250}}
    return StudySpec(name="init-gradients", base=base, trial="probe", metric="w2_grad_last",
                     axes={"model.placement": _placements(["post", "pre", "sandwich", "deepnorm"]),
                           "model.n_layer": depths},
                     seeds=[0] if scale == "smoke" else [0, 1, 2, 3, 4],
                     description="Xiong et al. 2020 Thm 1: gradient norms at init vs depth")


def lr_sensitivity(scale: str = "cpu") -> StudySpec:
    """Wortsman et al. 2023 (Small-scale proxies for large-scale Transformer training
    instabilities): log-spaced lr x (Pre-LN, Pre-LN + QK-norm, Post-LN), clip 1.0 as in their
    setup, in-training diagnostics (attention logits) every steps/4. cpu: lr 3e-4..3e-2
    (5 values), 6 blocks d=128, 200 steps, warm-up 20, 5 seeds: 75 runs."""
    steps = _pick(scale, {"smoke": 20, "cpu": 200, "gpu": 5000}, "lr-sensitivity")
    lrs = [1e-3, 1e-2] if scale == "smoke" else [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    base = _base(scale, steps, lr=1e-3, warmup=max(1, steps // 10))
    base["train"]["diag_every"] = max(1, steps // 4)
    return StudySpec(name="lr-sensitivity", base=base, axes={"optim.lr": lrs},
                     zip=[{"model.placement": ["pre", "pre", "post"], "model.qk_norm": [None, "layernorm", None]}],
                     seeds=[0, 1] if scale == "smoke" else list(range(5)),
                     description="Wortsman et al. 2023: LR sensitivity and attention-logit growth; QK-norm")


def zloss(scale: str = "cpu") -> StudySpec:
    """PaLM's z-loss (docs/theory.md, claim zloss-logz): Pre-LN, 6 blocks, constant lr 3e-3 with no warm-up,
    z_loss {0, 1e-4}; mean log Z from in-training diagnostics (the metrics log it only when
    z > 0). 300 steps at the model size of ``lr-sensitivity``, clip 1.0; 5 seeds, 10 runs."""
    base = _base(scale, _pick(scale, {"smoke": 20, "cpu": 300, "gpu": 5000}, "zloss"), lr=3e-3)
    base["model"] = {**_MODEL[scale], "n_layer": 6, "placement": "pre"}
    base["optim"] = {"lr": 3e-3, "min_lr": 3e-3, "warmup_steps": 0, "schedule": "constant"}
    base["train"]["diag_every"] = max(1, base["train"]["steps"] // 10)
    return StudySpec(name="zloss", base=base, axes={"optim.z_loss": [0.0, 1e-4]},
                     seeds=[0, 1] if scale == "smoke" else list(range(5)),
                     scientific=["optim.z_loss"],
                     description="PaLM z-loss: mean log Z drifts without z-loss, stays near 0 with it")


# The placements of the ``depth`` study, named: a placement registered later (a plugin's, a new
# built-in) joins it only by being added here, so the study and its trial ids never grow silently.
DEPTH_PLACEMENTS = ["post", "pre", "sandwich", "pre_post", "post_branch", "deepnorm", "lns", "none", "layerscale",
                    "admin", "resi_dual", "ngpt"]


def depth(scale: str = "cpu") -> StudySpec:
    """The built-in placements (``DEPTH_PLACEMENTS``) at depths 6, 12, 24, 48 with no warm-up
    (constant lr 1e-3): which train, which diverge (DeepNet, Admin, Mix-LN, LNS claims). cpu:
    d=64, context 64, batch 16, 200 steps, 1 seed."""
    steps = _pick(scale, {"smoke": 10, "cpu": 200, "gpu": 3000}, "depth")
    depths = [2, 4] if scale == "smoke" else [6, 12, 24, 48]
    base = _base(scale, steps, lr=1e-3, schedule="constant")
    if scale == "cpu":
        base["model"]["d_model"] = 64
    return StudySpec(name="depth", base=base,
                     axes={"model.placement": _placements(DEPTH_PLACEMENTS), "model.n_layer": depths},
                     seeds=[0] if scale != "gpu" else [0, 1, 2],
                     description="Which placements train at depth without warm-up")


def deep_stability(scale: str = "cpu") -> StudySpec:
    """Which placements train deep without warm-up (DeepNet, Admin, seed 002's sandwich
    advice, read both as CogView's ``sandwich`` and as the seed's own formula ``pre_post``):
    post/pre/deepnorm/admin/sandwich/pre_post at depth 6 (control) and 48, xavier init (the
    papers' setting and Admin's regime, docs/placements.md), constant lr 1e-3, no warm-up, no
    gradient clipping (a clip would mask divergence). cpu: d=64, 200 steps, 3 seeds: 36 runs."""
    steps = _pick(scale, {"smoke": 10, "cpu": 200, "gpu": 3000}, "deep-stability")
    base = _base(scale, steps, lr=1e-3, schedule="constant")
    base["model"]["init"] = "xavier"
    base["optim"]["grad_clip"] = 0.0
    if scale == "cpu":
        base["model"]["d_model"] = 64
    return StudySpec(name="deep-stability", base=base,
                     axes={"model.placement": ["post", "pre", "deepnorm", "admin", "sandwich", "pre_post"],
                           "model.n_layer": [2, 8] if scale == "smoke" else [6, 48] if scale == "cpu" else [6, 64]},
                     seeds=[0, 1] if scale == "smoke" else [0, 1, 2],
                     description="DeepNet/Admin/sandwich: which placements train at depth without warm-up")


def collapse(scale: str = "cpu") -> StudySpec:
    """Representation collapse (Liu et al. 2020; Sun et al. 2025; Xie et al. 2023): Pre vs
    ResiDual vs LNS vs Sandwich at depth 24, trained with in-training diagnostics (layer
    cosine/angular distance of both of ResiDual's streams, max |x|) every steps/5; clip 1.0.
    Layer deletion after training runs on the final checkpoints. cpu: d=64, 300 steps,
    5 seeds: 20 runs."""
    steps = _pick(scale, {"smoke": 10, "cpu": 300, "gpu": 5000}, "collapse")
    base = _base(scale, steps, lr=1e-3, warmup=max(1, steps // 10))
    base["train"]["diag_every"] = max(1, steps // 5)
    if scale == "cpu":
        base["model"]["d_model"] = 64
    return StudySpec(name="collapse", base=base,
                     axes={"model.placement": _placements(["pre", "resi_dual", "lns", "sandwich"]),
                           "model.n_layer": [4] if scale == "smoke" else [24]},
                     seeds=[0, 1] if scale == "smoke" else list(range(5)),
                     description="Do deep layers become similar, and which placements avoid it")


def takes_placements(fn: StudyPreset) -> bool:
    """Whether a preset's placements are an option (``--placements``) rather than fixed."""
    return "placements" in inspect.signature(fn).parameters


def study_preset(name: str, scale: str = "cpu", placements: list[str] | None = None) -> StudySpec:
    """The StudySpec of preset ``name`` at ``scale``; ``placements`` replaces the placements of a
    preset that takes them (``takes_placements``), and is refused by the others."""
    fn = STUDY_PRESETS.get(name, "study")
    if placements is None:
        return fn(scale)
    if not takes_placements(fn):
        takers = [n for n, f in STUDY_PRESETS.items() if takes_placements(f)]
        raise ConfigError("--placements", NO_VALUE, f"study preset {name!r} has its own placements; the presets "
                                                    f"that take --placements: {', '.join(takers)} (or write a study "
                                                    "TOML with a model.placement axis)")
    return fn(scale, placements=placements)
