"""Quick claims on the Jacobian, the first update and the seeds' exact statements.

Their per-seed data come from :mod:`normlab.diagnostics.measurements` (in ``QuickData.extra``)
and, for the end-to-end gain, from the probe grid.
"""

from __future__ import annotations

import numpy as np

from normlab.claims.catalogue.quick import INIT_REGIME, PROBE, SETTINGS
from normlab.claims.claim import Measured, Part, claim
from normlab.claims.measure import Needs, QuickData
from normlab.claims.regime import Regime, factor
from normlab.claims.rules import Direction, Within
from normlab.stats.effects import Effect, one_sample, paired, slope_per_seed

# The exact checks of a seed's formula or code: what they measure holds at any weights (a formula on
# random inputs, a mask's structure, logits of loaded weights), so the init the scoping rule
# requires is stated, and the lab's inside it.
EXACT_REGIME = Regime((
    factor("init", "any weights (an exact check: a formula, a mask, or loaded weights)",
           why="the quantity is exact at every init; the draws only vary the inputs"),
    factor("steps", "at or near initialisation", why="no training"),
))

STEP = ("one Adam step (lr 1e-4, no weight decay) at init on a batch of Tiny Shakespeare, logits measured on "
        "another batch; probe-sized models (xavier, d = d_ff = 128) at L in {2, 4, 8, 16, 32}; 5 seeds")
STEP_BLOCKS = STEP.replace("one Adam step (", "one Adam step of the blocks' parameters alone (embeddings, final norm "
                           "and head fixed; ", 1)


@claim(id="jacobian-identity", quick=True, regime=INIT_REGIME, needs=Needs(extra=("identity:pre", "identity:post")), experiment=PROBE + "; one Rademacher probe per block",
       source="seed 000 (Korean lecture notes, 000_ca64de5e8bef631c.txt)", settings=SETTINGS,
       statement="Post-LN's Jacobian is J_LN (I + J_F): even the identity path passes through J_LN. Pre-LN's "
                 "is I + J_F J_LN: it keeps a direct identity term.",
       parts=[Part("pre", "Pre-LN's block Jacobian carries the identity with weight 1",
                   "identity coefficient tr(d x_l / d x_{l-1}) / n, mean over the blocks of L = 16, per seed (pre)",
                   Within(0.9, 1.1), "a direct I term gives 1 plus the branch's trace; +-0.1", check=True),
              Part("post", "Post-LN's identity is scaled by J_LN (below 1)",
                   "the same coefficient (post)", Direction(-1, 0.9),
                   "J_LN divides by the std of x + F(x), above 1 when the branch adds variance (xavier init), so the "
                   "identity enters scaled by about 1/sqrt(1 + Var F); 0.9 leaves room for the branch's own trace")])
def jacobian_identity(q: QuickData) -> dict[str, Measured]:
    ic = q.extra["identity"]
    out = {}
    for p in ("pre", "post"):
        vals = [float(np.mean(r)) for r in ic[p]]
        out[p] = Measured(one_sample(vals), [f"{p}/L{ic['L']}/seed{s}" for s in q.seed_list[:len(vals)]],
                          {"per_block_seed_mean": np.mean(ic[p], 0).round(3).tolist()})
    return out


@claim(id="seed004-decay", quick=True, needs=Needs(extra=("identity_path:post",)),
       experiment=PROBE + "; the identity term prod_k J_LN_k pushed forward by jvp at L = 32",
       source="seed 004 (Chinese survey, 004_d24365e98fdce59d.txt)", settings=SETTINGS,
       regime=Regime((factor("init", "not stated (the derivation assumes Var F = Var x)", matters=False),)),
       statement="Post-LN's identity path decays like (1/sqrt(2))^L through the layers: a toll booth on every "
                 "layer, so that at 32 layers it is almost 0.",
       parts=[Part("factor", "the identity term falls by a factor 1/sqrt(2) = 0.707 per normalised residual",
                   "geometric mean over the 64 LayerNorms of L = 32 blocks of ||J_LN v|| / ||v||, the tangent v "
                   "pushed through the LayerNorm Jacobians alone (every J_F term of the product dropped), per seed "
                   "(post)", Within(0.65, 0.76),
                   "0.707 +- about 7%; the seed's layer is x <- Norm(x + F(x)), one norm each, so the factor is "
                   "per LayerNorm (2 per block)"),
              Part("almost-0", "at 32 layers the identity path is almost 0",
                   "log10 of ||prod_k J_LN_k v|| / ||v|| over all 64 LayerNorms, per seed (post)", Direction(-1, -2),
                   "'almost 0' read as below 1% (the seed's formula gives 1.5e-5 at 32)")])
