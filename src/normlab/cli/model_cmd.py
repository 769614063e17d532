"""``normlab placements``, ``normlab norms``, ``normlab inits``, ``normlab params``: what each switch name means."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("placements", help="list norm placements with formula and source",
                       description="List every norm placement (--placement NAME or --set model.placement=...) and "
                                   "layout macro with its formula and source; see docs/placements.md.")
    p.set_defaults(func=_placements)
    p = sub.add_parser("norms", help="list norms (model.norm) and QK-norms (model.qk_norm)",
                       description="List the norms a placement can use (--set model.norm=NAME) and the per-head "
                                   "QK-norms (--set model.qk_norm=NAME), each with its formula and source.")
    p.set_defaults(func=_norms)
    p = sub.add_parser("inits", help="list weight init schemes (model.init)",
                       description="List the weight initialisation schemes (--set model.init=NAME) with their "
                                   "formula and source; placements add their own adjustments on top.")
    p.set_defaults(func=_inits)
    p = sub.add_parser("params", help="list parametrisations (model.param: sp, muP, CompleteP)",
                       description="List the parametrisations (--set model.param=NAME, with model.base_width and "
                                   "model.base_depth) with their formula, source and options; see "
                                   "docs/parametrisation.md.")
    p.set_defaults(func=_params)


def _table(rows: list[tuple[str, str, str]], header: tuple[str, str, str] = ("name", "formula", "source")) -> None:
    rows = [header, *rows]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    for name, formula, source in rows:
        print(f"{name:<{w0}}  {formula:<{w1}}  {source}")


def _placements(args: argparse.Namespace) -> int:
    from normlab.core.schema import explain
    from normlab.model.catalogue import LAYOUTS, PLACEMENTS

    rows = [(name, cls.formula, cls.source) for name, cls in PLACEMENTS.items()]
    rows += [(name, f"layout: {fn.formula}", fn.source) for name, fn in LAYOUTS.items()]
    _table(rows)
    options = [(name, key, typ, default, help) for name, owner in [*PLACEMENTS.items(), *LAYOUTS.items()]
               for key, typ, default, help in explain(owner.Options)]
    if options:
        print("\nOptions, written beside the name: model.placement = {name = \"admin\", omega = \"closed_form\"}")
        for name, key, typ, default, help in options:
            print(f"  {name}.{key} ({typ}, default {default!r}): {help}")
    print("\nAlso: a per-layer list (model.placement='[\"post\",\"pre\"]') or per layer a table "
          "{attn=..., ffn=...}; see docs/placements.md.")
    return 0


def _norms(args: argparse.Namespace) -> int:
    from normlab.model.catalogue import NORMS, QK_NORMS

    _table([(n, f.formula, f.source) for n, f in NORMS.items()])
    print("\nmodel.qk_norm (per head, on q and k before the dot product; model.qkv_norm adds v):")
    _table([(n, f.formula, f.source) for n, f in QK_NORMS.items()])
    from normlab.model.attention_gate import OutputGate

    print("\nmodel.attn_gate (a gate on each head's output after attention, before W_O; not a norm, listed beside them):")
    _table([(n, formula, OutputGate.source) for n, formula in OutputGate.formula.items()])
    return 0


def _inits(args: argparse.Namespace) -> int:
    from normlab.model.catalogue import INITS

    _table([(n, s.formula, s.source) for n, s in INITS.items()])
    print("\nPlacements add their own adjustments (DeepNorm beta, ReZero 0, Admin omega, nGPT sphere); "
          "see `normlab placements`.")
    return 0


def _params(args: argparse.Namespace) -> int:
    from normlab.core.schema import explain
    from normlab.model.catalogue import PARAMS

    _table([(n, cls.formula, cls.source) for n, cls in PARAMS.items()])
    options = [(n, key, default, help) for n, cls in PARAMS.items() for key, _, default, help in explain(cls.Options)]
    if options:
        print("\nOptions, written beside the name: model.param = {name = \"completep\", alpha = 0.5}")
        for name, key, default, help in options:
            print(f"  {name}.{key} (default {default!r}): {help}")
    print("\nm_w = model.d_model / model.base_width, m_d = model.n_layer / model.base_depth; see docs/parametrisation.md.")
    return 0
