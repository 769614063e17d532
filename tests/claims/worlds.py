"""Per training claim, a synthetic world for each outcome: ``WORLDS[claim id](o)`` gives the
cells of a store where the claim's rule verdict must be supported (o = "S": every part),
contradicted ("C") or inconclusive ("I", noise around the rule's reference). Map cells are
best val losses: ``T`` trains (2.6), a cell 0.5 above it still trains (3.1 < 3.197, the
unigram plateau minus the stall margin); ``WIDE`` noise straddles any reference."""

from __future__ import annotations

from typing import Any

import synthetic as S

P, W, LR, QK, L = "model.placement", "optim.warmup_steps", "optim.lr", "model.qk_norm", "model.n_layer"
INIT_, FN = "model.init", "model.final_norm"
TINY, WIDE, T = 0.01, 0.5, S.TRAINS
MAP, RV = "stability-map", "recipe-variants"


def m(p: str, lr: float, n: int, w: int) -> dict[str, Any]:
    """A stability-map cell."""
    return {P: p, LR: lr, L: n, W: w}


def world(o: str, rows: list[tuple[str, dict[str, Any], float, float]], wide_at: float = T) -> list:
    """rows: (study, params, best val loss if S, if C); "I": every cell at ``wide_at`` +- WIDE."""
    out = []
    for study, params, sup, con in rows:
        c, sig = {"S": (sup, TINY), "C": (con, TINY), "I": (wide_at, WIDE)}[o]
        out.append((study, params, S.best_run(c, sig)))
    return out


def warmup_post(o: str) -> list:
    rows = []
    for lr in (5e-4, 1e-3):
        rows += [(MAP, m("post", lr, 6, 0), T + 0.5, T - 0.5), (MAP, m("post", lr, 6, 50), T, T),
                 (MAP, m("pre", lr, 6, 0), T, T + 0.5), (MAP, m("pre", lr, 6, 50), T, T)]
    g = {P: "post", INIT_: "gpt2"}
    return world(o, rows + [(RV, {**g, W: 0}, T + 0.5, T - 0.5), (RV, {**g, W: 50}, T, T)])


def warmup_pre_not_universal(o: str) -> list:
    return world(o, [(MAP, m("pre", 3e-3, 6, 0), T + 0.5, T - 0.5), (MAP, m("pre", 3e-3, 6, 50), T, T)])


def seed002_post_shallow(o: str) -> list:
    return world(o, [(MAP, m("post", 1e-3, 6, 50), T, T + 0.3), (MAP, m("pre", 1e-3, 6, 50), T, T)])


def inter(o: str, a1: dict, a0: dict, b1: dict, b0: dict, sign: int = 1) -> list:
    """An interaction (a1 - a0) - (b1 - b0) of sign ``sign`` in S, the opposite in C."""
    up, dn = (a1, b1) if sign > 0 else (b1, a1)
    return world(o, [(MAP, up, T + 0.5, T), (MAP, dn, T, T + 0.5), (MAP, a0, T, T), (MAP, b0, T, T)])


def seed002_shorter_warmup(o: str) -> list:
    return inter(o, m("post", 1e-3, 6, 0), m("post", 1e-3, 6, 50), m("pre", 1e-3, 6, 0), m("pre", 1e-3, 6, 50))


def seed004_warmup_lr(o: str) -> list:
    return inter(o, m("post", 3e-3, 6, 50), m("post", 5e-4, 6, 50), m("pre", 3e-3, 6, 50), m("pre", 5e-4, 6, 50))


def seed004_depth(o: str) -> list:
    return inter(o, m("post", 1e-3, 24, 50), m("post", 1e-3, 6, 50), m("pre", 1e-3, 24, 50), m("pre", 1e-3, 6, 50))


def seed002_init_sensitive(o: str) -> list:
    rows = [(MAP, m("post", 1e-3, 6, 0), T + 0.5, T), (RV, {P: "post", INIT_: "gpt2", W: 0}, T, T),
            (MAP, m("pre", 1e-3, 6, 0), T, T + 0.5), (RV, {P: "pre", INIT_: "gpt2", W: 0}, T, T)]
    return world(o, rows)


def liu_post_converged(o: str) -> list:
    # S: post at or below pre at 6 blocks, post's loss rises with depth; C: post 0.3 above pre
    # at 6 blocks, and pre's loss rises with depth while post's does not
    return world(o, [(MAP, m("post", 5e-4, 6, 50), T - 0.1, T + 0.3), (MAP, m("pre", 5e-4, 6, 50), T, T),
                     (MAP, m("post", 5e-4, 24, 50), T + 0.5, T + 0.3), (MAP, m("pre", 5e-4, 24, 50), T, T + 0.5)])


