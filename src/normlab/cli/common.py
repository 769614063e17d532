"""Arguments shared by commands that build a RunConfig (train, config, study, ...)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the config pulls in torch; the parser must not (`normlab --help` stays instant)
    from normlab.run.resolve import RunConfig


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


# The flags that set one config field each: (flag, metavar, field, argparse type, help). They
# reach the config through resolve()'s last layer, so `normlab config` and `normlab train` agree.
RUN_OPTIONS = (
    ("--steps", "N", "train.steps", int, "total optimizer steps (= train.steps)"),
    ("--data-dir", "DIR", "data.data_dir", str, "directory holding tinyshakespeare.txt (= data.data_dir)"),
    ("--diag-every", "K", "train.diag_every", int, "in-training diagnostics every K steps (= train.diag_every)"),
    ("--init-from", "DIR", "train.init_from", str, "start from DIR's weights and model config (a `normlab import` "
                                                   "or save_model directory; = train.init_from); see docs/training.md"),
)


def add_run_options(p: argparse.ArgumentParser, helps: dict[str, str] | None = None) -> None:
    """The RUN_OPTIONS flags; ``helps`` replaces a flag's help text (train's --steps also extends)."""
    for flag, metavar, _, tp, help in RUN_OPTIONS:
        p.add_argument(flag, metavar=metavar, type=tp, help=(helps or {}).get(flag, help))


def run_options(args: argparse.Namespace) -> dict[str, object]:
    """{field: value} of the RUN_OPTIONS flags given on the command line (absent ones left out)."""
    values = {field: getattr(args, flag[2:].replace("-", "_"), None) for flag, _, field, _, _ in RUN_OPTIONS}
    return {field: v for field, v in values.items() if v is not None}


def config_from_args(args: argparse.Namespace) -> "RunConfig":
    """The RunConfig of a command line: defaults < preset < (init-from model) < TOML < --placement
    < --set < the RUN_OPTIONS flags (see normlab.run.resolve.resolve)."""
    from normlab.run.resolve import resolve

    return resolve(args.preset, args.config, args.placement, args.overrides, options=run_options(args))


def interrupted(command: str, what: str) -> int:
    """Ctrl-C or SIGTERM: one line saying where things stand (the command that resumes), exit
    status 128 + the signal (130, 143)."""
    from normlab.core.stopping import exit_status

    print(f"normlab {command}: interrupted; {what}", file=sys.stderr)
    return exit_status()
