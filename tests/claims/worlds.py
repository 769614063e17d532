"""Per training claim, a synthetic world for each outcome: ``WORLDS[claim id](o)`` gives the
cells of a store where the claim's rule verdict must be supported (o = "S": every part),
contradicted ("C") or inconclusive ("I", noise around the rule's reference); a new training
claim's test is its world here (test_training_rules.py decides every claim in every world). Map cells are
best val losses: ``T`` trains (2.6), a cell 0.5 above it still trains (3.1 < 3.197, the
unigram plateau minus the stall margin); ``WIDE`` noise straddles any reference."""

from __future__ import annotations

from typing import Any

import synthetic as S
import worlds_frontier
import worlds_long
import worlds_new_methods
import worlds_seeds
import worlds_transfer

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
    rows += [(MAP, m("post", 3e-3, 6, 0), T + 0.5, T - 0.5), (MAP, m("post", 3e-3, 6, 50), T, T)]
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
    """pre-vs-post without warm-up: 20 logged gradient norms per run, k of 19 at 1.5 (a clip at 1.0
    would cut them) and the rest at 0.8, then a spike 2 x 10**v, the largest (log10(max / median) =
    v + log10(2 / median)). S: Pre-LN's share and spike below Post-LN's; C: above; I: both shares
    around one half, spikes around 1, wide."""
    ks = {"S": ((1, 2) * 3, (15, 16) * 3), "C": ((15, 16) * 3, (1, 2) * 3),
          "I": ((4, 16, 6, 14, 8, 12), (16, 4, 14, 6, 12, 8))}[o]
    spike = {"S": (0.0, 2.0), "C": (2.0, 0.0), "I": (1.0, 1.0)}[o]
    sig = WIDE if o == "I" else TINY

    def run(k: tuple[int, ...], v: float) -> Any:
        return lambda s: {"best": T, "grad": [1.5] * k[s] + [0.8] * (19 - k[s]) + [2.0 * 10 ** (v + S.jit(s, sig))]}

    return [("pre-vs-post", {P: "pre", W: 0}, run(ks[0], spike[0])),
            ("pre-vs-post", {P: "post", W: 0}, run(ks[1], spike[1]))]


def seed001_early_gradients(o: str) -> list:
    """log10(block 1 / block 6 gradient norm) at step 1000, warm-up 50: post, pre."""
    r = {"S": (1.5, 0.2), "C": (0.2, 1.5), "I": (1.0, 1.0)}[o]
    sig = WIDE if o == "I" else TINY

    def run(v: float) -> Any:
        return lambda s: {"best": T, "diag": [{"step": 1000, "grad_norm": [1.0, 10 ** (v + S.jit(s, sig))] + [1.0] * 6}]}

    return [("pre-vs-post", {P: "post", W: 50}, run(r[0])), ("pre-vs-post", {P: "pre", W: 50}, run(r[1]))]


def zloss_logz(o: str) -> list:
    def run(head: float, tail: Any) -> Any:
        return lambda s: {**S.gain_run(-1.5), "diag": [{"step": 0, "log_z": head}] * 4
                          + [{"step": 40, "log_z": tail(s)}] * 4}

    if o == "S":
        return [("zloss", {"optim.z_loss": 0.0}, run(4.0, lambda s: 6.0)),
                ("zloss", {"optim.z_loss": 1e-4}, run(4.0, lambda s: 0.2 + S.jit(s, 0.01)))]
    if o == "C":
        return [("zloss", {"optim.z_loss": 0.0}, run(0.3, lambda s: 0.3 + S.jit(s, 0.01))),
                ("zloss", {"optim.z_loss": 1e-4}, run(4.0, lambda s: 3.0 + S.jit(s, 0.01)))]
    return [("zloss", {"optim.z_loss": 0.0}, run(1.0, lambda s: 1.5 + S.jit(s, 0.5))),
            ("zloss", {"optim.z_loss": 1e-4}, run(1.0, lambda s: 1.0 + S.jit(s, 0.5)))]


def lr_sensitivity(o: str) -> list:
    steep, flat = [2.0, 1.8, 2.5, 4.17, 4.17], [2.0, 1.8, 1.9, 2.0, 2.1]
    lrs = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
    loss = {"S": (steep, flat), "C": (flat, steep), "I": (flat, flat)}[o]
    logit = {"S": ((2.0, 20.0), (2.0, 2.1)), "C": ((20.0, 2.0), (2.0, 20.0)), "I": ((2.0, 2.0), (2.0, 2.0))}[o]
    sig = 0.5 if o == "I" else 0.01
    cells = []
    for (qk, curve), (a, b) in zip(((None, loss[0]), ("layernorm", loss[1])), logit):
        for lr, v in zip(lrs, curve):
            def run(s: int, v: float = v, a: float = a, b: float = b, lr: float = lr) -> dict:
                d = S.diag_lines({"attn_max_logit": [a, a]}, {"attn_max_logit": [b * (1 + S.jit(s, sig))] * 2})
                return {"best": v, "final": v + (S.jit(s, sig) if o == "I" else 0.0), **({"diag": d} if lr == 1e-2 else {})}
            cells.append(("lr-sensitivity", {P: "pre", QK: qk, LR: lr}, run))
    return cells


