"""The ``normlab`` command line. Subcommands are registered in ``COMMANDS`` (one place).

Each entry is a module exposing ``register(subparsers)``, which adds its parser and sets
``func`` (a callable taking the parsed args and returning an exit status). They are imported
with this package (plain imports, so the import graph and import-linter see every command), and
heavy imports stay inside ``func``.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from normlab import __version__
from normlab.cli import (
    analyze_cmd,
    bench_cmd,
    campaign_cmd,
    claims_cmd,
    config_cmd,
    data_cmd,
    demo_cmd,
    export_cmd,
    inspect_cmd,
    model_cmd,
    probe_cmd,
    report_cmd,
    study_cmd,
    train_cmd,
)
from normlab.cli.common import interrupted

# one module per command group, in help order; each module's register(subparsers) adds its commands
COMMANDS = (
    demo_cmd,      # demo (the README's main job)
    config_cmd,    # presets, config
    train_cmd,     # train, sample
    data_cmd,      # data prepare (token shards of corpora bigger than memory)
    model_cmd,     # placements, norms, inits
    report_cmd,    # report
    claims_cmd,    # claims (the evidence check)
    campaign_cmd,  # campaign (registered confirmatory stages, resumable)
    probe_cmd,     # probe (diagnostics at init)
    study_cmd,     # study run, status, presets
    analyze_cmd,   # analyze, lr-sensitivity
    bench_cmd,     # bench (throughput vs peers)
    inspect_cmd,   # inspect (HF or lab model statistics), import (HF -> TransformerLM)
    export_cmd,    # export (TransformerLM -> HF checkpoint)
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, status 2, like every user error
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="normlab", description="A laboratory for normalization placement "
                     "in Transformers: train, probe, compare, report.")
    parser.add_argument("--version", action="version", version=f"normlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from normlab.core.errors import UserError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UserError as e:  # `--help` texts list registry names: a broken plugin fails there too
        print(f"normlab: error: {e}", file=sys.stderr)
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    from normlab.core.log import setup
    from normlab.core.stopping import forget

    forget()  # a signal of an earlier command run in this process is not this one's
    setup(args.command)  # status on stderr, stdout is the output (a command's --quiet silences its progress only)
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"normlab {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `normlab ... | head` closed our stdout: not an error. Point stdout at devnull so
        # the interpreter's final flush does not raise again.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        from normlab.core.fscheck import refusal

        line = refusal(e)  # the file system refused (read-only, full, permissions): one line
        if line is None:
            raise  # anything else is a bug: keep the traceback
        print(f"normlab {args.command}: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return interrupted(args.command, "rerun the same command")
