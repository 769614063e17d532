"""Figures of the claims page: one evidence figure per claim (every part's per-seed values,
its 95% interval and the rule's reference), plus the quick claims' per-layer and per-depth
context figures, all in the report style (PNG + SVG in OUT/figures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from normlab.claims.folder import FIGURES
from normlab.claims.measure import last_w2
from normlab.report import figures as F
from normlab.report.style import close, figure, legend, save

VERDICT_COLOR = {"supported": "#2e7d32", "contradicted": "#c62828", "inconclusive": "#757575"}
# Text sizes (pt) of the evidence figures. The page shows two figures side by side, about 630
# CSS px each at 1366 px wide, so a 6.4 in figure (704 px at 110 dpi) is drawn at 0.9 of its
# size: 10.5 pt in the figure reads as 9.4 pt on a laptop.
TEXT_PT = 10.5
WIDTH_IN = 6.4
TITLE_CHARS = 70  # a part's title wraps after this many characters (10.5 pt on 6.4 in)


def effect_fig(record: dict[str, Any]) -> Any:
    """The evidence figure of one claim, one row per part: per-seed points (for a two-sample
    effect, each seed of one side minus the other side's mean), the estimate with its 95%
    interval (the table's effect), the rule's reference line or band. Legend below the rows,
    never over an interval."""
    import textwrap

    parts = record["parts"]
    titles = [textwrap.wrap(f"{p['id']}: {p['verdict']} ({p['quantity']})", TITLE_CHARS) for p in parts]
    heights = [1.25 + 0.22 * len(t) for t in titles]
    fig, axes = figure(nrows=len(parts), width=WIDTH_IN, height=1.0)
    fig.set_size_inches(WIDTH_IN, sum(heights) + 1.0)
    axes = np.atleast_1d(axes)
    for ax, part, title in zip(axes, parts, titles):
        e, rule = part["effect"], part["rule"]
        c = VERDICT_COLOR.get(part["verdict"], "#333")
        a, b = np.asarray(e["values_a"], float), np.asarray(e["values_b"], float)
        if b.size:
            ax.plot(a - b.mean(), np.full(a.size, 0.12), "o", ms=6, color=c, alpha=0.8, label="seeds of A − mean of B")
            ax.plot(a.mean() - b, np.full(b.size, -0.12), "o", ms=6, mfc="none", color=c, alpha=0.8,
                    label="mean of A − seeds of B")
        elif a.size:
            ax.plot(a, np.zeros(a.size), "o", ms=6, color=c, alpha=0.8, label="per seed")
        if e["estimate"] is not None and e["lo"] is not None and e["hi"] is not None:
            ax.errorbar([e["estimate"]], [0.35], xerr=[[e["estimate"] - e["lo"]], [e["hi"] - e["estimate"]]],
                        fmt="D", color=c, capsize=4, lw=2, label="effect (the table's), 95% interval")
        elif e["lo"] is not None or e["hi"] is not None:  # one side open: a critical lr beyond the lrs tried
            _one_sided(ax, e, c)
        elif e["estimate"] is not None:
            ax.plot([e["estimate"]], [0.35], "D", color=c, label="effect (no interval)")
        if rule["kind"] == "direction":
            ax.axvline(rule["ref"], color="k", lw=1, ls="--", label="rule: reference value")
        else:
            ax.axvspan(rule["lo"], rule["hi"], color="#90caf9", alpha=0.35, lw=0, label="rule: supported inside")
        ax.set_yticks([])
        ax.set_ylim(-0.5, 0.7)
        ax.set_title("\n".join(title), fontsize=TEXT_PT, loc="left")
        ax.tick_params(labelsize=TEXT_PT)
    seen: dict[str, Any] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=2, fontsize=TEXT_PT, frameon=False)
    fig.suptitle(f"{record['id']}: {record['verdict']}", fontsize=TEXT_PT + 1.5)
    return fig


def _one_sided(ax: Any, e: dict[str, Any], c: str) -> None:
    """An interval with one known side: a bar to it from the estimate (if any), an arrow the
    other way to the axis' edge (nothing bounds that side)."""
    known = e["lo"] if e["lo"] is not None else e["hi"]
    start = e["estimate"] if e["estimate"] is not None else known
    if e["estimate"] is not None:
        ax.plot([e["estimate"]], [0.35], "D", color=c, label="effect (the table's), 95% interval")
        ax.plot([known, start], [0.35, 0.35], color=c, lw=2)
    lo, hi = ax.get_xlim()
    span = max(abs(start - known), hi - lo, 0.5) * 0.5
    end = start + span if e["lo"] is not None else start - span
    ax.plot([known], [0.35], "|" , ms=14, mew=2, color=c,
            label="censored: the one 95% limit known" if e["estimate"] is None else None)
    ax.annotate("", xy=(end, 0.35), xytext=(start, 0.35), arrowprops={"arrowstyle": "->", "color": c, "lw": 2})
    ax.set_xlim(min(lo, known, end) - 0.05 * span, max(hi, known, end) + 0.05 * span)


def effect_figure(record: dict[str, Any], out: Path) -> str:
    """Save ``effect_fig(record)`` as OUT/figures/claim-ID.png and .svg; returns the file name
    (without extension)."""

    fig = effect_fig(record)
    name = f"claim-{record['id']}"
    save(fig, out / FIGURES, name)
    close(fig)
    return name


def slope_legends(records: list[dict[str, Any]] | None, claim: str = "xiong-thm1") -> dict[str, str]:
    """{placement: legend text} quoting the effects of ``claim`` exactly as its table does, so
    the depth figure's slopes are the table's (the mean of the per-seed slopes), not a
    separate fit to the seed means."""
    rec = next((r for r in records or [] if r["id"] == claim), None)
    return {p["id"]: f"{p['id']}: slope {p['effect_text']} (mean of per-seed fits)" for p in (rec or {}).get("parts", [])
            if p.get("effect_text")}


CONTEXT_CAPTIONS = {
    "xiong_w2_depth": "The last block's W2 gradient norm against depth at init, log-log: thin lines are seeds, thick "
                      "their mean. Legend: the table's effect, the mean of the per-seed slopes with its 95% interval "
                      "(a single fit to the thick mean line would differ slightly).",
    "grad_per_layer": "W2 gradient norm per layer at init: thin lines are seeds, thick their mean.",
    "forward_norms": "E||x_l||²/d along the stream at init, with the band Xiong et al.'s Lemma 2 predicts for "
                     "Pre-LN: thin lines are seeds, thick their mean.",
    "jacobian": "RMS singular value of the end-to-end Jacobian dx_L/dx_l at init, with seed 004's (1/√2)^(L-l) "
                "for Post-LN: thin lines are seeds, thick their mean.",
    "rank_collapse": "Mean pairwise token cosine at the last stream state against depth at init: thin lines are "
                     "seeds, thick their mean.",
}


def quick_context_figures(q: Any, out: Path, records: list[dict[str, Any]] | None = None) -> None:
    """Per-depth and per-layer profiles behind the quick claims (seed mean and spread); with
    the claim ``records`` the depth figure's legend quotes their effects."""

    fd = out / FIGURES
    depths, Lmax, Lref = q.depths, max(q.depths), q.ref_depth()

    def keep(fig: Any, name: str) -> None:
        save(fig, fd, name)
        close(fig)

    w2 = {p: (np.array(depths, float), last_w2(q, p)) for p in ("post", "pre")}
    fig, _ = F.depth_scaling(w2, "||dLoss/dW2_L||_F (last block)", "last-layer W2 gradient against depth (xavier)",
                             legends=slope_legends(records))
    keep(fig, "xiong_w2_depth")
    prof = {p: (np.array(q.layers(p, Lref, "grad_norm", "ffn", "W_2"), float),
                q.values(p, Lref, "grad_norm", "ffn", "W_2")) for p in ("post", "pre")}
    keep(F.layer_profile(prof, "||dLoss/dW2_l||_F", f"W2 gradient per layer at init, L={Lref}"), "grad_per_layer")
    st = {p: (np.array(q.layers(p, Lref, "mean_sq", "stream", "x"), float), q.values(p, Lref, "mean_sq", "stream", "x"))
          for p in ("post", "pre")}
    fig = F.layer_profile(st, "E||x_l||² / d", f"forward norms at init, L={Lref}", logy=False,
                          xlabel="stream index l (0 = embedding)")
    ax = fig.axes[0]
    ls = np.arange(Lref + 1)
    ax.fill_between(ls, 1 + ls / 2, 1 + 1.5 * ls, color="grey", alpha=0.12, label="Xiong: (1+l/2)..(1+3l/2)")
    legend(ax, outside=True)
    keep(fig, "forward_norms")
    jac = {p: (np.array(q.layers(p, Lmax, "jac_rms_to_last", "stream", "x"), float),
               q.values(p, Lmax, "jac_rms_to_last", "stream", "x")) for p in ("post", "pre", "deepnorm")}
    fig = F.layer_profile(jac, "RMS singular value of d x_L / d x_l", f"end-to-end Jacobian at init, L={Lmax}",
                          logy=True, xlabel="stream index l (0 = embedding)")
    ax = fig.axes[0]
    ax.plot(jac["post"][0], (2 ** -0.5) ** (Lmax - jac["post"][0]), "k:", label="seed 004: (1/√2)^(L-l)")
    legend(ax, outside=True)
    keep(fig, "jacobian")
    tc = {p: (np.array(depths, float), np.stack([q.values(p, L, "token_cos", "stream", "x")[:, -1] for L in depths], 1))
          for p in ("post", "pre", "deepnorm")}
    keep(F.curves(tc, "depth L (blocks)", "mean pairwise token cosine at x_L", "rank collapse at init",
                  logy=False, logx=True), "rank_collapse")
