"""Resolve a ``ModelConfig``'s names into what the model is built from: the one place where
placement, layout, norm, qk-norm, init, FFN and activation names and the placements' options
are checked, and where refused combinations are refused.

``resolve_model(cfg)`` also checks ``model.impl`` (the code that computes the architecture,
``normlab.model.impls``) and ``model.param`` (the parametrisation, ``normlab.model.param``) and
returns a ``ResolvedModel``: per block the (attention, FFN) sub-layers with their placement class
and validated options, the norm factories, the init scheme, the FFN class and the
parametrisation. ``TransformerLM`` builds from it; callers that only want to validate a config
early (before anything is written) call it too. Accepted ``model.placement`` forms:

  "pre"                                   every sub-layer of every block
  {name = "admin", omega = "closed_form"} a placement with options, everywhere
  ["post", {name = "none", rezero = true}, ...]   one entry per block (length n_layer)
  [{attn = "pre", ffn = "post"}, ...]     per block, per sub-layer (both keys required)
  "mix", {name = "mix", fraction = 0.5}   a layout macro that expands to a list
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from normlab.core.errors import NO_VALUE, ConfigError, unknown_name
from normlab.core.schema import from_dict, help_text
from normlab.model.catalogue import ACTIVATIONS, FFNS, IMPLS, INITS, LAYOUTS, NORMS, PARAMS, PLACEMENTS, QK_NORMS
from normlab.model.config import ModelConfig
from normlab.model.param import Parametrisation
from normlab.model.placement import Placement, PlacementOptions, Site, Stream

SUBLAYERS = ("attn", "ffn")
NormFactory = Callable[[int, float, bool], nn.Module]  # (d, eps, bias) -> module


@dataclass(frozen=True)
class SubLayer:
    """One sub-layer's placement: its registered name, class and validated options."""

    name: str
    cls: type[Placement]
    options: PlacementOptions


@dataclass(frozen=True)
class ResolvedModel:
    """Everything ``TransformerLM`` needs beyond the config's numbers (see the module docstring)."""

    cfg: ModelConfig
    layout: tuple[tuple[SubLayer, SubLayer], ...]  # per block: (attention, FFN)
    make_norm: NormFactory
    qk_norm: NormFactory | None
    init: Any                                      # the InitScheme of model.init
    ffn: Callable[[ModelConfig], nn.Module]
    param: Parametrisation                         # the parametrisation of model.param

    def names(self) -> list[tuple[str, str]]:
        """Per block, the (attention, FFN) placement names."""
        return [(a.name, f.name) for a, f in self.layout]

    def site(self, layer: int, kind: str) -> Site:
        """The Site of sub-layer ``kind`` ("attn", "ffn" or "final") of 1-based block ``layer``."""
        index = {"attn": 2 * layer - 1, "ffn": 2 * layer, "final": 2 * self.cfg.n_layer + 1}[kind]
        options = self.layout[layer - 1][SUBLAYERS.index(kind)].options if kind != "final" else None
        return Site(self.cfg, layer, kind, index, self.make_norm, self.init, options, self.param)

    def stream(self) -> Stream:
        """The residual stream the placements need (every sub-layer agrees, see ``resolve_model``)."""
        return self.layout[0][0].cls.make_stream(self.cfg, self.make_norm)

    def for_config(self, cfg: ModelConfig) -> "ResolvedModel":
        """This plan for ``cfg``, a config that differs from the one it was resolved from only in
        its vocabulary (the corpus fixes it after the names are checked): no second resolution."""
        if dataclasses.replace(cfg, vocab_size=self.cfg.vocab_size) != self.cfg:
            raise ValueError("ResolvedModel.for_config: the config differs in more than model.vocab_size; resolve it")
        return dataclasses.replace(self, cfg=cfg, param=type(self.param)(cfg, self.param.options))

    @property
    def final_norm(self) -> bool:
        """``model.final_norm``, or the last sub-layer's default when it is none."""
        return self.cfg.final_norm if self.cfg.final_norm is not None else self.layout[-1][1].cls.final_norm


