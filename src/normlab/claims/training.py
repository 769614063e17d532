"""Claims that need training (REFERENCE.md claims 6-15): decided from study stores.

``normlab claims`` without ``--quick`` runs each claim's study (``--scale`` smoke/cpu/gpu) into
``OUT/stores/<study>`` through :class:`~normlab.claims.studies.StudyContext`; reruns only
train what is missing. Every rule below was written from the sources before any of these
studies ran; "2s" is twice the pooled std over seeds (``studies.compare``). With a single
seed (the smoke scale, and the 1-seed presets) comparisons that need a spread are
"inconclusive" by construction.
"""

from __future__ import annotations

import math
from typing import Any

from normlab.claims.catalogue import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, Verdict, claim, three_way
from normlab.claims.studies import Group, StudyContext, compare, first_eval_after_start, group, select

P, W, LR, DEPTH = "model.placement", "optim.warmup_steps", "optim.lr", "model.n_layer"


def _sel(trials: list[Any], **kv: Any) -> list[Any]:
    return select(trials, **{k.replace(".", "__"): v for k, v in kv.items()})


@claim(id="warmup-post", quick=False, source="Xiong et al. 2020 (REFERENCE.md claims 7 and 16)",
       statement="Post-LN needs warm-up at lr_max 5e-4 to 1e-3; without it it trains worse or diverges; "
                 "Pre-LN without warm-up is comparable.",
       experiment="study preset 'xiong-warmup': post/pre x warm-up {0, short, long} x lr {5e-4, 1e-3}, 6 blocks",
       quantity="best val loss per (placement, lr, warm-up), mean ± std over seeds; diverged counts",
       rule="post is 'worse without warm-up' at an lr if a no-warm-up seed diverges or its mean exceeds the best "
            "warm-up mean by > 2s. supported: post worse at every lr and pre not worse (no divergence, gap <= 2s) "
            "at every lr; not supported: post's no-warm-up mean <= its best warm-up mean with no divergence at "
            "every lr; otherwise inconclusive")
def warmup_post(ctx: StudyContext) -> Verdict:
    t = ctx.trials("xiong-warmup")
    lrs = sorted({x.params[LR] for x in t})
    warms = sorted({x.params[W] for x in t})
    nums: dict[str, Any] = {}
    worse = {"post": [], "pre": []}
    calm = []
    parts = []
    for p in ("post", "pre"):
        for lr in lrs:
            g0 = group(_sel(t, **{P: p, LR: lr, W: 0}))
            gw = [group(_sel(t, **{P: p, LR: lr, W: w})) for w in warms if w]
            best = min((g for g in gw if g.mean is not None), key=lambda g: g.mean, default=gw[0])
            how, d, s = compare(g0, best)
            worse[p].append(g0.diverged > 0 or how == "larger")
            if p == "post":
                calm.append(g0.diverged == 0 and d is not None and d <= 0)
            nums[f"{p}@{lr:g}"] = {"no_warmup": g0.as_dict(), "best_warmup": best.as_dict(), "diff": d, "pooled_std": s}
            parts.append(f"{p} lr {lr:g}: no warm-up {g0.text()} vs best warm-up {best.text()}")
    yes = all(worse["post"]) and not any(worse["pre"])
    v = three_way(yes, all(calm))
    return Verdict(v, "; ".join(parts), nums, f"mean ± sample std over seeds; {ctx.describe('xiong-warmup')}")


@claim(id="liu-post-converged", quick=False, source="Liu et al. 2020 (REFERENCE.md claim 8)",
       statement="When Post-LN does converge (shallow, tuned warm-up) it often ends at or below Pre-LN.",
       experiment="study preset 'xiong-warmup' (6 blocks), each placement at its best (lr, warm-up) cell",
       quantity="best val loss of the best-tuned cell, mean ± std over seeds",
       rule="supported if post's best-cell mean <= pre's + 2s; not supported if it is larger by > 2s; "
            "inconclusive with fewer than two finished seeds")