def pre_collapse(o: str) -> list:
    sh, dp = {"S": (0.3, 0.05), "C": (0.05, 0.3), "I": (0.2, 0.2)}[o]
    other = {"S": 0.3, "C": 0.02, "I": 0.2}[o]
    dele = {"S": -0.5, "C": 0.5, "I": 0.0}[o]
    lns_dele = {"S": 0.5, "C": -0.5, "I": 0.0}[o]  # the lns part compares deletions, lns minus pre
    sig = 0.1 if o == "I" else 0.001

    def run(angle: Any, aux: Any = None, dl: float | None = None) -> Any:
        def f(s: int) -> dict:
            last = {"angular_distance": angle(s), **({"angular_distance_aux": aux(s)} if aux else {})}
            return {**S.gain_run(-1.5), "diag": S.diag_lines(last, last),
                    **({"deletion": dl + S.jit(s, 4 * sig)} if dl is not None else {})}
        return f

    def profile(a: float, b: float) -> Any:
        return lambda s: [a + S.jit(s, sig)] * 4 + [b + S.jit(s, sig)] * 4

    flat = profile(other, other)
    return [("collapse", {P: "pre"}, run(profile(sh, dp), dl=dele)),
            ("collapse", {P: "resi_dual"}, run(flat, flat)), ("collapse", {P: "lns"}, run(flat, dl=lns_dele))]


def sandwich_max_abs(o: str) -> list:
    ends = {"S": ((5.0, 6.0), (5.0, 500.0)), "C": ((5.0, 500.0), (5.0, 6.0)), "I": ((5.0, 50.0), (5.0, 50.0))}[o]
    sig = 0.8 if o == "I" else 0.001

    def run(first: float, last: float) -> Any:
        return lambda s: {**S.gain_run(-1.5), "diag": S.diag_lines({"max_abs": [first] * 3},
                                                                      {"max_abs": [last * (1 + S.jit(s, sig))] * 3})}

    return [("collapse", {P: "sandwich"}, run(*ends[0])), ("collapse", {P: "pre"}, run(*ends[1]))]


def seed004_lr_sensitive(o: str) -> list:
    """Per-seed sweeps of final losses (the jitter moves with the lr so the sensitivity varies by
    seed); 10 logged gradient norms per run, the last 10**sp times the rest (an explosion when
    sp >= 1: S every Post-LN run, no Pre-LN run; I 3 of 5 seeds of each at every lr, so 15 of 25
    both); and seed002-init-sensitive's cells for the init part."""
    steep, flat = [2.0, 2.3, 2.5, 4.17, 4.17], [2.0, 1.8, 1.9, 2.0, 2.1]
    curves = {"S": (steep, flat), "C": (flat, steep), "I": (flat, flat)}[o]
    spikes = {"S": (2.0, 0.0), "C": (0.0, 2.0), "I": (1.0, 1.0)}[o]  # log10(max / median) grad norm
    sig = 0.5 if o == "I" else 0.01
    out = []
    for p, curve, sp in zip(("post", "pre"), curves, spikes):
        for i, (lr, v) in enumerate(zip([3e-4, 1e-3, 3e-3, 1e-2, 3e-2], curve)):
            out.append(("lr-sensitivity", {P: p, QK: None, LR: lr},
                        lambda s, v=v, i=i, sp=sp: {"best": v, "final": v + S.jit((s + i) % 5, sig),
                                                    "grad": [0.5] * 9 + [0.5 * 10 ** max(0.0, sp + S.jit(s, sig))]}))
    return out + seed002_init_sensitive(o)


def seed002_post_vanish(o: str) -> list:
    """new-methods' Post-LN arm at 18 blocks: diagnostic lines at steps 20..200 whose block-1 /
    block-18 gradient ratio is 10**r at every step (S: -1.5, a vanishing first block; C: 0; I: -1 +- WIDE)."""
    r = {"S": -1.5, "C": 0.0, "I": -1.0}[o]
    sig = WIDE if o == "I" else TINY

    def run(s: int) -> dict:
        g = [1.0, 10 ** (r + S.jit(s, sig))] + [1.0] * 16 + [1.0, 1.0]  # [embeddings, blocks 1..18, final]
        return {"best": S.STALLS, "diag": [{"step": st, "grad_norm": g} for st in range(20, 201, 20)]}

    return [("new-methods", {P: "post", "model.norm": "layernorm"}, run)]


# claim id -> its world: every training claim has one (test_training_rules.py checks)
WORLDS = {
    "warmup-post": warmup_post, "warmup-pre-not-universal": warmup_pre_not_universal,
    "seed002-post-shallow": seed002_post_shallow, "seed002-shorter-warmup": seed002_shorter_warmup,
    "seed004-warmup-lr": seed004_warmup_lr, "seed002-init-sensitive": seed002_init_sensitive,
    "liu-post-converged": liu_post_converged, "seed004-depth": seed004_depth,
    "deepnorm-depth": lambda o: depth_fix(o, "deepnorm", 5e-4),
    "admin-depth": lambda o: depth_fix(o, "admin", 1e-3),
    "seed002-sandwich-deep": seed002_sandwich_deep, "seed000-final-norm": seed000_final_norm,
    "seed002-pet-project": seed002_pet_project, "seed002-clipping": seed002_clipping,
    "seed001-early-gradients": seed001_early_gradients, "seed002-post-vanish": seed002_post_vanish,
    "zloss-logz": zloss_logz, "lr-sensitivity": lr_sensitivity, "seed004-lr-sensitive": seed004_lr_sensitive,
    "pre-collapse": pre_collapse, "sandwich-max-abs": sandwich_max_abs,
    **worlds_frontier.WORLDS,
    **worlds_long.WORLDS,
    **worlds_new_methods.WORLDS,
    **worlds_seeds.WORLDS,
    **worlds_transfer.WORLDS,
}
# worlds that need another number of seeds per study than the presets' (FakeContext's ``seeds``)
WORLD_SEEDS: dict[str, dict[str, int]] = {**worlds_frontier.WORLD_SEEDS, **worlds_seeds.WORLD_SEEDS,
                                           **worlds_transfer.WORLD_SEEDS}
