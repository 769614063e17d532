"""Weight initialisation schemes (names: ``model/catalogue.py``) and the one ``init_weights``."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from normlab.model.config import ModelConfig
from normlab.model.placement import Placement


class InitScheme:
    """Base: per-tensor standard deviations and the embedding multiplier of a scheme."""

    formula = ""
    source = ""
    description = ""

    def embed_scale(self, cfg: ModelConfig) -> float:
        """Multiplier applied to token embeddings in the forward pass."""
        return 1.0

    def embed_std(self, cfg: ModelConfig) -> float:
        raise NotImplementedError

    def linear_std(self, layer: nn.Linear, cfg: ModelConfig) -> float:
        raise NotImplementedError

    def init_linear(self, name: str, layer: nn.Linear, cfg: ModelConfig) -> None:
        """Draw ``layer`` (``name``: its path in the model): N(0, linear_std), bias 0. A scheme
        whose draws are not a normal of one std per layer overrides this."""
        nn.init.normal_(layer.weight, 0.0, self.linear_std(layer, cfg))
        if layer.bias is not None:
            nn.init.zeros_(layer.bias)

    def init_embedding(self, name: str, emb: nn.Embedding, cfg: ModelConfig) -> None:
        """Draw an embedding table: N(0, embed_std)."""
        nn.init.normal_(emb.weight, 0.0, self.embed_std(cfg))


class GPT2Init(InitScheme):
    formula = "N(0, 0.02); W_O, W_2: N(0, 0.02/sqrt(2L))"
    source = "GPT-2 (Radford et al. 2019), nanoGPT"
    description = ("N(0, 0.02) everywhere; residual output projections (W_O, W_2) "
                   "N(0, 0.02/sqrt(2L)) (GPT-2, nanoGPT)")

    def embed_std(self, cfg: ModelConfig) -> float:
        return 0.02

    def linear_std(self, layer: nn.Linear, cfg: ModelConfig) -> float:
        # GPT-2 scales the projections that write into the residual stream by 1/sqrt(N),
        # N = 2L residual additions, so the stream's variance does not grow with depth.
        return 0.02 / math.sqrt(2 * cfg.n_layer) if getattr(layer, "residual", False) else 0.02


class XavierInit(InitScheme):
    formula = "linear N(0, 1/fan_in); token emb. N(0, 1/d) x sqrt(d)"
    source = "Xiong et al. 2020 (setting of the analysis); Vaswani et al. 2017 §3.4"
    description = ("N(0, 1/fan_in) for every linear layer (the setting of Xiong et al. 2020); "
                   "token embeddings N(0, 1/d) multiplied by sqrt(d) in the forward pass "
                   "(Vaswani et al. 2017 §3.4), so the stream starts with unit variance")

    def embed_scale(self, cfg: ModelConfig) -> float:
        return math.sqrt(cfg.d_model)

    def embed_std(self, cfg: ModelConfig) -> float:
        return 1.0 / math.sqrt(cfg.d_model)

    def linear_std(self, layer: nn.Linear, cfg: ModelConfig) -> float:
        return 1.0 / math.sqrt(layer.in_features)


class TorchDefaultInit(InitScheme):
    """What a model built from PyTorch's modules at their defaults starts from: seed 002's pet
    project (``nn.Embedding``, ``nn.MultiheadAttention``, ``nn.Linear``, ``nn.LayerNorm``, no
    init of its own). The bounds are those of ``reset_parameters`` in torch/nn/modules
    (linear.py, sparse.py, activation.py); uniform draws, so ``linear_std`` (what DeepNorm's and
    Sub-LN's rescaling divide by) is the uniform's std, bound / sqrt(3)."""

    formula = ("emb. N(0, 1); W_QKV U(+-sqrt(6/(d + 3d))), bias 0; W_O U(+-1/sqrt(d)), bias 0; "
               "other linear U(+-1/sqrt(fan_in)), bias the same")
    source = "PyTorch defaults (nn.Embedding, nn.MultiheadAttention, nn.Linear); seed 002's pet-project code"
    description = ("PyTorch's own module defaults, as seed 002's code leaves them: embeddings N(0, 1); the fused "
                   "W_Q,W_K,W_V xavier-uniform and bias 0 and W_O kaiming-uniform(a=sqrt 5) and bias 0 "
                   "(nn.MultiheadAttention); every other linear kaiming-uniform(a=sqrt 5), i.e. "
                   "U(-1/sqrt(fan_in), 1/sqrt(fan_in)), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (nn.Linear)")

    def embed_std(self, cfg: ModelConfig) -> float:
        return 1.0  # nn.Embedding.reset_parameters: normal_(weight) (and no sqrt(d) multiplier)

    def linear_std(self, layer: nn.Linear, cfg: ModelConfig) -> float:
        return 1.0 / math.sqrt(3 * layer.in_features)  # the std of U(-1/sqrt(fan_in), 1/sqrt(fan_in))

    def init_linear(self, name: str, layer: nn.Linear, cfg: ModelConfig) -> None:
        leaf = name.rpartition(".")[2]
        if leaf == "qkv":  # nn.MultiheadAttention._reset_parameters: xavier_uniform_(in_proj_weight), bias 0
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
            return
        if name == "lm_head" and cfg.tie_embeddings:
            return  # tied: the head is the embedding table, N(0, 1) (PyTorch ties after both are built)
        bound = 1.0 / math.sqrt(layer.in_features)
        nn.init.uniform_(layer.weight, -bound, bound)  # = kaiming_uniform_(a=sqrt(5)), nn.Linear's default
        if layer.bias is not None:
            if getattr(layer, "residual", False) and name.rpartition(".")[0].endswith("attn.branch"):
                nn.init.zeros_(layer.bias)  # nn.MultiheadAttention zeroes out_proj.bias
            else:
                nn.init.uniform_(layer.bias, -bound, bound)


@torch.no_grad()
def init_weights(model: Any, scheme: InitScheme) -> None:  # Any: init sits below the TransformerLM it fills
    """Initialise every tensor of ``model`` (a TransformerLM) with ``scheme`` (the one ``model.init`` names).

    | tensor                         | gpt2                  | xavier                          |
    |--------------------------------|-----------------------|---------------------------------|
    | wte (token emb., tied head)    | N(0, 0.02)            | N(0, 1/d); forward x sqrt(d)    |
    | wpe (learned positions)        | N(0, 0.02)            | N(0, 1/d)                       |
    | attn.qkv.weight (W_Q,W_K,W_V)  | N(0, 0.02)            | N(0, 1/d)                       |
    | attn.proj.weight (W_O)         | N(0, 0.02/sqrt(2L))   | N(0, 1/d)                       |
    | ffn.fc.weight (W_1; SwiGLU W_1a,W_1b) | N(0, 0.02)     | N(0, 1/d)                       |
    | ffn.proj.weight (W_2)          | N(0, 0.02/sqrt(2L))   | N(0, 1/d_ff)                    |
    | lm_head (untied only)          | N(0, 0.02)            | N(0, 1/d)                       |
    | every linear bias              | 0                     | 0                               |

    ``torch_default`` (what seed 002's code starts from; b = 1/sqrt(fan_in), U uniform):

    | tensor                         | torch_default                                                     |
    |--------------------------------|-------------------------------------------------------------------|
    | wte, wpe                       | N(0, 1) (nn.Embedding); tied head: the same tensor; no multiplier |
    | attn.qkv.weight, bias          | U(+-sqrt(6 / (d + rows))), rows = d + 2 kv width; bias 0 (nn.MultiheadAttention) |
    | attn.proj.weight, bias (W_O)   | U(+-b), b = 1/sqrt(q width); bias 0 (nn.MultiheadAttention's out_proj) |
    | ffn.fc, ffn.proj (W_1, W_2)    | U(+-b) (kaiming_uniform a = sqrt 5); bias U(+-b) (nn.Linear)      |
    | lm_head (untied only)          | U(+-1/sqrt(d)) (nn.Linear; the lab's head has no bias)            |
    | any other linear               | U(+-b); bias U(+-b) (nn.Linear)                                   |

    Tensors that do not depend on the scheme are constants, written by their module's
    ``reset_parameters()`` (which ``__init__`` calls, and ``TransformerLM.materialise`` again):

    | tensor                                   | value at init                                  |
    |------------------------------------------|------------------------------------------------|
    | layernorm / rmsnorm gain, bias           | 1, 0 (norms.py)                                |
    | rmsnorm_1p w                             | 0 (gain 1 + w)                                 |
    | scalenorm g (scalar)                     | sqrt(d) (d: the width it normalises)           |
    | dyt alpha (scalar), gamma, beta          | 0.5, 1, 0                                      |
    | derf alpha, s (scalars), gamma, beta     | 0.5, 0, 1, 0                                   |
    | seednorm gamma, alpha, beta (vectors)    | 1, 1, 0                                        |
    | attn.scale (qk_norm l2 only)             | log2(T^2 - T), T = max(context, 2) (Henry et al. 2020) |
    | attn.rotary cos, sin (buffers, not saved)| cos, sin of t * base^(-2i/d_head), t < context |
    | layerscale scale                         | 0.1 (L <= 18), 1e-5 (L <= 24), 1e-6            |
    | none + rezero: gate a                    | 0                                              |
    | admin omega (buffer)                     | closed form, or 1 then profiled (below)        |
    | normformer head scales (attn.pre_proj)   | 1                                              |
    | ngpt alpha, s_qk, s_fc, s_z (raw)        | 1/sqrt(d), 1/sqrt(d), 1, 1/sqrt(d) (effective 0.05, 1, 1, 1) |
    | ngpt fc_gain (buffer, not saved)         | sqrt(d) on the rows of W_1 feeding the nonlinearity, 1 on the others |
    | attn_res query (w_l; the stream's too)   | 0 (uniform weights over depth); key_norm gain 1 |
    | mhc phi, a, b                            | 0; 0.01; b_pre one-hot on stream (k-1) mod 4, b_post 1, b_res I |
    | attn.gate.w (model.attn_gate)            | a linear like the others: the scheme's draw, bias 0 |

    The parametrisation (``model.param``, ``model/param.py``) then rescales the draws (no draw
    of its own; sp leaves them; m_w = d_model / base_width; "the base model's std": the
    scheme's std for this tensor in the model of width base_width and, for completep, depth
    base_depth):

    | tensor                        | mup                                   | completep            |
    |-------------------------------|---------------------------------------|----------------------|
    | wte, wpe (the tied head too)  | the base model's std                  | as mup               |
    | hidden linear weights         | the base model's std x 1/sqrt(m_w)    | as mup, the base depth's std (gpt2: W_O, W_2 0.02/sqrt(2 base_depth m_w)) |
    | their biases                  | the base model's std (0 stays 0)      | as mup               |
    | lm_head (untied only)         | the base model's std                  | as mup               |

    Then each placement's ``init_()`` adjusts its own tensors and the stream's ``init_``
    the model-level ones:

    | placement | adjustment                                                             |
    |-----------|------------------------------------------------------------------------|
    | deepnorm  | W_V, W_1 x beta; W_O, W_2 = beta x the non-residual std (beta replaces GPT-2's 1/sqrt(2L)); beta = (8L)^(-1/4) |
    | none      | ReZero gate a = 0 (with its option ``rezero``)                         |
    | admin     | omega buffer: profiled on one batch after init, or the closed form     |
    | ngpt      | rows of W_Q,W_K,W_V,W_1, wte, wpe, lm_head and columns of W_O,W_2 normalised to 1; alpha = 0.05, s_qk = s_u = s_v = s_z = 1 (scaling trick) |
    """
    cfg = model.cfg
    for name, module in model.named_modules():  # the order of modules(): gpt2's and xavier's draws unchanged
        if isinstance(module, nn.Linear):
            scheme.init_linear(name, module, cfg)
        elif isinstance(module, nn.Embedding):
            scheme.init_embedding(name, module, cfg)
    param = getattr(model, "parametrisation", None)
    if param is not None:  # after every draw: a tied table is rescaled once, whichever module drew it last
        param.rescale(model, scheme)
    for module in model.modules():
        if isinstance(module, Placement):
            module.init_()
    model.stream.init_(model)
