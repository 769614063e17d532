"""Plugins (normlab.plugins entry points): loaded at the first lookup, all or nothing, and a
broken one is one line naming it. The installed-package test is in test_plugin_package.py."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint

import pytest

from normlab.core import plugins
from normlab.core.errors import UserError
from normlab.core.registry import Registry


@pytest.fixture
def installed(monkeypatch, tmp_path):
    """install(source, name=...): a plugin module on sys.path, found as an entry point."""
    eps: list[EntryPoint] = []
    monkeypatch.setattr(plugins, "discover", lambda: list(eps))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(plugins.OFF_ENV, raising=False)
    plugins.forget()

    def install(source: str, name: str = "demo") -> None:
        module = f"plug_{name}"
        (tmp_path / f"{module}.py").write_text(source)
        sys.modules.pop(module, None)
        eps.append(EntryPoint(name, f"{module}:register", plugins.GROUP))
        plugins.forget()

    yield install
    plugins.forget()


def _registry() -> Registry[object]:
    reg: Registry[object] = Registry("placement", "model.placement")
    reg.add("pre", int)
    reg.fill_later(plugins.filler("placements", int))
    return reg


def test_entries_join_at_the_first_lookup_not_at_import(installed) -> None:
    installed("import sys\nsys.modules[__name__].loaded = True\n"
              "class Mine(int): pass\ndef register(lab):\n    lab.placements.add('mine', Mine)\n")
    reg = _registry()
    assert "plug_demo" not in sys.modules  # making the catalogue imported nothing
    assert reg.names() == ["pre", "mine"] and reg.get("mine").__name__ == "Mine"
    assert sys.modules["plug_demo"].loaded


@pytest.mark.parametrize("source, message", [
    ("raise ImportError('No module named foo')\n", r"^plugin 'demo' \(plug_demo:register\): ImportError: No module named foo"),
    ("def register(lab):\n    raise ValueError('bad\\nthing')\n", r"^plugin 'demo' \(plug_demo:register\): ValueError: bad thing"),
    ("def register(lab):\n    lab.schedules.add('x', 1)\n", r"^plugin 'demo' .*AttributeError: .*schedules"),
    ("def register(lab):\n    lab.placements.add('pre', int)\n", r"^plugin 'demo' .*: placement 'pre' is already registered"),
    ("def register(lab):\n    lab.placements.add('s', 'str')\n", r"^plugin 'demo' .*: placement 's' is 'str', not a int"),
])
def test_a_broken_plugin_is_one_line_naming_it(installed, source, message) -> None:
    installed(source)
    reg = _registry()
    with pytest.raises(UserError, match=message) as err:
        reg.names()
    assert "\n" not in str(err.value) and "NORMLAB_NO_PLUGINS=1" in str(err.value)
    with pytest.raises(UserError):  # still failing next time, and nothing was half added
        reg.get("pre")
    assert reg._items == {"pre": int}


def test_two_plugins_may_not_claim_one_name(installed) -> None:
    installed("def register(lab):\n    lab.placements.add('x', bool)\n", name="a")
    installed("def register(lab):\n    lab.placements.add('x', bool)\n", name="b")
    with pytest.raises(UserError, match=r"^plugin 'b' .*'x' is already registered"):
        _registry().names()


def test_register_may_not_look_names_up(installed) -> None:
    installed("def register(lab):\n    from normlab.core import plugins\n    plugins.added('norms')\n")
    reg = _registry()
    with pytest.raises(UserError, match="register.. looked up a registry"):
        reg.names()


def test_a_help_text_meets_a_broken_plugin_as_one_line(installed, monkeypatch, capsys) -> None:
    """`normlab train --help` lists placement names: the plugin's error is one line there too."""
    from normlab.cli import main
    from normlab.model.catalogue import PLACEMENTS

    installed("def register(lab):\n    raise RuntimeError('broken')\n")
    monkeypatch.setattr(PLACEMENTS, "_later", plugins.filler("placements"))  # as if never looked up
    assert main(["train", "--help"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("normlab: error: plugin 'demo' (plug_demo:register): RuntimeError: broken") and err.count("\n") == 1


def test_plugins_can_be_switched_off(installed, monkeypatch) -> None:
    installed("def register(lab):\n    raise RuntimeError('broken')\n")
    monkeypatch.setenv(plugins.OFF_ENV, "1")
    assert _registry().names() == ["pre"]


def test_every_kind_reaches_its_catalogue() -> None:
    """Each shelf a plugin can fill is handed to one registry (a kind nobody reads is a defect)."""
    from pathlib import Path

    import normlab

    src = Path(normlab.__file__).parent
    text = "".join(p.read_text(encoding="utf-8") for p in src.rglob("*.py"))
    assert set(vars(plugins.Lab())) == set(plugins.KINDS)
    for kind in plugins.KINDS:
        assert text.count(f'plugins.filler("{kind}"') == 1, kind