def liu_post_converged(ctx: StudyContext) -> Verdict:
    t = ctx.trials("xiong-warmup")
    cells = sorted({(x.params[LR], x.params[W]) for x in t})
    best = {}
    for p in ("post", "pre"):
        gs = [(c, group(_sel(t, **{P: p, LR: c[0], W: c[1]}))) for c in cells]
        ok = [(c, g) for c, g in gs if g.mean is not None and g.diverged == 0]
        best[p] = min(ok, key=lambda cg: cg[1].mean) if ok else (None, gs[0][1])
    how, d, s = compare(best["post"][1], best["pre"][1])
    v = INCONCLUSIVE if how == "unknown" else NOT_SUPPORTED if how == "larger" else SUPPORTED
    txt = "; ".join(f"{p} best cell lr {c[0]:g} warm-up {c[1]}: {g.text()}" if c else f"{p}: no converged cell"
                    for p, (c, g) in best.items())
    return Verdict(v, txt + (f"; post - pre {d:+.3f}" if d is not None else "")
                   + (f" (2s = {2 * s:.3f})" if s is not None else ""),
                   {p: {"cell": c, **g.as_dict()} for p, (c, g) in best.items()} | {"diff": d, "pooled_std": s},
                   f"mean ± sample std over seeds; {ctx.describe('xiong-warmup')}")


@claim(id="seed002-pet-project", quick=False, source="seed 002 (Russian Q&A); REFERENCE.md claim 15",
       statement="Pre-norm will show faster loss decrease and lower final perplexity; post-norm without "
                 "warmup will most likely not converge.",
       experiment="study preset 'pre-vs-post': post/pre x warm-up {0, w}, 6 blocks, identical hyper-parameters",
       quantity="best val loss and val loss at the first eval after step 0, without warm-up, mean ± std over "
                "seeds; diverged runs of post without warm-up",
       rule="supported if, without warm-up, pre's best val loss is lower by > 2s AND pre's first-eval loss is "
            "lower by > 2s; not supported if pre's best val loss is higher or equal within 2s ('same'/'larger')")
def seed002_pet_project(ctx: StudyContext) -> Verdict:
    t = ctx.trials("pre-vs-post")
    g = {p: group(_sel(t, **{P: p, W: 0})) for p in ("post", "pre")}
    how, d, s = compare(g["pre"], g["post"])
    first = {}
    for p in ("post", "pre"):
        runs = [x for x in _sel(t, **{P: p, W: 0}) if x.status == "completed"]
        vals = [v for x in runs if (v := first_eval_after_start(x.run_dir)) is not None]
        first[p] = Group(vals, 0, len(runs))
    fhow, fd, fs = compare(first["pre"], first["post"])
    yes = how == "smaller" and fhow == "smaller"
    no = how in ("same", "larger")
    w = sorted({x.params[W] for x in t})[-1]
    gw = {p: group(_sel(t, **{P: p, W: w})) for p in ("post", "pre")}
    return Verdict(three_way(yes, no),
                   f"no warm-up, best val loss: pre {g['pre'].text()}, post {g['post'].text()} ({how}); first eval: "
                   f"pre {first['pre'].text()}, post {first['post'].text()} ({fhow}); with warm-up {w}: "
                   f"pre {gw['pre'].text()}, post {gw['post'].text()}; post without warm-up diverged "
                   f"{g['post'].diverged}/{g['post'].n}",
                   {"no_warmup": {p: x.as_dict() for p, x in g.items()}, "diff_pre_minus_post": d, "pooled_std": s,
                    "first_eval": {p: x.as_dict() for p, x in first.items()}, "first_eval_diff": fd,
                    f"warmup_{w}": {p: x.as_dict() for p, x in gw.items()}},
                   f"mean ± sample std over seeds; {ctx.describe('pre-vs-post')}")


def _trains(x: Any) -> bool:
    """'Trains' (fixed before the data): completed and best val loss at least 1 nat below the loss
    at init (ln 65 = 4.17 for Tiny Shakespeare chars, so below ~3.2, under the unigram entropy)."""
    from normlab.diagnostics.sensitivity import run_point

    if x.status != "completed" or not x.summary or x.summary.get("best_val_loss") is None:
        return False
    init = run_point(x.run_dir)["init_loss"]
    return float(x.summary["best_val_loss"]) < init - 1.0