def resolve_model(cfg: ModelConfig) -> ResolvedModel:
    """The ResolvedModel of ``cfg``; raises ConfigError naming the field (``model.placement[2].omega``, ...)."""
    make_norm = NORMS.get(cfg.norm)
    qk_norm = QK_NORMS.get(cfg.qk_norm, "model.qk_norm") if cfg.qk_norm is not None else None
    init = INITS.get(cfg.init)
    if cfg.ffn not in FFNS:
        raise ConfigError("model.ffn", cfg.ffn, f"use {' or '.join(FFNS.names())}")
    ACTIVATIONS.get(cfg.activation)  # checked whatever the FFN: a typo never waits for a GELU FFN
    impl = IMPLS.get(cfg.impl)
    layout = _layout(cfg)
    _check_combination(cfg, layout)
    if cfg.attn_scale is not None and getattr(qk_norm, "learned_scale", False):
        raise ConfigError("model.attn_scale", cfg.attn_scale, f"qk_norm {cfg.qk_norm!r} learns its own softmax "
                                                             "scale; set model.attn_scale=none")
    param = _param(cfg, layout)
    plan = ResolvedModel(cfg, tuple(layout), make_norm, qk_norm, init, FFNS.get(cfg.ffn), param)
    impl.check(cfg)  # after the lab's own checks: an implementation refuses what it cannot compute
    return plan


def build_model(cfg: ModelConfig, plan: ResolvedModel | None = None) -> Any:
    """The model of ``cfg`` as ``model.impl`` computes it (the lab's ``TransformerLM`` by
    default), its weights drawn from the global RNG as seeded by the caller; what the training
    loop, its replay and ``RunDir.load_model`` build. ``plan``: ``cfg`` already resolved (a
    training run resolves its model once, when it is checked). (Any: the implementations share
    the forward contract of ``normlab.model.impls.Impl``, not a class.)"""
    return IMPLS.get(cfg.impl).build(cfg, plan if plan is not None else resolve_model(cfg))


def materialise(model: Any, device: torch.device | str) -> Any:
    """``model``, a ``TransformerLM`` built on the meta device (``model/cost.py`` ``meta_model``, the
    training run's pre-flight), with the values ``build_model`` would give, on ``device``: with the
    global RNG seeded as for that build, every parameter and buffer and the RNG state afterwards
    equal ``torch.manual_seed(s); build_model(cfg).to(device)`` bit for bit
    (``TransformerLM.materialise``). Called again on the materialised model, it puts the same
    initial values back into the same Parameter objects (a replay's restart). Refuses another
    ``model.impl`` (build it with ``build_model``)."""
    cfg = getattr(model, "cfg", None)
    if not isinstance(cfg, ModelConfig) or not callable(getattr(model, "materialise", None)):
        raise TypeError(f"materialise: expected a TransformerLM built on the meta device, got {type(model).__name__}")
    if not lab_internals(cfg):
        raise ValueError(f"materialise: model.impl={cfg.impl!r} is not the lab's TransformerLM and is not built "
                         "from a meta model; build it with build_model(cfg)")
    return model.materialise(device)


def lab_internals(cfg: ModelConfig) -> bool:
    """Whether ``cfg`` builds a ``TransformerLM`` (its blocks and placements: what in-training
    diagnostics, batching, probes and ``train.init_from`` read)."""
    return bool(IMPLS.get(cfg.impl).lab_internals)


def _param(cfg: ModelConfig, layout: list[tuple[SubLayer, SubLayer]]) -> Parametrisation:
    """The parametrisation of ``model.param`` (a name or a table {name = ..., option = ...}), its
    base fields present, refusing a placement it cannot drive (one line naming both and why)."""
    spec = cfg.param
    if isinstance(spec, dict) and isinstance(spec.get("name"), str):
        name, given = spec["name"], {k: v for k, v in spec.items() if k != "name"}
    elif isinstance(spec, str):
        name, given = spec, {}
    else:
        raise ConfigError("model.param", spec, f"use a name ({', '.join(PARAMS.names())}) or a table "
                                               "{name = ..., option = ...}")
    cls = PARAMS.get(name)
    param: Parametrisation = cls(cfg, _options(cls, name, given, "model.param", "parametrisation"))
    param.check(name)
    for sub in {s.name: s for pair in layout for s in pair}.values():
        why = param.refusal(sub.cls)
        if why:
            raise ConfigError("model.param", spec, f"{name} cannot drive placement {sub.name}: it {why}")
    if cfg.attn_scale is not None and param.attn_scale() != 1.0 / math.sqrt(cfg.head_dim):
        raise ConfigError("model.attn_scale", cfg.attn_scale, f"model.param={name!r} sets the softmax scale "
                                                             "(1/d_head); set model.attn_scale=none")
    return param


def _options(owner: Any, name: str, given: dict[str, Any], field: str, kind: str = "placement") -> PlacementOptions:
    """``owner.Options`` from the table's other keys; errors name ``field.option``."""
    fields = dataclasses.fields(owner.Options)
    if given and not fields:
        raise ConfigError(f"{field}.{next(iter(given))}", NO_VALUE, f"{kind} {name!r} has no options")
    for f in fields:  # TOML reads inf and nan as numbers: an option's own range check may let inf by
        if f.name in given and not _finite(given[f.name]):
            raise ConfigError(f"{field}.{f.name}", given[f.name], f"must be finite; {help_text(f)}")
    try:
        return from_dict(owner.Options, given, prefix=f"{field}.")
    except ConfigError as e:
        if e.field.startswith(f"{field}."):
            raise
        raise ConfigError(f"{field}.{e.field}", e.value, e.fix) from None


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return all(_finite(v) for v in value) if isinstance(value, (list, tuple)) else True


