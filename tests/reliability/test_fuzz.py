"""Property-based bad input: configs, --set overrides, TOML files and study specs.

Every input yields a valid config/spec or a one-line UserError that names the field;
never another exception (a traceback), and through the CLI exit 2 with nothing created.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normlab.cli import main
from normlab.core.errors import ConfigError, UserError
from normlab.core.schema import dotted_keys
from normlab.run.resolve import RunConfig, resolve
from normlab.study.spec import StudySpec, spec_from_dict

KEYS = dotted_keys(RunConfig)
FEW = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
CLI = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))

keys = st.one_of(st.sampled_from(KEYS), st.text(string.ascii_lowercase + "._", min_size=1, max_size=20),
                 st.sampled_from(KEYS).map(lambda k: k + "x"), st.sampled_from(KEYS).map(lambda k: k.upper()))
texts = st.one_of(
    st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "true", "none", "[1, 2]", "{a = 1}", "pre", "post", "rmsnorm", "0", "-1", "1e309",
                     "nan", "'x'", "[", "\x00", "é", "1_000", "0x10"]),
    st.text(max_size=12))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**4, 10**4), st.floats(allow_nan=True),
                    st.text(max_size=8), st.lists(st.integers(0, 3), max_size=3))


def _one_line_naming(e: UserError, *names: str) -> None:
    msg = str(e)
    assert msg and "\n" not in msg, msg
    if isinstance(e, ConfigError):
        assert e.field in msg
    assert any(n in msg for n in names) or isinstance(e, ConfigError), msg


@FEW
@given(st.lists(st.tuples(keys, texts), min_size=1, max_size=3))
def test_overrides_give_a_config_or_a_one_line_error_naming_the_key(pairs):
    try:
        cfg = resolve(None, None, None, [f"{k}={v}" for k, v in pairs])
    except UserError as e:
        _one_line_naming(e, *(k for k, _ in pairs), *(k.split(".")[0] for k, _ in pairs))
    else:
        assert RunConfig.from_json(cfg.to_json()) == cfg  # valid configs round-trip


@FEW
@given(st.text(max_size=30))
def test_malformed_override_syntax(text):
    try:
        resolve(None, None, None, [text])
    except UserError as e:
        _one_line_naming(e, text.split("=")[0].strip(), "KEY=VALUE", "=")


@FEW
@given(st.binary(max_size=80) | st.dictionaries(keys, scalars, max_size=3).map(
    lambda d: "\n".join(f'"{k}" = {v!r}'.replace("None", '"none"').replace("True", "true")
                        .replace("False", "false") for k, v in d.items()).encode("utf-8", "surrogatepass")))
def test_toml_files_of_any_bytes(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("toml") / "c.toml"
    p.write_bytes(data)
    try:
        resolve(None, p, None, [])
    except UserError as e:
        assert "\n" not in str(e)


axes = st.dictionaries(keys, st.one_of(st.lists(scalars, max_size=3), scalars), max_size=3)


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
@FEW
@given(axes, st.one_of(st.lists(st.integers(-2, 3), max_size=3), scalars),
       st.sampled_from(["runs", "../up", "/abs", "a/../../b", "ok/dir", "", "."]),
       st.lists(st.sampled_from(KEYS[:4] + ["seed", "nope"]), max_size=2))
def test_study_specs_build_or_fail_in_one_line(axes_, seeds, runs_dir, nuisance):
    data = {"name": "fuzz", "axes": axes_, "seeds": seeds, "runs_dir": runs_dir, "nuisance": nuisance,
            "base": {"train": {"steps": 2}}}
    try:
        spec = spec_from_dict(data)
        trials = spec.trials()
    except UserError as e:
        assert str(e) and "\n" not in str(e)
    else:
        assert isinstance(spec, StudySpec) and trials
        assert not runs_dir.startswith(("/", "..")) and ".." not in runs_dir.split("/")


@pytest.mark.usefixtures("data_dir")  # trains on the corpus: skipped without it
@CLI
@given(st.lists(st.tuples(keys, texts), min_size=1, max_size=2))
def test_cli_train_exit_2_one_line_and_no_run_dir(tmp_path_factory, capsys, pairs):
    overrides = [f"{k}={v}" for k, v in pairs]
    try:
        resolve(None, None, None, overrides)
    except UserError:
        pass
    else:
        return  # a valid config would start training; validity is covered above
    out = tmp_path_factory.mktemp("cli") / "run"
    argv = ["train", "--quiet", "--out", str(out)]
    for o in overrides:
        argv += ["--set", o]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("normlab train: error: ")
    assert not out.exists()


@CLI
@given(axes)
def test_cli_study_bad_spec_exit_2_and_no_store(tmp_path_factory, capsys, axes_):
    try:
        spec_from_dict({"name": "fuzz", "axes": axes_}).trials()
    except UserError:
        pass
    else:
        return
    d = tmp_path_factory.mktemp("study")
    lines = ['name = "fuzz"', "[axes]"] + [f'"{k}" = {_toml(v)}' for k, v in axes_.items()]
    (d / "s.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code = main(["study", "run", str(d / "s.toml"), "--store", str(d / "store"), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert not (d / "store").exists()


def _toml(v) -> str:
    import json

    if v is None:
        return '"none"'
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and v != v:
        return "nan"
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return json.dumps(v)


@pytest.mark.parametrize("runs_dir", ["../escape", "/etc", "runs/../../x", "a/../.."])
def test_spec_paths_cannot_escape_the_store(runs_dir):
    with pytest.raises(ConfigError, match="inside the store"):
        StudySpec(name="p", runs_dir=runs_dir)


# -- study specs, field by field ------------------------------------------------------------
SPEC_TYPES = {"name": str, "description": str, "preset": (str, type(None)), "base": dict, "axes": dict,
              "zip": list, "seeds": list, "scientific": list, "nuisance": list, "retries": int, "trial": str,
              "runs_dir": str, "metric": str}
any_value = st.one_of(scalars, st.dictionaries(st.text(string.ascii_lowercase + ".", max_size=6), scalars,
                                               max_size=2), st.lists(st.text(max_size=4), max_size=2))


def _typos(key: str) -> st.SearchStrategy[str]:
    return st.sampled_from([key + "s", key[:-1], key.upper(), key[1:] + key[0], key.replace("_", "-")]).filter(
        lambda k: k not in SPEC_TYPES)


def _spec_data(key: str, value) -> dict:
    data = {"name": "fuzz", "base": {"train": {"steps": 1}}}
    data[key] = value
    return data


@FEW
@given(st.sampled_from(list(SPEC_TYPES)), any_value)
def test_every_study_field_with_any_value_builds_typed_or_fails_in_one_line(key, value):
    try:
        spec = spec_from_dict(_spec_data(key, value))
        spec.trials()
    except UserError as e:
        _one_line_naming(e, key)
        if isinstance(e, ConfigError):  # the field named is this one (or, in base/axes, a key inside it)
            assert e.field.split(".")[0].split("[")[0] in (key, "base", "axes", "model", "train", "optim",
                                                           "data", "seed", "name"), (key, str(e))
    else:
        assert isinstance(getattr(spec, key), SPEC_TYPES[key]), (key, value)


@FEW
@given(st.sampled_from(list(SPEC_TYPES)).flatmap(_typos), any_value)
def test_a_misspelt_study_key_is_refused_naming_it(key, value):
    with pytest.raises(ConfigError) as e:
        spec_from_dict(_spec_data(key, value))
    assert e.value.field == key and "not a study key" in str(e.value) and "\n" not in str(e.value)


# What a TOML file can say for a key (no null, tables are sections, nan/inf spelt differently).
toml_value = st.one_of(st.booleans(), st.integers(-10**4, 10**4), st.floats(allow_nan=False, allow_infinity=False),
                       st.text(string.printable, max_size=8), st.lists(st.integers(0, 3), max_size=3),
                       st.lists(st.text(string.ascii_letters, max_size=4), max_size=2))


def _wrong_for(key: str) -> st.SearchStrategy:
    return st.tuples(st.just(key), toml_value.filter(lambda v: not isinstance(v, SPEC_TYPES[key])))


@CLI
@given(st.one_of(st.sampled_from([k for k in SPEC_TYPES if k not in ("base", "axes")]).flatmap(_wrong_for),
                 st.tuples(st.sampled_from(list(SPEC_TYPES)).flatmap(_typos), toml_value)))
def test_cli_study_field_of_the_wrong_type_exit_2_one_line_no_store(tmp_path_factory, capsys, pair):
    key, value = pair
    try:
        spec = spec_from_dict(_spec_data(key, value))
        spec.trials()
    except UserError:
        pass
    else:  # a wrongly typed value may only pass where it is the declared type after all (never)
        assert isinstance(getattr(spec, key), SPEC_TYPES[key]), (key, value)
        return
    d = tmp_path_factory.mktemp("study")
    lines = [f"{key} = {_toml(value)}"] + (['name = "fuzz"'] if key != "name" else [])
    (d / "s.toml").write_text("\n".join(lines) + "\n[base.train]\nsteps = 1\n", encoding="utf-8")
    code = main(["study", "run", str(d / "s.toml"), "--store", str(d / "store")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("normlab study: error: "), err
    assert not (d / "store").exists()
