"""Model configuration (section ``model``): every architectural switch of the lab, as plain data.

``ModelConfig`` checks ranges and types only. Names (placement, norm, init, ffn, activation) and the
placements' options are checked once, where the model is built: ``model/build.py``
resolves them through the catalogue (``normlab.model.build.resolve_model``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Union

from normlab.core.schema import Section, doc
from normlab.model.registries import (  # help texts' {names}, read when shown
    ACTIVATIONS,
    FFNS,
    IMPLS,
    INITS,
    NORMS,
    PARAMS,
    QK_NORMS,
)

# A placement is a name, or a table {name = ..., option = ...}, for every layer; a per-layer
# list of those; and per layer optionally a table by sub-layer {attn = ..., ffn = ...}:
# "pre", {name = "admin", omega = "closed_form"}, ["post", "pre"], [{attn = "pre", ffn = "post"}, "pre"].
# The entries' shapes are checked by the resolver, which names the entry (model.placement[2]).
PlacementSpec = Union[str, dict[str, Any], list[Any]]

# The options that moved into their placement, tabled once: the error for an old key in user
# input and the upgrade of an old saved table both read it.
# old model key: (placement, its option there, the old default, a value for the error's example)
_MOVED: dict[str, tuple[str, str, Any, str]] = {
    "mix_fraction": ("mix", "fraction", 0.25, "0.25"),
    "admin_omega": ("admin", "omega", "profile", '"profile"'),
    "rezero": ("none", "rezero", False, "true"),
}

# Options added after configs were stored, with the value every config stored before them
# computed: ``upgrade`` fills it into a stored table that lacks the key, whatever today's
# default is (user input without the key gets the default).
_ADDED: dict[str, Any] = {
    "activation": "gelu_tanh",  # the MLP and GeGLU computed the tanh GELU before the option existed
}


@dataclass
class ModelConfig(Section):
    """A decoder-only Transformer language model."""

    section = "model"
    vocab_size: int = doc("tokens in the vocabulary (set from the tokenizer by `normlab train`)", 65)
    context: int = doc("maximum sequence length", 128)
    n_layer: int = doc("number of blocks (each has an attention and an FFN sub-layer)", 6)
    d_model: int = doc("residual stream width", 128)
    n_head: int = doc("attention heads; must divide d_model", 4)
    n_kv_head: int | None = doc("key/value heads, grouped-query attention (Ainslie et al. 2023); must divide "
                                "n_head (none = n_head, plain multi-head attention)", None)
    placement: PlacementSpec = doc("norm placement: a name (see `normlab placements`), or a table {name=..., "
                               "option=...} for a placement with options; a per-layer list of those, or per "
                               "layer a table {attn=..., ffn=...}", "pre")
    norm: str = doc("norm used by the placement: {names}", "layernorm", names=NORMS)
    qk_norm: str | None = doc("normalise q and k per head: {names} (or none)", None, names=QK_NORMS)
    qkv_norm: bool = doc("also normalise v with qk_norm's norm (HybridNorm)", False)
    qk_norm_span: str = doc("what qk_norm normalises: 'head' (each head's q and k) or 'full' (all of q and "
                            "all of k at once, before the split into heads, as OLMo-2)", "head")
    final_norm: bool | None = doc("norm after the last block (none = the placement's default)", None)
    init: str = doc("weight init: {names} (see `normlab inits`)", "gpt2", names=INITS)
    ffn: str = doc("feed-forward type: {names}", "gelu", names=FFNS)
    d_ff: int | None = doc("FFN hidden width (none = 4*d_model)", None)
    # Always written: a table without the key is one written before the option, and reads as
    # the tanh GELU (``_ADDED``), so a config leaving the key out would change its GELU on reading.
    activation: str = doc("the GELU of ffn gelu and geglu: {names} (gelu: exact, x*Phi(x), PyTorch's and "
                          "nanoGPT's; gelu_tanh: the tanh approximation, GPT-2's gelu_new; about 4x the exact "
                          "one's cost on CPU); swiglu's gate is SiLU whatever this says", "gelu",
                          names=ACTIVATIONS)
    pos: str = doc("positions: learned or rope", "learned")
    rope_base: float = doc("RoPE base theta (10000 in Su et al. and Llama 2; 500000 in Llama 3)", 10000.0)
    bias: bool = doc("biases in linear layers and LayerNorm", True)
    dropout: float = doc("dropout on attention weights, residual branches and embeddings", 0.0)
    tie_embeddings: bool = doc("share the token embedding with the output head", True)
    norm_eps: float = doc("epsilon inside norms", 1e-5)
    # Options the released families need (Gemma 2/3, Qwen3, OLMo-3, Mistral); each is left out
    # of a config's JSON while unset, so configs and trial ids written before them are unchanged.
    d_head: int | None = doc("width of each attention head (none = d_model / n_head; Qwen3 and Gemma set it "
                             "apart, so W_Q is d_model x n_head*d_head)", None, omit_default=True)
    attn_scale: float | None = doc("the factor on q.k before the softmax (none = 1/sqrt(head width); Gemma: "
                                   "query_pre_attn_scalar^-1/2)", None, omit_default=True)
    attn_softcap: float | None = doc("soft-cap c on the attention logits, c*tanh(logit/c), before the mask "
                                     "(Gemma 2: 50; none = no cap)", None, omit_default=True)
    logit_softcap: float | None = doc("soft-cap c on the output logits, c*tanh(z/c) (Gemma 2: 30; none = no cap)",
                                      None, omit_default=True)
    embed_scale: float | None = doc("factor on the token embeddings in the forward pass (Gemma: sqrt(d_model); "
                                    "none = the init scheme's: 1 for gpt2, sqrt(d_model) for xavier)", None,
                                    omit_default=True)
    sliding_window: int | None = doc("tokens a query attends to, itself included, in the blocks of "
                                     "model.window_layers (Mistral, Gemma 2/3, OLMo-3; none = all earlier tokens)",
                                     None, omit_default=True)
    window_layers: list[int] | None = doc("1-based blocks that use model.sliding_window (none = every block)",
                                          None, omit_default=True)
    rope_local_base: float | None = doc("RoPE base theta of the sliding-window blocks (Gemma 3: 10000 locally, "
                                        "rope_base globally; none = model.rope_base)", None, omit_default=True)
    attn_gate: str | None = doc("gate each head's attention output by sigmoid(x W_g + b) before W_O (gated attention, "
                                "Qiu et al. 2025): 'elementwise' (the paper's best, one score per head dimension) or "
                                "'headwise' (one per head); none = no gate", None, omit_default=True)
    impl: str = doc("the code that computes this architecture: {names} (hf-gpt2: transformers' GPT-2, "
                    "initialised with the lab model's seeded weights, a baseline for placement pre)", "normlab",
                    names=IMPLS, omit_default=True)
    # The parametrisation axis (docs/parametrisation.md), left out of the JSON while unset like
    # the family options: every config written before it keeps its JSON and its trial id.
    param: str | dict[str, Any] = doc("parametrisation: {names} (docs/parametrisation.md): how the init, the "
                                      "per-group Adam lrs and the attention, output and residual-branch "
                                      "multipliers scale from model.base_width (and model.base_depth); a name or "
                                      "a table {name=..., option=...}", "sp", names=PARAMS, omit_default=True)
    base_width: int | None = doc("d_model of the base model whose hyper-parameters mup and completep carry over "
                                 "(required by them; sp ignores it)", None, omit_default=True)
    base_depth: int | None = doc("n_layer of the base model (required by completep; sp and mup ignore it)", None,
                                 omit_default=True)

    # Options that moved into their placement: an old key fails naming the new spelling.
    moved: ClassVar[dict[str, str]] = {key: f'model.placement = {{name = "{name}", {option} = {example}}}'
                                       for key, (name, option, _, example) in _MOVED.items()}

    @property
    def ff_width(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    @property
    def head_dim(self) -> int:
        """The width of each attention head: ``d_head``, else d_model / n_head."""
        return self.d_head if self.d_head is not None else self.d_model // self.n_head

    @property
    def q_width(self) -> int:
        """Rows of W_Q (and the input width of W_O): n_head * head_dim."""
        return self.n_head * self.head_dim

    def windowed(self, layer: int) -> bool:
        """Whether 1-based block ``layer`` attends through the sliding window."""
        return self.sliding_window is not None and (self.window_layers is None or layer in self.window_layers)

    def rope_base_of(self, layer: int) -> float:
        """The RoPE base of 1-based block ``layer`` (the local base in sliding-window blocks)."""
        local = self.rope_local_base
        return local if local is not None and self.windowed(layer) else self.rope_base

    @property
    def kv_heads(self) -> int:
        return self.n_kv_head if self.n_kv_head is not None else self.n_head

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context", "n_layer", "d_model", "n_head"):
            self.check(getattr(self, name) >= 1, name, "must be >= 1")
        for name in ("base_width", "base_depth"):
            self.check(getattr(self, name) is None or getattr(self, name) >= 1, name, "must be >= 1 or none")
        self.check(self.d_head is None or self.d_head >= 1, "d_head", "must be >= 1 or none (= d_model/n_head)")
        if self.d_head is None and self.d_model % self.n_head:
            divisors = [h for h in range(1, self.d_model + 1) if self.d_model % h == 0][:8]
            raise self.fail("n_head", f"must divide model.d_model={self.d_model}; "
                                      f"choose one of {', '.join(map(str, divisors))}, ...")
        if self.n_kv_head is not None:
            self.check(self.n_kv_head >= 1 and self.n_head % self.n_kv_head == 0, "n_kv_head",
                       f"must divide model.n_head={self.n_head} (or be none = n_head)")
        self.check(self.qk_norm_span in ("head", "full"), "qk_norm_span", "use head or full")
        self.check(self.attn_gate in (None, "elementwise", "headwise"), "attn_gate",
                   "use elementwise, headwise or none")
        self.check(self.rope_base > 0, "rope_base", "must be > 0, e.g. 10000")
        self.check(self.d_ff is None or self.d_ff >= 1, "d_ff", "must be >= 1 or none (= 4*d_model)")
        self.check(0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)")
        self.check(self.norm_eps > 0, "norm_eps", "must be > 0, e.g. 1e-5")
        self.check(self.pos in ("learned", "rope"), "pos", "use learned or rope")
        if self.pos == "rope":
            self.check(self.head_dim % 2 == 0, "pos", "rope needs an even head dim (d_model/n_head or d_head)")
        self._check_family_options()
        self.check(not self.qkv_norm or self.qk_norm is not None, "qkv_norm",
                   "set model.qk_norm too (it picks the norm applied to q, k and v)")
        self.check(self.qk_norm_span == "head" or self.qk_norm is not None, "qk_norm_span",
                   "set model.qk_norm too (it picks the norm applied over all of q and k)")

    def _check_family_options(self) -> None:
        for name in ("attn_scale", "attn_softcap", "logit_softcap", "embed_scale", "rope_local_base"):
            value = getattr(self, name)
            self.check(value is None or (value > 0 and math.isfinite(value)), name, "must be > 0 or none")
        self.check(self.sliding_window is None or self.sliding_window >= 1, "sliding_window",
                   "must be >= 1 tokens or none (full causal attention)")
        if self.window_layers is not None:
            self.check(self.sliding_window is not None, "window_layers", "set model.sliding_window too")
            bad = [i for i in self.window_layers if not 1 <= i <= self.n_layer]
            self.check(not bad, "window_layers", f"blocks are 1..model.n_layer={self.n_layer}, got {bad}")
            self.check(len(set(self.window_layers)) == len(self.window_layers), "window_layers",
                       "name each block once")
        if self.rope_local_base is not None:
            self.check(self.pos == "rope", "rope_local_base", "needs model.pos=rope")
            self.check(self.sliding_window is not None, "rope_local_base",
                       "set model.sliding_window too (the local base is that of the sliding-window blocks)")

    @classmethod
    def upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A ``model`` table written by an older normlab (a run's config.json, a saved model)
        in today's spelling: each moved option folds into its placement's table when it
        differs from its old default and is dropped when it does not; an option added since
        reads as what the model computed before it existed (``_ADDED``). User input is never
        upgraded: there an old key is an error naming the new spelling."""
        data = dict(data)
        for key, before in _ADDED.items():
            data.setdefault(key, before)
        old = {key: data.pop(key) for key in _MOVED if key in data}
        by_placement = {name: (key, option, default) for key, (name, option, default, _) in _MOVED.items()}

        def fold(entry: Any) -> Any:
            if isinstance(entry, str) and entry in by_placement:
                key, option, default = by_placement[entry]
                if key in old and old[key] != default:
                    return {"name": entry, option: old[key]}
            elif isinstance(entry, dict) and "name" not in entry:  # {attn = ..., ffn = ...}
                return {k: fold(v) for k, v in entry.items()}
            return entry

        spec = data.get("placement", "pre")
        data["placement"] = [fold(e) for e in spec] if isinstance(spec, list) else fold(spec)
        return data
