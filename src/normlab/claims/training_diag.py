"""Training claims decided from in-training statistics (REFERENCE.md claims 11-13): the
``train/log_z`` series of metrics.jsonl and the per-layer lines of RUN/diagnostics.jsonl
(``normlab.diagnostics.training``). Rules fixed before the studies ran, as in training.py.
"""

from __future__ import annotations

import statistics

from normlab.claims.catalogue import Verdict, claim, three_way
from normlab.claims.studies import Group, StudyContext, compare, last_diag, select, tail_mean

P, DEPTH = "model.placement", "model.n_layer"


@claim(id="zloss-logz", quick=False, source="PaLM (Chowdhery et al. 2022), Wortsman et al. 2023 (REFERENCE.md claim 11)",
       statement="Mean log Z of the output softmax drifts without z-loss and stays near 0 with it.",
       experiment="study preset 'zloss': Pre-LN 6 blocks, constant lr 3e-3, no "
                  "warm-up, z_loss {0, 1e-4}, sizes of 'lr-sensitivity'",
       quantity="|mean log Z| on the diagnostics' fixed batch over the last quarter of diagnostic steps, mean ± std over seeds",
       rule="supported if with z-loss it is < 1 and without z-loss it is larger by > 2s; not supported if with "
            "z-loss it is larger or equal within 2s; otherwise inconclusive")
def zloss_logz(ctx: StudyContext) -> Verdict:
    t = ctx.trials("zloss")
    g = {}
    for z in (0.0, 1e-4):
        runs = [x for x in select(t, optim__z_loss=z) if x.run_dir.is_dir()]
        vals = [abs(v) for x in runs if (v := tail_mean(x.run_dir, "log_z", file="diagnostics.jsonl")) is not None]
        g[z] = Group(vals, sum(x.status == "diverged" for x in runs), len(runs))
    how, d, s = compare(g[0.0], g[1e-4])
    on = g[1e-4].mean
    yes = how == "larger" and on is not None and on < 1
    no = how in ("same", "smaller")
    return Verdict(three_way(yes, no), f"|log Z| late in training: without z-loss {g[0.0].text()}, "
                                       f"with z-loss 1e-4 {g[1e-4].text()} ({how})",
                   {"without": g[0.0].as_dict(), "with": g[1e-4].as_dict(), "diff": d, "pooled_std": s},
                   f"mean ± sample std over seeds; {ctx.describe('zloss')}")


def _halves(vals: list[float | None]) -> tuple[float, float]:
    """Mean of the shallow and the deep half of a per-block list (None entries dropped)."""
    v = list(vals)
    h = len(v) // 2
    lo = [x for x in v[:h] if x is not None]
    hi = [x for x in v[h:] if x is not None]
    return (statistics.fmean(lo) if lo else float("nan")), (statistics.fmean(hi) if hi else float("nan"))


@claim(id="pre-collapse", quick=False, source="Liu et al. 2020; Sun et al. 2025 (REFERENCE.md claim 12)",
       statement="In Pre-LN deep layers become similar (cosine(x_l, x_{l+1}) near 1, small angular distance); "
                 "ResiDual and LayerNorm Scaling avoid it.",
       experiment="study preset 'collapse': pre/resi_dual/lns/sandwich x 2 depths, diagnostics every steps/5",
       quantity="angular distance arccos(cos)/pi between block input and output at the last diagnostic step: "
                "mean over the deep half of blocks vs the shallow half",
       rule="supported if at every depth pre's deep-half angle is below its shallow half and below the deep-half "
            "angle of resi_dual and lns (where registered); not supported if at every depth pre's deep half "
            "is at or above its shallow half; otherwise inconclusive (one seed: no spread)")
def pre_collapse(ctx: StudyContext) -> Verdict:
    t = ctx.trials("collapse")
    Ls = sorted({x.params[DEPTH] for x in t})
    ang: dict[str, dict[int, tuple[float, float]]] = {}
    for x in t:
        d = last_diag(x.run_dir) if x.run_dir.is_dir() else None
        if d and d.get("angle"):
            ang.setdefault(x.params[P], {})[x.params[DEPTH]] = _halves(d["angle"])
    pre = ang.get("pre", {})
    others = [p for p in ("resi_dual", "lns") if p in ang]
    yes = bool(pre) and all(L in pre and pre[L][1] < pre[L][0]
                            and all(L in ang[o] and pre[L][1] < ang[o][L][1] for o in others) for L in Ls)
    no = bool(pre) and all(L in pre and pre[L][1] >= pre[L][0] for L in Ls)
    txt = "; ".join(f"{p}: " + ", ".join(f"L{L} shallow {a[0]:.3f} deep {a[1]:.3f}" for L, a in sorted(by.items()))
                    for p, by in ang.items())
    return Verdict(three_way(yes, no), txt or "no diagnostics.jsonl in the collapse runs",
                   {"angle_shallow_deep": {p: {str(L): a for L, a in by.items()} for p, by in ang.items()}},
                   f"one seed per cell; {ctx.describe('collapse')}")


@claim(id="sandwich-max-abs", quick=False, source="CogView (Ding et al. 2021), Peri-LN (Kim et al. 2025); "
       "REFERENCE.md claim 13",
       statement="Sandwich/Peri-LN keeps the residual stream's max |x| bounded where Pre-LN's grows "
                 "(fp16 overflow risk at 65504).",
       experiment="study preset 'collapse' (includes pre and sandwich), diagnostics every steps/5",
       quantity="max over layers of max |x_l| at the last diagnostic step, and its ratio to the first one",
       rule="supported if at every depth sandwich's final max |x| and its growth ratio are both below pre's; "
            "not supported if sandwich's final max |x| is at or above pre's at every depth; otherwise "
            "inconclusive (one seed: no spread)")
def sandwich_max_abs(ctx: StudyContext) -> Verdict:
    t = ctx.trials("collapse")
    m: dict[str, dict[int, tuple[float, float]]] = {}
    for x in t:
        if x.params[P] not in ("pre", "sandwich") or not x.run_dir.is_dir():
            continue
        d = last_diag(x.run_dir)
        if d and d.get("max_abs"):
            last = max(v for v in d["max_abs"] if v is not None)
            first = max(v for v in d["first"]["max_abs"] if v is not None)
            m.setdefault(x.params[P], {})[x.params[DEPTH]] = (last, last / first)
    Ls = sorted({x.params[DEPTH] for x in t})
    both = [L for L in Ls if L in m.get("pre", {}) and L in m.get("sandwich", {})]
    yes = bool(both) and len(both) == len(Ls) and all(
        m["sandwich"][L][0] < m["pre"][L][0] and m["sandwich"][L][1] < m["pre"][L][1] for L in both)
    no = bool(both) and all(m["sandwich"][L][0] >= m["pre"][L][0] for L in both)
    txt = "; ".join(f"{p}: " + ", ".join(f"L{L} max|x| {a[0]:.1f} (x{a[1]:.2f} since first diag)"
                                         for L, a in sorted(by.items())) for p, by in m.items())
    over = any(a[0] > 65504 for by in m.values() for a in by.values())
    return Verdict(three_way(yes, no), (txt or "no diagnostics.jsonl in the collapse runs")
                   + ("; fp16 overflow reached" if over else ""),
                   {"max_abs_growth": {p: {str(L): a for L, a in by.items()} for p, by in m.items()}},
                   f"one seed per cell; {ctx.describe('collapse')}")