def seed004_decay(q: QuickData) -> dict[str, Measured]:
    f = np.array(q.extra["identity_path"]["post"])  # (seeds, norms)
    cells = [f"post/L{q.extra['identity_path']['L']}/seed{s}" for s in q.seed_list[:len(f)]]
    return {"factor": Measured(one_sample(np.exp(np.log(f).mean(1)).tolist()), cells),
            "almost-0": Measured(one_sample(np.log10(f).sum(1).tolist()), cells,
                                 {"predicted_log10": float(f.shape[1] * np.log10(2 ** -0.5))})}


# Seed 001 says only "randomly initialised parameters": the lab reads the statement at GPT-2's
# N(0, 0.02), the usual small init, where a sub-layer's output is small by construction. Under
# xavier the stream enters every norm at unit scale (embeddings N(0, 1/d) times sqrt(d)) and the
# branch adds variance, so LN divides by std(x + F) >= 1 and its gain on F is at most about 1
# by construction: the premise ("relatively small" F, over-amplified) is not that regime.
LN_GAIN = ("one forward pass of probe-sized Post-LN models (GPT-2 init N(0, 0.02), W_O and W_2 N(0, 0.02/sqrt(2L)); "
           "d = d_ff = 128, 4 heads) at L = 16 on a batch of Tiny Shakespeare: each sub-layer's input x and output "
           "F, and the LayerNorm's Jacobian at x + F applied to F (forward mode); 5 seeds")
LN_REGIME = Regime((
    factor("init", "not stated ('randomly initialised parameters')",
           why="the lab reads GPT-2's N(0, 0.02), the usual small init, not xavier: under xavier the stream enters "
               "every norm at unit scale and the norm's gain on F is below 1 by construction"),
    factor("steps", "at initialisation", why="one forward pass at init"),
))
FIRST_WHY = ("the first sub-layer normalises x + F with x the embeddings (std about 0.03 under GPT-2's init), where "
             "the statement's premise holds most: a gain above 1 is the least 'over-amplifies' asserts. Read apart "
             "because a median over the 32 sub-layers discards it (seen on seeds 100 and 101 before registering: "
             "gain about 35 here, about 0.99 at every later sub-layer). Design: 5 seeds, per-seed sd 0.05 (prior) "
             "detect +0.084 with 80% power")


@claim(id="seed001-ln-amplifies", quick=True, regime=LN_REGIME, needs=Needs(extra=("ln_gain_gpt2:post",)),
       source="seed 001 (Korean paper summary, 001_362ada3767c69b55.txt)", experiment=LN_GAIN,
       settings="GPT-2 init (N(0, 0.02)), no training; each seed draws new weights and a new batch; effects over seeds",
       statement="Post-LN's instability shows at initialisation: with randomly initialised parameters the output of "
                 "the sub-layer F_l is relatively small, and LayerNorm over-amplifies it, which causes gradient "
                 "explosion.",
       parts=[Part("small", "at init a Post-LN sub-layer's output is small against its input",
                   "log10 of RMS(F(x)) / RMS(x), median over the 32 sub-layers of L = 16, GPT-2 init, per seed (post)",
                   Direction(-1), "'relatively small' read against the stream it is added to: smaller than x. "
                   "Design: 5 seeds, per-seed sd 0.05 (prior) detect -0.084 with 80% power"),
              Part("amplifies-first", "the LayerNorm amplifies the first sub-layer's output",
                   "log10 of ||J_LN(x + F) F|| / ||F||, the norm's gain on the sub-layer's output where it normalises, "
                   "sub-layer 1 (block 1's attention) of L = 16, GPT-2 init, per seed (post)", Direction(1), FIRST_WHY),
              Part("amplifies-later", "... and every later sub-layer's",
                   "that log10 gain, median over sub-layers 2 to 32 of L = 16, GPT-2 init, per seed (post)",
                   Direction(1), "the statement is about every sub-layer F_l; after the first norm the stream has unit "
                   "scale, so this reads whether the amplification persists. Design: 5 seeds, per-seed sd 0.01 "
                   "(prior) detect +0.017 with 80% power")])
def seed001_ln_amplifies(q: QuickData) -> dict[str, Measured]:
    got = q.extra["ln_gain_gpt2"]
    cells = [f"post/L{got['L']}/gpt2/seed{s}" for s in q.seed_list[:len(got["post"])]]
    small = [float(np.median(np.log10([r["ratio"] for r in rows]))) for rows in got["post"]]
    first = [float(np.log10(rows[0]["gain"])) for rows in got["post"]]
    later = [float(np.median(np.log10([r["gain"] for r in rows[1:]]))) for rows in got["post"]]
    return {"small": Measured(one_sample(small), cells, {"per_seed": small}),
            "amplifies-first": Measured(one_sample(first), cells, {"per_seed": first}),
            "amplifies-later": Measured(one_sample(later), cells, {"per_seed": later})}


