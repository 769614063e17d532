"""Named measurements at initialisation beyond the probe's statistics, each one value per seed
(what a quick claim's ``Needs.extra`` names, :data:`EXTRAS`; the claims decide on them, this
module measures them):

- ``identity:<placement>``: tr(d x_l / d x_{l-1}) / n per block (Hutchinson), the weight of
  the identity in each block's Jacobian (seed 000's J_LN (I + J_F) vs I + J_F J_LN);
- ``identity_path:post``: the per-norm factor of Post-LN's identity term prod_k J_LN_k (seed 004);
- ``one_step:<placement>``, ``one_step_blocks:<placement>``: relative change of the logits
  after one Adam step (Liu et al. 2020's amplification; DeepNet's bounded update), and
  DeepNorm's branch share;
- ``ln_gain:post``, ``ln_gain_gpt2:post``: what Post-LN's LayerNorm does to the sub-layer output
  it normalises, at xavier init and at GPT-2's N(0, 0.02) (seed001-ln-amplifies' init);
- ``rms``, ``gpt2``, ``causal``: the exact checks of :mod:`normlab.diagnostics.exact`.

Each builds probe-sized lab models (d = d_ff = 128, 4 heads) on the probe's data and
measures them with :mod:`normlab.diagnostics.sublayers`, which records through the one
capture path.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from normlab.diagnostics import sublayers
from normlab.diagnostics.exact import gpt2_parity, rms_formula, seed_block_causality
from normlab.diagnostics.probe import ProbeConfig, load_tokens, sample_batch
from normlab.model.transformer import TransformerLM

D, CONTEXT, BATCH = 128, 64, 8


def _setup(placement: str, L: int, seed: int, init: str = "xavier") -> tuple[Any, Any, Any]:
    """A probe-sized model (d = d_ff = 128, 4 heads) and a batch of the probe's data."""
    import torch

    data = "tinyshakespeare"
    try:
        tokens, vocab = load_tokens(data)
    except Exception:  # no corpus: random tokens (statistics at init hardly depend on the text)
        data = "random"
        tokens, vocab = load_tokens(data)
    cfg = ProbeConfig(placements=[placement], depths=[L], d_model=D, n_head=4, d_ff=D, init=init, seeds=1,
                      batch_size=BATCH, context=CONTEXT, data=data)
    gen = torch.Generator().manual_seed(1_000_003 * seed + 17)
    idx, tgt = sample_batch(tokens, vocab, 2 * BATCH, CONTEXT, gen)
    torch.manual_seed(seed)
    model = TransformerLM(cfg.model_config(placement, L, vocab))
    return model, (idx[:BATCH], tgt[:BATCH]), (idx[BATCH:], tgt[BATCH:])


def identity_coefficients(placement: str, L: int, seed: int) -> list[float]:
    """:func:`normlab.diagnostics.sublayers.identity_coefficients` of a probe-sized model (one
    Rademacher probe per block, drawn from a generator seeded with ``seed``)."""
    import torch

    model, (idx, tgt), _ = _setup(placement, L, seed)
    return sublayers.identity_coefficients(model, idx, tgt, torch.Generator().manual_seed(seed))


def identity_path(L: int, seed: int) -> list[float]:
    """:func:`normlab.diagnostics.sublayers.identity_path` of a probe-sized Post-LN model (the
    tangent drawn from a generator seeded with ``seed``)."""
    import torch

    model, (idx, tgt), _ = _setup("post", L, seed)
    return sublayers.identity_path(model, idx, tgt, torch.Generator().manual_seed(seed))


def one_step_change(placement: str, L: int, seed: int, lr: float = 1e-4, blocks_only: bool = False) -> dict[str, float]:
    """||f(x; W_1) - f(x; W_0)|| / ||f(x; W_0)||, f = logits on a held-out batch, W_1 = W_0 after
    one Adam step (lr, no weight decay) on another batch; Admin profiled on that batch first.
    ``blocks_only``: the step updates the blocks' parameters alone, embeddings, final norm and
    head fixed (Liu et al.'s Theorem 2 perturbs the N sub-layers' parameters; an update of the
    embedding or head adds a change that does not grow with depth).
    For DeepNorm also the branch share: mean over sub-layers of log(Var[F(x)] / Var[alpha x])."""
    import torch

    model, (idx, tgt), (ev, _) = _setup(placement, L, seed)
    model.calibrate(idx)
    share = float(np.mean(sublayers.branch_share(model, idx))) if placement == "deepnorm" else math.nan
    with torch.no_grad():
        f0 = model(ev)[0].float()
    opt = torch.optim.Adam(model.blocks.parameters() if blocks_only else model.parameters(), lr=lr)
    _, loss = model(idx, tgt)
    loss.backward()
    opt.step()
    with torch.no_grad():
        f1 = model(ev)[0].float()
    return {"change": float((f1 - f0).norm() / f0.norm()), "branch_share": share}


