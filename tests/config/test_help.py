"""`--help` answers what a new user asks: what a command does, which names an option takes,
what the defaults are; `config --explain` says what its columns are."""

from __future__ import annotations

import pytest

from normlab.cli import build_parser, main


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("cmd,needle", [("presets", "named starting configs"), ("norms", "model.norm=NAME"),
                                        ("inits", "model.init=NAME"), ("demo", "Pre-LN"),
                                        ("placements", "formula and source")])
def test_listing_commands_describe_themselves(capsys, cmd, needle):
    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[cmd]
    assert sub.description and needle in sub.description
    assert needle in " ".join(_help(capsys, cmd).split())


@pytest.mark.parametrize("cmd", ["train", "config"])
def test_placement_lists_its_choices(capsys, cmd):
    text = " ".join(_help(capsys, cmd).split())
    assert all(name in text for name in ("post,", "pre,", "sandwich", "deepnorm", "mix"))


def test_sample_help_shows_every_default(capsys):
    text = " ".join(_help(capsys, "sample").split())
    for default in ("(default 200)", "(default 0.8)", "(default 0)", "(default best", "(default cpu)",
                    "(default: a newline)"):
        assert default in text, default


def test_config_explain_has_a_header(capsys):
    assert main(["config", "--explain"]) == 0
    first, rule, row = capsys.readouterr().out.splitlines()[:3]
    assert first.split()[:2] == ["option", "(--set"] and "type" in first and "default" in first
    assert set(rule.replace(" ", "")) == {"-"} and row.startswith("model.")