def _split(item: Any, field: str) -> tuple[str, dict[str, Any]]:
    """(name, options table) of a name or a ``{name = ..., option = ...}`` table."""
    if isinstance(item, str):
        return item, {}
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        return item["name"], {k: v for k, v in item.items() if k != "name"}
    raise ConfigError(field, item, "use a placement name or a table {name = ..., option = ...} "
                                   "(per layer also {attn = ..., ffn = ...})")


def _sublayer(item: Any, field: str) -> SubLayer:
    name, given = _split(item, field)
    if name in LAYOUTS:
        raise ConfigError(field, name, f"{name!r} is a layout for the whole model, not a "
                                       "per-layer placement; write its list out instead")
    cls = PLACEMENTS.get(name, field)
    return SubLayer(name, cls, _options(cls, name, given, field))


def _block(item: Any, field: str) -> tuple[SubLayer, SubLayer]:
    if isinstance(item, dict) and "name" not in item:
        if set(item) != set(SUBLAYERS):
            raise ConfigError(field, item, "a per-sub-layer table needs exactly the keys attn and ffn")
        return _sublayer(item["attn"], f"{field}.attn"), _sublayer(item["ffn"], f"{field}.ffn")
    sub = _sublayer(item, field)
    return sub, sub


def _layout(cfg: ModelConfig) -> list[tuple[SubLayer, SubLayer]]:
    spec, field = cfg.placement, "model.placement"
    if isinstance(spec, (str, dict)):
        if isinstance(spec, dict) and "name" not in spec:
            raise ConfigError(field, spec, "a table names its placement, e.g. {name = \"admin\", omega = "
                                           "\"profile\"}; tables {attn = ..., ffn = ...} go in a per-layer list")
        name, given = _split(spec, field)
        if name in LAYOUTS:
            macro = LAYOUTS.get(name)
            spec = macro.expand(cfg.n_layer, _options(macro, name, given, field))
        elif name not in PLACEMENTS:  # name the field itself, not [0]
            raise unknown_name(field, name, PLACEMENTS.names() + LAYOUTS.names())
        else:
            return [_block(spec, field)] * cfg.n_layer
    if not isinstance(spec, list) or len(spec) != cfg.n_layer:
        n = len(spec) if isinstance(spec, list) else "?"
        raise ConfigError(field, cfg.placement, f"a per-layer list needs model.n_layer={cfg.n_layer} entries, got {n}")
    return [_block(item, f"{field}[{i}]") for i, item in enumerate(spec)]


def _check_combination(cfg: ModelConfig, layout: list[tuple[SubLayer, SubLayer]]) -> None:
    classes = {s.name: s.cls for pair in layout for s in pair}
    names = sorted(classes)
    # A placement with its own residual stream (resi_dual's two streams, ngpt's unit
    # sphere) gives the neighbouring blocks a state they cannot read: refuse the mix.
    if len({c.make_stream.__func__ for c in classes.values()}) > 1:  # type: ignore[attr-defined]
        own = [n for n in names if classes[n].owns_stream()]
        raise ConfigError("model.placement", cfg.placement,
                          f"{', '.join(own)} brings its own residual stream and cannot be mixed with "
                          f"{', '.join(n for n in names if n not in own)}; use it for every sub-layer")
    if cfg.norm == "none":
        strict = [n for n in names if classes[n].needs_norm]
        if strict:
            raise ConfigError("model.norm", cfg.norm,
                              f"placement {', '.join(strict)} rescales the shortcut and needs a norm after each "
                              "sub-layer to undo it (without one the stream grows as prod(omega)); choose "
                              f"one of {', '.join(n for n in NORMS.names() if n != 'none')}")
    if cfg.qk_norm is not None:
        own = [n for n in names if classes[n].sets_qk_norm]
        if own:
            raise ConfigError("model.qk_norm", cfg.qk_norm,
                              f"placement {', '.join(own)} normalises q, k and v itself (with model.norm); "
                              "set model.qk_norm=none and model.qkv_norm=false")
    if cfg.kv_heads != cfg.n_head:
        grouped = [n for n in names if classes[n].needs_full_kv]
        if grouped:
            raise ConfigError("model.n_kv_head", cfg.n_kv_head,
                              f"placement {', '.join(grouped)} assumes one key/value head per query head; "
                              "set model.n_kv_head=none")