def depth_fix(o: str, fix: str, lr: float) -> list:
    """'fix trains at 24 blocks' (best below the plateau) and 'loses less with depth than post':
    S: fix trains at 24, post stalls there; C: fix stalls at 24, post trains. "I": every cell
    at the plateau minus the stall margin, so the one-sample part straddles its reference."""
    return world(o, [(MAP, m(fix, lr, 24, 50), T, S.STALLS), (MAP, m(fix, lr, 6, 50), T, T),
                     (MAP, m("post", lr, 24, 50), S.STALLS, T), (MAP, m("post", lr, 6, 50), T, T)],
                 wide_at=S.CE.unigram - 0.15)


def seed002_sandwich_deep(o: str) -> list:
    c = {p: (m(p, 1e-3, 24, 50), m(p, 1e-3, 6, 50)) for p in ("pre_post", "sandwich", "pre")}
    return world(o, [(MAP, c["pre"][0], T + 0.5, T), (MAP, c["pre"][1], T, T),
                     (MAP, c["pre_post"][0], T, T + 0.5), (MAP, c["pre_post"][1], T, T),
                     (MAP, c["sandwich"][0], T, T + 0.5), (MAP, c["sandwich"][1], T, T)])


def seed000_final_norm(o: str) -> list:
    return world(o, [(RV, {P: "pre", FN: False, W: 50}, T + 0.5, T - 0.5), (MAP, m("pre", 1e-3, 24, 50), T, T)])


def seed002_pet_project(o: str, post_fails: tuple[bool, ...] | None = None) -> list:
    """pre-vs-post without warm-up (6 seeds): first eval, best loss, and which post runs stall."""
    first = {"S": (2.5, 3.3), "C": (3.3, 2.5), "I": (3.0, 3.0)}[o]
    sig = WIDE if o == "I" else TINY
    fails = post_fails or {"S": (True,) * 6, "C": (False,) * 6, "I": (True, False) * 3}[o]
    pre_best = {"S": (T,) * 6, "C": (T + 0.5,) * 6, "I": tuple(S.STALLS if f else T for f in fails)}[o]

    def pre(s: int) -> dict:
        return {"best": pre_best[s] + S.jit(s, TINY), "first": first[0] + S.jit(s, sig)}

    def post(s: int) -> dict:
        return {"best": (S.STALLS if fails[s] else T) + S.jit(s, TINY), "first": first[1] + S.jit(s, sig)}

    return [("pre-vs-post", {P: "pre", W: 0}, pre), ("pre-vs-post", {P: "post", W: 0}, post)]


def seed002_clipping(o: str) -> list:
    """Eight map cells per placement (40 runs each; 0 of 40 diverged has an upper bound below
    0.1), a cell diverging on every seed or none; spikes: log10(max / median) grad norm."""
    div = {"S": (0, 6), "C": (6, 0), "I": (1, 1)}[o]  # diverging cells of 8: pre, post
    spike = {"S": (0.0, 2.0), "C": (2.0, 0.0), "I": (1.0, 1.0)}[o]
    sig = WIDE if o == "I" else TINY
    out = []
    for p, k in zip(("pre", "post"), div):
        for i, (lr, w) in enumerate((lr, w) for lr in (5e-4, 1e-3, 3e-3, 1e-2) for w in (0, 50)):
            q = {"status": "diverged"} if i < k else {"best": T}
            out.append((MAP, m(p, lr, 6, w), lambda s, q=q: dict(q)))

    def spiky(v: float) -> Any:
        return lambda s: {"best": T, "grad": [0.5] * 19 + [0.5 * 10 ** max(0.0, v + S.jit(s, sig))]}

    return out + [("pre-vs-post", {P: "pre", W: 0}, spiky(spike[0])), ("pre-vs-post", {P: "post", W: 0}, spiky(spike[1]))]


def seed001_early_gradients(o: str) -> list:
    """log10(block 1 / block 6 gradient norm) at step 1000, warm-up 50: post, pre."""
    r = {"S": (1.5, 0.2), "C": (0.2, 1.5), "I": (1.0, 1.0)}[o]
    sig = WIDE if o == "I" else TINY

    def run(v: float) -> Any:
        return lambda s: {"best": T, "diag": [{"step": 1000, "grad_norm": [1.0, 10 ** (v + S.jit(s, sig))] + [1.0] * 6}]}

    return [("pre-vs-post", {P: "post", W: 50}, run(r[0])), ("pre-vs-post", {P: "pre", W: 50}, run(r[1]))]


def seed002_higher_lr(o: str) -> list:
    a, b = {"S": (2.0, 3.5), "C": (3.5, 2.0), "I": (3.0, 3.0)}[o]
    sig = WIDE if o == "I" else TINY
    return [("lr-sensitivity", {P: p, QK: None, LR: 1e-2}, lambda s, v=v: {"best": v, "final": v + S.jit(s, sig)})
            for p, v in (("pre", a), ("post", b))]