def _slopes(q: QuickData, p: str, key: str = "one_step") -> list[float]:
    steps = q.extra[key]
    m = np.array([[steps[p][L][s]["change"] for L in steps["depths"]] for s in range(len(steps[p][steps["depths"][0]]))])
    return slope_per_seed(steps["depths"], m)


# Liu et al. 2020, Theorem 2 (as the lab reads it): for an N-layer Transformer at init and a
# perturbation W* = W + delta of its sub-layers' parameters, Var[F(x0, W) - F(x0, W*)] is about
# sum_i beta_{i,i}^2 C, which Section 4 evaluates to O(N) for Post-LN and O(log N) for Pre-LN and
# Admin. The bound is on a variance: the norm of the change scales as its square root.
LIU_THM = ("Theorem 2 bounds the variance of the output change, Var[F(x0, W) - F(x0, W*)] ~ sum_i beta_ii^2 C, "
           "O(N) for Post-LN and O(log N) for Pre-LN and Admin; the lab measures the change's norm, which scales as "
           "the square root of the variance")


@claim(id="liu-amplification", quick=True,
       needs=Needs(extra=("one_step_blocks:post", "one_step_blocks:pre", "one_step_blocks:admin")),
       source="Liu et al. 2020, 'Understanding the Difficulty of Training Transformers', Sec. 4 and Theorem 2",
       experiment=STEP_BLOCKS, settings="xavier init; Admin profiled on the batch",
       regime=Regime((factor("optimizer", "Adam, the first updates", why="one Adam step"),
                      factor("depth", "N sub-layers, 12 to 120", inside=True,
                             why="4 to 64 sub-layers (L = 2 to 32 blocks): the growth law is read over a factor 16"),
                      factor("width", "d = 512", matters=False, why="the bound is in N, not d"))),
       statement="The variance of the output change caused by the first parameter updates grows with the number of "
                 "sub-layers N as O(N) for Post-LN (amplification) and as O(log N) for Pre-LN and for Admin.",
       parts=[Part("post", "Post-LN's output change grows like sqrt(N): its variance like N",
                   "slope of log(relative logit change after one Adam step of the blocks' parameters) against "
                   "log L, per seed (post)",
                   Within(0.35, 0.65), LIU_THM + "; O(N) for the variance is a log-log slope of 1/2 for the change's "
                   "norm, +-0.15 (the earlier +-0.3 around 1, halved). Design: 5 seeds, per-seed sd 0.065 (the "
                   "confirm-liu run) show it inside for a truth within +-0.04 of 1/2 with 80% power"),
              Part("pre", "Pre-LN's grows like sqrt(log N): its variance like log N", "that slope (pre)",
                   Direction(-1, 0.35), "Var = O(log N) over N = 4..64 gives the norm a log-log slope of "
                   "ln(ln 64 / ln 4) / (2 ln 16) = 0.20; 0.35 is the midpoint between that and Post-LN's 1/2. "
                   "Design: 5 seeds, sd 0.065, detect a slope of +0.24 with 80% power"),
              Part("admin", "Admin's grows like sqrt(log N)", "that slope (admin)", Direction(-1, 0.35),
                   "as for Pre-LN")])
def liu_amplification(q: QuickData) -> dict[str, Measured]:
    s = {p: _slopes(q, p, "one_step_blocks") for p in ("post", "pre", "admin")}
    return {p: Measured(one_sample(s[p]), [f"{p}/one-step"], {"per_seed": s[p]}) for p in s}


@claim(id="deepnorm-bounded", quick=True, regime=INIT_REGIME, needs=Needs(extra=("one_step:deepnorm", "one_step:post")), source="DeepNet (Wang et al. 2022), Sec. 4", experiment=STEP,
       settings="xavier init; DeepNorm's alpha = (2L)^(1/4), beta = (8L)^(-1/4) (decoder-only)",
       statement="With alpha = (2M)^(1/4) on the shortcut and beta = (8M)^(-1/4) on W_V, W_O, W_1, W_2, the "
                 "model update stays bounded by a constant independent of depth.",
       parts=[Part("bounded", "DeepNorm's output change after one step does not grow with depth",
                   "slope of log(relative logit change) against log L, per seed (deepnorm)", Within(-0.2, 0.2),
                   "bounded independently of depth = exponent about 0"),
              Part("vs-post", "... unlike Post-LN's", "that slope, deepnorm minus post, paired by seed",
                   Direction(-1), "DeepNorm exists to remove Post-LN's growth"),
              Part("shortcut", "the shortcut's share of the pre-norm sum alpha x + F(x) grows with depth",
                   "slope of mean log(Var F / Var[alpha x]) over sub-layers against log L, per seed (deepnorm)",
                   Direction(-1), "alpha grows and beta shrinks with depth: the branch share should fall",
                   check=True)])
