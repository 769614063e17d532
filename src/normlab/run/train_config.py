"""Optimiser and training-loop configuration (sections ``optim`` and ``train``)."""

from __future__ import annotations

from dataclasses import dataclass

from normlab.core.schema import Section, doc
from normlab.run.schedules import SCHEDULES


@dataclass
class OptimConfig(Section):
    """AdamW with decoupled weight decay and a named learning-rate schedule."""

    section = "optim"
    lr: float = doc("peak learning rate", 1e-3)
    min_lr: float = doc("floor of decaying schedules (cosine, linear)", 1e-4)
    schedule: str = doc("lr schedule: {names}", "cosine", names=SCHEDULES)
    warmup_steps: int = doc("linear warm-up steps (0 = none)", 100)
    weight_decay: float = doc("AdamW decoupled decay on matrices (never norms, biases, embeddings)", 0.1)
    beta1: float = doc("Adam beta1", 0.9)
    beta2: float = doc("Adam beta2", 0.99)
    eps: float = doc("Adam epsilon", 1e-8)
    grad_clip: float = doc("clip global grad norm to this (0 = off; the norm is logged either way)", 1.0)
    z_loss: float = doc("coefficient of (log Z)^2 added to the loss (PaLM uses 1e-4; 0 = off)", 0.0)

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
