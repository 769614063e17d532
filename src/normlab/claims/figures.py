"""Figures of the claims page: one evidence figure per claim (every part's per-seed values,
its 95% interval and the rule's reference), plus the quick claims' per-layer and per-depth
context figures, all in the report style (PNG + SVG in OUT/figures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

VERDICT_COLOR = {"supported": "#2e7d32", "contradicted": "#c62828", "inconclusive": "#757575"}


def effect_figure(record: dict[str, Any], out: Path) -> str:
    """One row per part: per-seed points (for a two-sample effect, each seed of one side minus
    the other side's mean), the estimate with its interval, the rule's reference line or band.
    Returns the file name (without extension)."""
    from normlab.report.style import close, figure, save

    parts = record["parts"]
    fig, axes = figure(nrows=len(parts), width=7.5, height=1.5)  # height per row
    axes = np.atleast_1d(axes)
    for ax, part in zip(axes, parts):
        e, rule = part["effect"], part["rule"]
        c = VERDICT_COLOR.get(part["verdict"], "#333")
        a, b = np.asarray(e["values_a"], float), np.asarray(e["values_b"], float)
        if b.size:
            ax.plot(a - b.mean(), np.full(a.size, 0.12), "o", ms=5, color=c, alpha=0.8, label="seeds of A - mean B")
            ax.plot(a.mean() - b, np.full(b.size, -0.12), "o", ms=5, mfc="none", color=c, alpha=0.8,
                    label="mean A - seeds of B")
        elif a.size:
            ax.plot(a, np.zeros(a.size), "o", ms=5, color=c, alpha=0.8, label="per seed")
        if e["lo"] is not None and e["hi"] is not None:
            ax.errorbar([e["estimate"]], [0.35], xerr=[[e["estimate"] - e["lo"]], [e["hi"] - e["estimate"]]],
                        fmt="D", color=c, capsize=4, lw=2, label="estimate, 95% interval")
        elif e["estimate"] is not None:
            ax.plot([e["estimate"]], [0.35], "D", color=c)
        if rule["kind"] == "direction":
            ax.axvline(rule["ref"], color="k", lw=1, ls="--")
        else:
            ax.axvspan(rule["lo"], rule["hi"], color="#90caf9", alpha=0.35, lw=0)
        ax.set_yticks([])
        ax.set_ylim(-0.5, 0.7)
        ax.set_title(f"{part['id']}: {part['verdict']}  ({part['quantity']})", fontsize=8, loc="left")
        ax.tick_params(labelsize=8)
    axes[0].legend(fontsize=7, loc="upper right", frameon=False)
    fig.suptitle(f"{record['id']}: {record['verdict']}", fontsize=10)
    name = f"claim-{record['id']}"
    save(fig, out / "figures", name)
    close(fig)
    return name


def quick_context_figures(q: Any, out: Path) -> None:
    """Per-depth and per-layer profiles behind the quick claims (seed mean and spread)."""
    from normlab.claims.measure import last_w2
    from normlab.report import figures as F
    from normlab.report.style import close, save

    fd = out / "figures"
    depths, Lmax, Lref = q.depths, max(q.depths), q.ref_depth()

    def keep(fig: Any, name: str) -> None:
        save(fig, fd, name)
        close(fig)

    w2 = {p: (np.array(depths, float), last_w2(q, p)) for p in ("post", "pre")}
    fig, _ = F.depth_scaling(w2, "||dLoss/dW2_L||_F (last block)", "last-layer W2 gradient against depth (xavier)")
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
    ax.legend()
    keep(fig, "forward_norms")
    jac = {p: (np.array(q.layers(p, Lmax, "jac_rms_to_last", "stream", "x"), float),
               q.values(p, Lmax, "jac_rms_to_last", "stream", "x")) for p in ("post", "pre", "deepnorm")}
    fig = F.layer_profile(jac, "RMS singular value of d x_L / d x_l", f"end-to-end Jacobian at init, L={Lmax}",
                          logy=True, xlabel="stream index l (0 = embedding)")
    ax = fig.axes[0]
    ax.plot(jac["post"][0], (2 ** -0.5) ** (Lmax - jac["post"][0]), "k:", label="seed 004: (1/√2)^(L-l)")
    ax.legend()
    keep(fig, "jacobian")
    tc = {p: (np.array(depths, float), np.stack([q.values(p, L, "token_cos", "stream", "x")[:, -1] for L in depths], 1))
          for p in ("post", "pre", "deepnorm")}
    keep(F.curves(tc, "depth L (blocks)", "mean pairwise token cosine at x_L", "rank collapse at init",
                  logy=False, logx=True), "rank_collapse")
