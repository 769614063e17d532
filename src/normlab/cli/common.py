"""Arguments shared by commands that build a RunConfig (train, config, study, ...)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config pulls in torch; the parser must not (`normlab --help` stays instant)
    from normlab.config import RunConfig


class _PlacementArg(argparse.Action):
    """Stores --placement; its help lists the registered names, looked up only when --help is
    printed (the registry imports torch, which parsing must not)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)

    @property
    def help(self) -> str:
        from normlab.model.catalogue import LAYOUTS, PLACEMENTS

        names = ", ".join(PLACEMENTS.names() + LAYOUTS.names())
        return f"shortcut for --set model.placement=NAME; one of {names} (see `normlab placements`)"

    @help.setter
    def help(self, value: object) -> None:
        pass


def add_config_args(p: argparse.ArgumentParser) -> None:
    """--config, --preset, --placement, --set: the way every command names a run."""
    p.add_argument("--config", metavar="FILE.toml", help="TOML file with [model], [optim], ... tables")
    p.add_argument("--preset", metavar="NAME", help="start from a preset (see `normlab presets`)")
    p.add_argument("--placement", metavar="NAME", action=_PlacementArg)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one option, e.g. --set model.n_layer=12 (repeatable)")


def config_from_args(args: argparse.Namespace) -> "RunConfig":
    from normlab.config import resolve

    return resolve(args.preset, args.config, args.placement, args.overrides)
