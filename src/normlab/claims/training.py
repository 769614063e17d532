"""Claims that need training (REFERENCE.md claims 7-15): decided from study stores.

The full run (``normlab claims`` without ``--quick``) runs each claim's study preset with
``normlab.study`` into ``OUT/stores/<preset>``, whose trials are cached by config hash, so a
rerun only trains what is missing. Without the study package the verdict says so.
"""

from __future__ import annotations

from normlab.claims.catalogue import INCONCLUSIVE, Verdict, claim


def _needs_study(preset: str):  # noqa: ANN202 - returns a decide function
    def decide(ctx: object) -> Verdict:
        try:
            import normlab.study  # noqa: F401
            from normlab.study.presets import STUDY_PRESETS  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            return Verdict(INCONCLUSIVE, f"not run: study preset '{preset}' needs normlab.study, "
                                         "which is not available in this build")
        return Verdict(INCONCLUSIVE, f"not run: wiring of study preset '{preset}' into the claims check is pending")

    return decide


for _id, _stmt, _src, _preset, _q in [
    ("warmup-post", "Post-LN needs warm-up at lr_max 5e-4 to 1e-3; without it it trains worse or diverges; "
     "Pre-LN without warm-up is comparable.", "Xiong et al. 2020 (REFERENCE.md claim 7)", "warmup-grid",
     "final val loss per (placement, lr, warm-up) cell, mean ± std over seeds"),
    ("seed002-pet-project", "Pre-norm will show faster loss decrease and lower final perplexity; post-norm without "
     "warmup will most likely not converge.", "seed 002 (Russian Q&A)", "pre-vs-post",
     "best val loss, mean ± std over seeds, lr 3e-4 batch 32 6 blocks"),
    ("lr-sensitivity", "QK-norm lowers LR sensitivity; attention logits grow at high LR without it.",
     "Wortsman et al. 2023 (REFERENCE.md claim 10)", "lr-sweep", "mean over lrs of min(loss, loss at init) - best"),
]:
    claim(id=_id, statement=_stmt, source=_src, experiment=f"study preset '{_preset}'", quantity=_q,
          rule="difference of means larger than twice the pooled std over seeds", quick=False)(_needs_study(_preset))
