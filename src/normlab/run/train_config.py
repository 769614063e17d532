"""Optimiser and training-loop configuration (sections ``optim`` and ``train``)."""

from __future__ import annotations

from dataclasses import dataclass

from normlab.core.registry import Registry
from normlab.core.schema import Section, doc
from normlab.run.schedules import DECAY_SHAPES, SCHEDULES

# The optimisers ``optim.name`` selects, by name with a line each (the help lists them). The
# builders live above this layer (``normlab.train.optim``, which a test holds to these names), so
# reading a config never imports torch.optim.
OPTIMIZERS: Registry[str] = Registry("optimizer", "optim.name")
OPTIMIZERS.add("adamw", "AdamW on every parameter")
OPTIMIZERS.add("muon", "torch.optim.Muon on the hidden nn.Linear weights, AdamW on the rest")
ADJUST_LR = ("original", "match_rms_adamw")  # torch.optim.Muon's adjust_lr_fn values


@dataclass
class OptimConfig(Section):
    """AdamW (or Muon on the hidden matrices) and a named learning-rate schedule.

    The fields after z_loss came later: each is declared ``omit_default``, so a config that
    leaves them alone keeps its JSON, its study trial id (a hash of that JSON) and its files."""

    section = "optim"
    lr: float = doc("peak learning rate", 1e-3)
    min_lr: float = doc("floor of decaying schedules (cosine, linear, wsd)", 1e-4)
    schedule: str = doc("lr schedule: {names}", "cosine", names=SCHEDULES)
    warmup_steps: int = doc("linear warm-up steps (0 = none)", 100)
    weight_decay: float = doc("AdamW decoupled decay on matrices (never norms, biases, embeddings)", 0.1)
    beta1: float = doc("Adam beta1", 0.9)
    beta2: float = doc("Adam beta2", 0.99)
    eps: float = doc("Adam epsilon", 1e-8)
    grad_clip: float = doc("clip global grad norm to this (0 = off; the norm is logged either way)", 1.0)
    z_loss: float = doc("coefficient of (log Z)^2 added to the loss (PaLM uses 1e-4; 0 = off)", 0.0)
    name: str = doc("optimiser: {names} (muon: torch.optim.Muon on the attention and MLP weight matrices, "
                    "AdamW with optim.lr on embeddings, the head, norms, biases and scalars)", "adamw",
                    names=OPTIMIZERS, omit_default=True)
    muon_lr: float = doc("peak lr of the Muon group (optim.lr stays the AdamW group's; the schedule scales "
                         "both by one factor). 0.02: Keller Jordan's reference, with muon_adjust_lr=original",
                         0.02, omit_default=True)
    muon_momentum: float = doc("Muon's momentum (torch.optim.Muon's and the reference's 0.95)", 0.95,
                               omit_default=True)
    muon_nesterov: bool = doc("Muon's Nesterov momentum (torch's and the reference's default)", True,
                              omit_default=True)
    muon_weight_decay: float = doc("Muon's decoupled weight decay, theta *= 1 - lr * wd (0.01 with lr 0.02 in "
                                   "the reference's README; torch's own default is 0.1)", 0.01, omit_default=True)
    muon_adjust_lr: str = doc("Muon's per-matrix lr scale (torch's adjust_lr_fn): original = "
                              "sqrt(max(1, out/in)), Keller Jordan's, for lrs near 0.02; match_rms_adamw = "
                              "0.2 sqrt(max(out, in)), Moonshot's (arXiv 2502.16982), which gives the update "
                              "AdamW's RMS so AdamW's lr and decay carry over: set muon_lr and "
                              "muon_weight_decay to optim.lr and optim.weight_decay",
                              "original", omit_default=True)
    decay_frac: float = doc("schedule wsd: the fraction of train.steps spent decaying to min_lr (0.2: "
                            "Hägele et al. 2024)", 0.2, omit_default=True)
    decay_shape: str = doc("schedule wsd: the decay's shape, 1-sqrt (Hägele et al. 2024, better than linear "
                           "there) or linear", "1-sqrt", omit_default=True)

    def __post_init__(self) -> None:
        SCHEDULES.get(self.schedule)
        self.check(self.lr > 0, "lr", "must be > 0, e.g. 1e-3")
        self.check(0 <= self.min_lr <= self.lr, "min_lr", f"must be in [0, optim.lr={self.lr}]")
        self.check(self.warmup_steps >= 0, "warmup_steps", "must be >= 0 (0 disables warm-up)")
        self.check(self.weight_decay >= 0, "weight_decay", "must be >= 0")
        for name in ("beta1", "beta2"):
            self.check(0 <= getattr(self, name) < 1, name, "must be in [0, 1)")
        self.check(self.eps > 0, "eps", "must be > 0, e.g. 1e-8")
        self.check(self.grad_clip >= 0, "grad_clip", "must be >= 0 (0 disables clipping)")
        self.check(self.z_loss >= 0, "z_loss", "must be >= 0, e.g. 1e-4")
        OPTIMIZERS.get(self.name)
        self.check(self.muon_lr > 0, "muon_lr", "must be > 0, e.g. 0.02")
        self.check(0 <= self.muon_momentum < 1, "muon_momentum", "must be in [0, 1), e.g. 0.95")
        self.check(self.muon_weight_decay >= 0, "muon_weight_decay", "must be >= 0, e.g. 0.01")
        self.check(self.muon_adjust_lr in ADJUST_LR, "muon_adjust_lr", f"use {' or '.join(ADJUST_LR)}")
        self.check(0 < self.decay_frac <= 1, "decay_frac", "must be in (0, 1], e.g. 0.2")
        self.check(self.decay_shape in DECAY_SHAPES, "decay_shape", f"use {' or '.join(DECAY_SHAPES)}")


