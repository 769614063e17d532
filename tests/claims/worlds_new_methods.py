"""Synthetic worlds of the claims on the 2021-2026 methods (``claims/catalogue/training_new_methods.py``),
all on the study 'new-methods' (5 seeds per arm): best val losses for the loss contrasts, and
diagnostics lines (per-group gradient norms, per-state variance) for the in-training parts.
S: every part's rule supported; C: every part contradicted; I: noise around the references."""

from __future__ import annotations

from typing import Any, Callable

import synthetic as S

from normlab.study.new_methods_preset import PERI_LN

NM = "new-methods"
P, NORM = "model.placement", "model.norm"
T, TINY, WIDE = S.TRAINS, 0.01, 0.5
L = 18


def arm(placement: str | dict[str, Any], norm: str = "layernorm") -> dict[str, Any]:
    return {P: placement, NORM: norm}


def losses(o: str, rows: list[tuple[dict[str, Any], float, float]], wide_at: float = T) -> list:
    """rows: (arm, best val loss if S, if C); I: every arm at ``wide_at`` +- WIDE."""
    out = []
    for params, sup, con in rows:
        c, sig = {"S": (sup, TINY), "C": (con, TINY), "I": (wide_at, WIDE)}[o]
        out.append((NM, params, S.best_run(c, sig)))
    return out


def hybridnorm_depth(o: str) -> list:
    """S: hybridnorm trains, 0.3 below Pre-LN, Post-LN stalls; C: hybridnorm stalls, Post-LN and
    Pre-LN train (0.5 lower); I: every arm at the plateau minus the stall margin, +- WIDE."""
    return losses(o, [(arm("hybridnorm"), T - 0.3, S.STALLS), (arm("post"), S.STALLS, T),
                      (arm("pre"), T, T - 0.5)], wide_at=S.CE.unigram - 0.15)


def _vs_pre(o: str, a: dict[str, Any]) -> list:
    """``a`` 0.3 below Pre-LN (S) or 0.3 above it (C): beyond the 0.05 margin either way."""
    return losses(o, [(a, T - 0.3, T + 0.3), (arm("pre"), T, T)])


def _grad_run(ratio: float, sig: float) -> Callable[[int], dict[str, Any]]:
    """Diagnostic lines at steps 20..200 whose block-1 / block-L gradient ratio is 10**ratio in
    the first half (the part read) and 1 in the second (which the quantity must ignore)."""
    def f(s: int) -> dict[str, Any]:
        r = ratio + S.jit(s, sig)
        lines = [{"step": st, "grad_norm": [1.0, 10 ** r] + [1.0] * (L - 1) + [1.0]} for st in range(20, 101, 20)]
        lines += [{"step": st, "grad_norm": [1.0] * (L + 2)} for st in range(120, 201, 20)]
        return {"best": T, "diag": lines}
    return f


def normformer_early_grad(o: str) -> list:
    pre, nf = {"S": (1.0, 0.1), "C": (0.0, 1.0), "I": (0.301, 0.301)}[o]
    sig = WIDE if o == "I" else TINY
    return [(NM, arm("pre"), _grad_run(pre, sig)), (NM, arm("normformer"), _grad_run(nf, sig))]


def _var_run(slope: float, sig: float) -> Callable[[int], dict[str, Any]]:
    """A last diagnostic line whose Var(x_l) = 10**(slope * l) for l = 1..L (x_0 at an outlying
    1e-6 that the quantity must leave out), after a first line of flat variances."""
    def f(s: int) -> dict[str, Any]:
        k = slope + S.jit(s, sig)
        last = {"act_var": [1e-6] + [10 ** (k * i) for i in range(1, L + 1)]}
        return {"best": T, "diag": S.diag_lines({"act_var": [1.0] * (L + 1)}, last)}
    return f


def peri_ln_variance(o: str) -> list:
    pre, peri = {"S": (0.1, 0.01), "C": (-0.05, 0.05), "I": (0.0, 0.0)}[o]
    sig = 0.05 if o == "I" else 0.001
    return [(NM, arm("pre"), _var_run(pre, sig)), (NM, arm(PERI_LN), _var_run(peri, sig))]


WORLDS = {
    "hybridnorm-depth": hybridnorm_depth,
    "normformer-early-grad": normformer_early_grad,
    "subln-vs-pre": lambda o: _vs_pre(o, arm("subln")),
    "peri-ln-variance": peri_ln_variance,
    "derf-vs-layernorm": lambda o: _vs_pre(o, arm("pre", "derf")),
    "seednorm-vs-layernorm": lambda o: _vs_pre(o, arm("pre", "seednorm")),
    "keel-depth": lambda o: losses(o, [(arm("keel", "rmsnorm"), T - 0.3, S.STALLS), (arm("post"), S.STALLS, T),
                                       (arm("pre"), T, T - 0.5)], wide_at=S.CE.unigram - 0.15),
}
