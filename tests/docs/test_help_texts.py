"""Every option and positional of every subcommand says what it is in ``--help``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from normlab.cli import build_parser


def _walk(p: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _walk(sub, f"{path} {name}")
        elif not isinstance(a, argparse._HelpAction):
            yield path, a


def test_every_option_has_a_help_text() -> None:
    seen = list(_walk(build_parser(), "normlab"))
    commands = {path for path, _ in seen}
    # the walk reaches nested subcommands (a walk that stopped at the top would pass vacuously)
    assert {"normlab probe", "normlab analyze", "normlab study status", "normlab lr-sensitivity"} <= commands
    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in seen
               if not (a.help and a.help.strip()) and a.help is not argparse.SUPPRESS]
    assert not missing, "options without a help text: " + ", ".join(missing)


def test_demo_time_agrees_with_the_readme() -> None:
    import re
    from pathlib import Path

    parser = build_parser()
    demo = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["demo"]
    scale = next(a for a in demo._actions if "--scale" in a.option_strings).help
    said = re.search(r"about (\d+) min", scale)
    assert said, scale
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert f"`make demo` takes about {said[1]} minutes" in readme


def test_default_output_folders_are_ignored_by_git() -> None:
    from pathlib import Path

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    defaults = {str(a.default).split("/")[0] for p in subs.values() for a in p._actions
                if a.dest in ("out", "store") and isinstance(a.default, str)}
    assert {"probe", "claims", "studies"} <= defaults  # read from the parser, not restated
    # written by code rather than as an argparse default: train's runs/, inspect/<name>, report's compare/
    folders = defaults | {"runs", "inspect", "compare"}
    ignore = (Path(__file__).resolve().parents[2] / ".gitignore").read_text(encoding="utf-8").split()
    missing = [f for f in sorted(folders) if f"{f}/" not in ignore and f"/{f}/" not in ignore]
    assert not missing, f"default output folders missing from .gitignore: {missing}"



def test_import_and_export_help_name_every_family_they_convert() -> None:
    """The one-line help of `normlab import` and `normlab export` names each family the code
    converts (the families grew past the help once: Qwen3, OLMo-3 and Gemma were missing)."""
    import re

    from normlab.model.hf_export import FAMILIES

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    for command in ("import", "export"):
        # "OLMo-2/3" names OLMo-2 and OLMo-3, "Gemma 2/3" Gemma 2 and Gemma 3
        text = re.sub(r"(\w[\w ]*?)([- ])(\d)/(\d)", r"\1\2\3, \1\2\4", helps[command])
        missing = sorted(name for name in FAMILIES.values() if name not in text)
        assert not missing, f"normlab {command} --help omits {missing}: {helps[command]}"