def deepnorm_bounded(q: QuickData) -> dict[str, Measured]:
    steps = q.extra["one_step"]
    s = {p: _slopes(q, p) for p in ("deepnorm", "post")}
    share = np.array([[steps["deepnorm"][L][i]["branch_share"] for L in steps["depths"]]
                      for i in range(len(steps["deepnorm"][steps["depths"][0]]))])
    sh = slope_per_seed(np.log(steps["depths"]), share, log_x=False, log_y=False)
    return {"bounded": Measured(one_sample(s["deepnorm"]), ["deepnorm/one-step"], {"per_seed": s["deepnorm"]}),
            "vs-post": Measured(paired(s["deepnorm"], s["post"]), ["deepnorm/one-step", "post/one-step"]),
            "shortcut": Measured(one_sample(sh), ["deepnorm/one-step"])}


@claim(id="seed001-rms", quick=True, regime=EXACT_REGIME, needs=Needs(extra=("rms",)), source="seed 001 (Korean paper summary, 001_362ada3767c69b55.txt)",
       experiment="x = s z, z of unit RMS (64 x 128, a new draw per seed), s = 0.1 and 10; 5 seeds",
       settings="exact arithmetic in float32",
       statement="RMSNorm(x) = x / RMS(x) * g, where RMS(x) = (1/n) sum x_i^2.",
       parts=[Part("normalises", "the formula normalises: its output RMS does not depend on the input's scale",
                   "log10(output RMS at s = 10 / output RMS at s = 0.1) of the seed's formula, per draw",
                   Within(-0.05, 0.05), "a normaliser's output is scale-free (normlab's RMSNorm: 0.000)")])
def seed001_rms(q: QuickData) -> dict[str, Measured]:
    r = q.extra["rms"]
    return {"normalises": Measured(one_sample([x["seed_log10_ratio"] for x in r]), [f"draw/seed{i}" for i in q.seed_list[:len(r)]],
                                   {"normlab_log10_ratio": float(np.mean([x["normlab_log10_ratio"] for x in r]))})}


@claim(id="seed002-gpt2", quick=True, regime=EXACT_REGIME, needs=Needs(extra=("gpt2",)), source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt)",
       experiment="random 3-layer transformers GPT-2 models (d = 64, no download, 3 seeds) loaded into normlab's "
                  "post and pre placements", settings="float32, dropout off",
       statement="Example: GPT-2 uses post-norm.",
       parts=[Part("post", "normlab's Post-LN with GPT-2's weights reproduces GPT-2's logits",
                   "log10 max |logit difference| to GPT-2's own forward, post placement, per model",
                   Direction(-1, -4), "reproduces = agrees to 1e-4 (float32 round-off is ~1e-6)")])
def seed002_gpt2(q: QuickData) -> dict[str, Measured]:
    r = q.extra["gpt2"]
    if not r:
        return {"post": Measured(Effect(None, None, None, 0, method="one-sample t"),
                                 note="transformers is not installed (pip install 'normlab[hf]')")}
    return {"post": Measured(one_sample([x["log10_diff_post"] for x in r]), [f"gpt2/seed{i}" for i in q.seed_list[:len(r)]],
                             {"log10_diff_pre": [x["log10_diff_pre"] for x in r]})}


@claim(id="seed002-code-causal", quick=True, regime=EXACT_REGIME, needs=Needs(extra=("causal",)), source="seed 002 (Russian Q&A, 002_b1188389a59f61f9.txt)",
       experiment="the seed's TransformerBlock code (pre-norm branch), d = 64, 4 heads, 16 positions, 3 seeds",
       settings="nn.MultiheadAttention in its default (sequence, batch, d) layout, as the code calls it",
       statement="Pet project: 'implement a simple transformer with a pre/post-norm switch, train it on Tiny "
                 "Shakespeare' with the block x = x + self.attention(self.norm1(x), self.norm1(x), "
                 "self.norm1(x))[0] (no attention mask).",
       parts=[Part("causal", "a language model built from this block sees only the past",
                   "log10 of the largest change of outputs before position 8 when positions 8.. change, relative",
                   Direction(-1, -6), "a causal block's earlier outputs do not move at all (float32: < 1e-6)")])
def seed002_code(q: QuickData) -> dict[str, Measured]:
    r = q.extra["causal"]
    return {"causal": Measured(one_sample(r), [f"block/seed{i}" for i in q.seed_list[:len(r)]])}
