"""The trial kinds a study spec may name, declared apart from the trial functions.

A spec is validated (and a store read) wherever a study is shown, pages included; the
functions in ``study/trials.py`` train and probe. Declaring the names here keeps reading a
store free of the training code; ``study/catalogue.py`` fills ``TRIALS`` at its first lookup.
"""

from __future__ import annotations

from typing import Any, Callable

from normlab.core.registry import Registry

TrialFn = Callable[..., dict[str, Any]]
TRIALS: Registry[TrialFn] = Registry("trial", "trial", catalogue="normlab.study.catalogue")

# The numeric summary entries of each built-in trial: what a study's ``metric`` may name
# (a typo such as "best_val_los" would otherwise run the whole study to an empty table).
# A custom "module:function" trial returns its own entries and is not checked.
METRICS = {
    "train": ("best_val_loss", "final_val_loss", "diverged_at_step", "steps", "tokens", "tokens_per_s",
              "wall_time_s", "params"),
    "probe": ("w2_grad_last", "loss_at_init"),
}
