"""Resolve ``model.placement`` into one placement name per sub-layer.

Accepted forms:
  "pre"                                   every sub-layer of every block
  ["post", "post", "pre", ...]            one entry per block (length n_layer)
  [{"attn": "pre", "ffn": "post"}, ...]   per block, per sub-layer (both keys required)
  "mix"                                   a layout macro (see ``LAYOUTS``) that expands to a list

Layout macros are names that stand for a per-layer list; they are not placements and
cannot appear inside a list. Mixing a placement that owns the residual stream (ResiDual's
two streams, nGPT's unit sphere) with any other is refused: its state has no meaning for
the neighbouring blocks.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from normlab.errors import ConfigError, unknown_name
from normlab.registry import Registry

if TYPE_CHECKING:
    from normlab.model.config import ModelConfig

Layout = list[tuple[str, str]]  # per block: (attention placement, FFN placement)
LayoutMacro = Callable[["ModelConfig"], list[str]]
LAYOUTS: Registry[LayoutMacro] = Registry("layout", "model.placement")
SUBLAYERS = ("attn", "ffn")


@LAYOUTS.register("mix")
def mix(cfg: "ModelConfig") -> list[str]:
    """Mix-LN (Li et al. 2024): Post-LN for the first floor(alpha*L) blocks, Pre-LN after.

    alpha = ``model.mix_fraction`` (0.25 by default, as in the paper). The paper's split is
    floor(alpha*L); Python's ``round`` would round half to even (L=6 -> 2, L=14 -> 4), so the
    rule is spelled out. The 1e-9 keeps products such as 0.29 * 100 = 28.999... at 29.
    """
    n_post = math.floor(cfg.mix_fraction * cfg.n_layer + 1e-9)
    return ["post"] * n_post + ["pre"] * (cfg.n_layer - n_post)


mix.formula = "post for the first floor(alpha*L) blocks, pre after (alpha = model.mix_fraction)"  # type: ignore[attr-defined]
mix.source = "Mix-LN (Li et al. 2024)"  # type: ignore[attr-defined]


def resolve_layout(cfg: "ModelConfig") -> Layout:
    """Per-block (attn, ffn) placement names; raises ConfigError naming model.placement."""
    from normlab.model import placements  # noqa: F401  (registers the placement classes)
    from normlab.model.placement import PLACEMENTS, Placement

    spec = cfg.placement
    if isinstance(spec, str):
        if spec not in LAYOUTS and spec not in PLACEMENTS:  # name the field itself, not [0]
            raise unknown_name("model.placement", spec, PLACEMENTS.names() + LAYOUTS.names())
        spec = LAYOUTS.get(spec)(cfg) if spec in LAYOUTS else [spec] * cfg.n_layer
    if not isinstance(spec, list) or len(spec) != cfg.n_layer:
        n = len(spec) if isinstance(spec, list) else "?"
        raise ConfigError("model.placement", cfg.placement,
                          f"a per-layer list needs model.n_layer={cfg.n_layer} entries, got {n}")
    layout: Layout = []
    for i, item in enumerate(spec):
        field = f"model.placement[{i}]"
        if isinstance(item, dict):
            if set(item) != set(SUBLAYERS):
                raise ConfigError(field, item, "a per-sub-layer table needs exactly the keys attn and ffn")
            pair = (item["attn"], item["ffn"])
        elif isinstance(item, str):
            pair = (item, item)
        else:
            raise ConfigError(field, item, "use a placement name or a table {attn=..., ffn=...}")
        for name in pair:
            if name in LAYOUTS:
                raise ConfigError(field, name, f"{name!r} is a layout for the whole model, not a "
                                               "per-layer placement; write its list out instead")
            PLACEMENTS.get(name, field)
        layout.append(pair)
    # A placement with its own residual stream (resi_dual's two streams, ngpt's unit
    # sphere) gives the neighbouring blocks a state they cannot read: refuse the mix.
    names = sorted({n for pair in layout for n in pair})
    streams = {PLACEMENTS.get(n).make_stream.__func__ for n in names}
    if len(streams) > 1:
        own = [n for n in names if PLACEMENTS.get(n).make_stream.__func__ is not Placement.make_stream.__func__]
        raise ConfigError("model.placement", cfg.placement,
                          f"{', '.join(own)} brings its own residual stream and cannot be mixed with "
                          f"{', '.join(n for n in names if n not in own)}; use it for every sub-layer")
    return layout