AUTO_EVALS = 8  # validations per run when train.eval_every is left unset


@dataclass
class TrainConfig(Section):
    """The training loop: length, evaluation, checkpoints, device and numerics."""

    section = "train"
    steps: int = doc("optimizer steps", 2000)
    batch_size: int = doc("sequences per optimizer step (before gradient accumulation split)", 12)
    grad_accum: int = doc("micro-batches per step; batch_size must be divisible by it", 1)
    eval_every: int | None = doc("validate every N steps (and at the end); none = train.steps // 8 "
                                 "(at least 1), so 2000 steps validate every 250", None)
    eval_batches: int = doc("fixed validation batches per evaluation", 20)
    log_every: int = doc("write a metrics line every N steps", 10)
    checkpoint_every: int = doc("save latest checkpoint every N steps (0 = only at the end)", 500)
    keep_checkpoints: bool = doc("also keep the weights at initialisation and at every checkpoint step as "
                                 "checkpoints/step_NNNNNN (a series for `normlab inspect --series RUN`)", False,
                                 omit_default=True)  # unset, it leaves configs and trial ids as they were
    diverge_loss: float = doc("a training loss above this (or non-finite) ends the run as diverged", 20.0)
    diag_every: int = doc("in-training diagnostics every N steps (0 = off)", 0)
    sharpness_every: int = doc("also the sharpness (top Hessian eigenvalue, and Adam's preconditioned one) every N "
                               "steps, a multiple of train.diag_every (0 = off; each costs about 2 to 3 training "
                               "steps of the fixed batch per power iteration, docs/diagnostics.md)", 0, omit_default=True)
    sharpness_iters: int = doc("power iterations of each sharpness measurement", 20, omit_default=True)
    device: str = doc("auto, cpu, cuda or cuda:N", "auto")
    dtype: str = doc("float32 or bfloat16 (autocast)", "float32")
    compile: bool = doc("wrap the model in torch.compile", False)
    threads: int = doc("torch intra-op threads (0 = leave torch's default)", 0)
    # The logger registry belongs to training (normlab.train.loggers), above this layer: the names
    # are checked when a run starts (train.plan), so the help names the built-ins and plugins.
    loggers: list[str] = doc("extra metric loggers besides metrics.jsonl: tensorboard, wandb, or one an "
                             "installed plugin adds (docs/plugins.md); checked when the run starts", [])
    init_from: str | None = doc("start from the weights of this model directory (`normlab train --init-from`, "
                                "docs/training.md) instead of a fresh init", None)

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "grad_accum", "eval_batches", "log_every"):
            self.check(getattr(self, name) >= 1, name, "must be >= 1")
        for name in ("checkpoint_every", "diag_every", "threads"):
            self.check(getattr(self, name) >= 0, name, "must be >= 0")
        self.check(self.sharpness_every == 0 or (self.diag_every > 0 and self.sharpness_every % self.diag_every == 0),
                   "sharpness_every", "must be 0 or a multiple of train.diag_every > 0 (it is written in the "
                   "diagnostics lines), e.g. 10 x train.diag_every")
        self.check(self.sharpness_iters >= 1, "sharpness_iters", "must be >= 1, e.g. 20")
        self.check(not self.keep_checkpoints or self.checkpoint_every > 0, "keep_checkpoints",
                   "needs train.checkpoint_every > 0 (the steps it keeps), e.g. --set train.checkpoint_every=100")
        self.check(self.eval_every is None or self.eval_every >= 0, "eval_every",
                   "must be >= 0 (0 = only at the end), or none to follow train.steps")
        if self.eval_every is None:
            # Resolved once, from the final train.steps (TOML, --set and a study's axes are merged
            # as data before the TrainConfig is built; a run preset is a built config, so presets
            # pin theirs), so config.json records the interval used and 2000 steps keep the
            # config, and a study trial's id, of the old fixed 250.
            self.eval_every = max(1, self.steps // AUTO_EVALS)
        self.check(self.batch_size % self.grad_accum == 0, "grad_accum",
                   f"must divide train.batch_size={self.batch_size}")
        self.check(self.diverge_loss > 0, "diverge_loss", "must be > 0, e.g. 20")
        self.check(self.device == "auto" or self.device == "cpu" or self.device.startswith("cuda"),
                   "device", "use auto, cpu, cuda or cuda:N")
        self.check(self.dtype in ("float32", "bfloat16"), "dtype", "use float32 or bfloat16")
        self.check(self.init_from is None or bool(self.init_from.strip()), "init_from",
                   "name a model directory (model.safetensors + model_config.json) or none")
        for name in self.loggers:  # the names themselves are looked up when a run starts (see above)
            self.check(bool(name.strip()), "loggers", "name each logger, e.g. [\"tensorboard\"]")