@claim(id="deepnorm-depth", quick=False, source="DeepNet (Wang et al. 2022); REFERENCE.md claims 6 and 8",
       statement="DeepNorm trains at depth where Post-LN does not (Tiny Shakespeare chars, no warm-up).",
       experiment="study preset 'depth': every placement x depth, constant lr 1e-3, no warm-up",
       quantity="per depth: trains (completed, best val loss < loss at init - 1 nat) for post and deepnorm",
       rule="supported if at some depth post does not train and deepnorm does; not supported if at every "
            "depth where post fails deepnorm fails too; inconclusive if post trains at every depth tried, or "
            "if pre does not train at the smallest depth (the step budget trains nothing: no test)")
def deepnorm_depth(ctx: StudyContext) -> Verdict:
    t = ctx.trials("depth")
    Ls = sorted({x.params[DEPTH] for x in t})
    ok = {p: {L: all(_trains(x) for x in _sel(t, **{P: p, DEPTH: L})) for L in Ls} for p in ("post", "deepnorm")}
    fails = [L for L in Ls if not ok["post"][L]]
    control = all(_trains(x) for x in _sel(t, **{P: "pre", DEPTH: Ls[0]}))
    yes = control and any(ok["deepnorm"][L] for L in fails)
    no = control and bool(fails) and not yes
    loss = {p: {L: [round(x.summary["best_val_loss"], 3) if x.summary and x.summary.get("best_val_loss") else x.status
                    for x in _sel(t, **{P: p, DEPTH: L})] for L in Ls} for p in ok}
    return Verdict(three_way(yes, no),
                   "; ".join(f"{p}: " + ", ".join(f"L{L} {'trains' if ok[p][L] else 'fails'} {loss[p][L]}" for L in Ls)
                             for p in ok) + f"; control pre L{Ls[0]} {'trains' if control else 'fails'}",
                   {"trains": ok, "best_val_loss": loss, "control_pre_trains": control},
                   f"per trial (no spread: {ctx.describe('depth')})")


@claim(id="lr-sensitivity", quick=False, source="Wortsman et al. 2023 (REFERENCE.md claims 10 and 16)",
       statement="QK-norm lowers LR sensitivity; attention logits grow at high LR without it.",
       experiment="study preset 'lr-sensitivity': post/pre/sandwich x log lr grid x qk_norm {none, layernorm}",
       quantity="LR sensitivity = mean over lrs of min(final val loss, loss at init) - best (Wortsman §3.1), per "
                "placement and qk_norm",
       rule="supported if qk_norm=layernorm has the lower sensitivity for every placement; not supported if it "
            "has the higher or equal one for every placement; otherwise inconclusive")
def lr_sens(ctx: StudyContext) -> Verdict:
    from normlab.diagnostics.sensitivity import lr_sensitivity, run_point

    t = ctx.trials("lr-sensitivity")
    sens: dict[str, dict[str, float]] = {}
    for p in sorted({x.params[P] for x in t}):
        for qk in (None, "layernorm"):
            pts = [run_point(x.run_dir) for x in _sel(t, **{P: p, "model.qk_norm": qk}) if x.run_dir.is_dir()]
            pts = [(r["lr"], r["final_loss"], r["init_loss"]) for r in pts]
            if pts:
                sens.setdefault(p, {})[str(qk)] = lr_sensitivity(pts)
    both = {p: s for p, s in sens.items() if len(s) == 2}
    lower = [s["layernorm"] < s["None"] for s in both.values()]
    v = three_way(bool(lower) and all(lower), bool(lower) and not any(lower))
    return Verdict(v, "; ".join(f"{p}: no qk_norm {s.get('None', math.nan):.3f}, qk layernorm "
                                f"{s.get('layernorm', math.nan):.3f}" for p, s in sens.items()),
                   {"sensitivity": sens}, f"one value per sweep; {ctx.describe('lr-sensitivity')}")

