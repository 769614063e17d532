"""``normlab presets`` and ``normlab config``: see what a run would use before running it."""

from __future__ import annotations

import argparse

from normlab.cli.common import add_config_args, add_run_options, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("presets", help="list run presets",
                       description="List the run presets: named starting configs for `normlab train --preset "
                                   "NAME` (a preset sets model, data, optim and train options; --config and --set "
                                   "still override it). `normlab config --preset NAME` prints everything one sets.")
    p.set_defaults(func=_presets)
    p = sub.add_parser("config", help="print the resolved config as JSON (or --explain every option)",
                       description="Print the RunConfig that `normlab train` with the same options would run, "
                                   "as JSON (defaults < preset < --init-from's model < TOML < --placement < --set < "
                                   "--steps, --data-dir, --diag-every, --init-from); --explain lists every option "
                                   "instead. model.vocab_size is set from the tokenizer when training starts.")
    add_config_args(p)
    add_run_options(p)
    p.add_argument("--explain", action="store_true", help="list every option with its type, default and meaning")
    p.set_defaults(func=_config)


def _presets(args: argparse.Namespace) -> int:
    from normlab.run.presets import PRESETS

    for name, fn in PRESETS.items():
        first = " ".join((fn.__doc__ or "").split())
        print(f"{name:<18} {first}")
    return 0


def _config(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.explain:
        from normlab.core.schema import explain
        from normlab.run.resolve import RunConfig

        print(f"{'option (--set KEY=VALUE)':<24} {'type':<28} {'default':<16} meaning")
        print(f"{'-' * 24} {'-' * 28} {'-' * 16} {'-' * 7}")
        for key, tp, default, help in explain(RunConfig):
            print(f"{key:<24} {tp:<28} {default!r:<16} {help}")
        from normlab.model.catalogue import LAYOUTS, PLACEMENTS

        print('\nplacement options, written beside the name: model.placement = {name = "admin", omega = "profile"}')
        for name, owner in [*PLACEMENTS.items(), *LAYOUTS.items()]:
            for key, tp, default, help in explain(owner.Options):
                print(f"{name + '.' + key:<24} {tp:<28} {default!r:<16} {help}")
        return 0
    import dataclasses

    from normlab.data.record import absolute
    from normlab.model.build import resolve_model
    from normlab.train.loggers import check_logger_names

    resolve_model(cfg.model)  # names and placement options: the first check `normlab train` makes
    check_logger_names(cfg.train.loggers)  # the config layer leaves logger names to training
    # the paths as a fresh run writes them into config.json (absolute, links resolved)
    print(dataclasses.replace(cfg, data=absolute(cfg.data)).to_json())
    return 0