def ln_gain(L: int, seed: int, init: str = "xavier") -> list[dict[str, float]]:
    """Per sub-layer of a probe-sized Post-LN model: RMS(F) / RMS(x) and the LayerNorm's gain on F."""
    model, (idx, _), _ = _setup("post", L, seed, init)
    return sublayers.norm_gain(model, idx)


# The exact checks build this many models of their own, whatever the probe's seeds: a design
# plans these, not the probe's count (claims/design_seen.py via Needs.fixed_seeds).
EXACT_SEEDS = 3
FIXED_SEEDS = {"gpt2": EXACT_SEEDS, "causal": EXACT_SEEDS}
EXTRAS = ("identity:pre", "identity:post", "identity_path:post", "one_step:post", "one_step:pre", "one_step:admin", "one_step:deepnorm",
          "one_step_blocks:post", "one_step_blocks:pre", "one_step_blocks:admin",
          "ln_gain:post", "ln_gain_gpt2:post", "rms", "gpt2", "causal")  # what a quick claim's Needs.extra may name


def extra_size(key: str, seeds: int, depths: list[int]) -> int:
    """How many models (or draws) measuring ``key`` takes: the progress display's unit."""
    name = key.partition(":")[0]
    return {"identity": seeds, "identity_path": seeds, "one_step": seeds * len(depths),
            "one_step_blocks": seeds * len(depths), "ln_gain": seeds, "ln_gain_gpt2": seeds,
            "rms": seeds}.get(name, min(seeds, 3))


def measure_extra(key: str, out: dict[str, Any], seeds: int, depths: list[int], ref_depth: int,
                  tick: Any = None, first_seed: int = 0) -> None:
    """Measure ``key`` (one of :data:`EXTRAS`) into ``out`` in the layout the claims read, over
    seeds ``first_seed`` on; ``tick()`` after each model. Every measurement seeds itself, so the
    order does not matter."""
    ss = range(first_seed, first_seed + seeds)
    import torch

    def each(fn: Any, args: list[tuple[Any, ...]]) -> list[Any]:
        got = []
        for a in args:
            got.append(fn(*a))
            if tick:
                tick()
        return got

    name, _, p = key.partition(":")
    with torch.random.fork_rng():
        if name == "identity":
            out.setdefault("identity", {"L": ref_depth})[p] = each(identity_coefficients,
                                                                   [(p, ref_depth, s) for s in ss])
        elif name == "identity_path":
            out["identity_path"] = {"L": max(depths), "post": each(identity_path, [(max(depths), s) for s in ss])}
        elif name in ("one_step", "one_step_blocks"):
            step = functools.partial(one_step_change, blocks_only=name == "one_step_blocks")
            got = each(step, [(p, L, s) for L in depths for s in ss])
            out.setdefault(name, {"depths": list(depths)})[p] = {
                L: got[i * seeds:(i + 1) * seeds] for i, L in enumerate(depths)}
        elif name in ("ln_gain", "ln_gain_gpt2"):
            init = "gpt2" if name == "ln_gain_gpt2" else "xavier"
            out[name] = {"L": ref_depth, "init": init, "post": each(ln_gain, [(ref_depth, s, init) for s in ss])}
        elif name == "rms":
            out["rms"] = each(rms_formula, [(s,) for s in ss])
        elif name == "gpt2":
            g = each(gpt2_parity, [(s,) for s in ss[:EXACT_SEEDS]])
            out["gpt2"] = None if g[0] is None else g
        elif name == "causal":
            out["causal"] = each(seed_block_causality, [(s,) for s in ss[:EXACT_SEEDS]])
        else:
            raise ValueError(f"unknown extra measurement {key!r}; known: {', '.join(EXTRAS)}")


def measure_extras(seeds: int, depths: list[int], ref_depth: int) -> dict[str, Any]:
    """Every extra measurement of the quick claims, per seed (see the functions above)."""
    out: dict[str, Any] = {}
    for key in EXTRAS:
        measure_extra(key, out, seeds, depths, ref_depth)
    return out
