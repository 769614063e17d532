"""Every path and store argument of every command, given the wrong thing: one line, exit 2, nothing changed.

The arguments are read off the CLI's own parser, so a new command (or a new option) that
takes a path fails :func:`test_every_path_argument_has_cases` until it gets its cases
here. Each argument is tried with the wrong kind of thing (an existing file where a
directory goes, or the reverse), a damaged store or checkpoint where it reads one, and a
directory on a read-only file system (a real one: a read-only bind mount in a private
mount namespace, since root ignores file modes). Readers (sample, lr-sensitivity) must
work on a read-only run. Every file under the test's directory is hashed before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .cli_cases import cli_arguments, digest, run_case
from .conftest import tiny_cfg

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
pytestmark = pytest.mark.xdist_group("reliability-paths")  # one worker builds the module's world
REQUIRE = "NORMLAB_REQUIRE_NETNS"  # CI: namespaces must work there, so the read-only cases never skip

# Cheap settings, in case a check fails to fire and the command starts its work.
TRAIN = ["--quiet", "--set", "train.steps=2", "--set", "model.n_layer=1", "--set", "model.d_model=16",
         "--set", "model.n_head=1", "--set", "model.context=8", "--set", "train.batch_size=2",
         "--set", "train.eval_batches=1"]
PROBE = ["--placements", "pre", "--depths", "1", "--seeds", "1", "--d-model", "16", "--n-head", "1",
         "--context", "8", "--batch-size", "2", "--quiet"]
BENCH = ["--sizes", "tiny", "--peers", "normlab", "--repeats", "1", "--window-steps", "1", "--warmup", "0"]

# {placeholders}: run, part (a run without summary.json), store, spec, new (a path that does not
# exist), bad (the wrong thing itself). Kinds: "wrong" (a file for a directory, a directory for
# a file), "damaged" (a damaged store or checkpoint), "ro" (a path on a read-only mount).
# The last element is the expected exit status (readers on a read-only run succeed).
CASES: dict[tuple[str, str], list[tuple[str, list[str], int]]] = {
    ("demo", "--store"): [("wrong", ["demo", "--store", "{bad}", "--scale", "smoke"], 2),
                          ("ro", ["demo", "--store", "{ro}/new", "--scale", "smoke"], 2),
                          ("damaged", ["demo", "--store", "{demo_store}", "--scale", "smoke"], 2)],
    ("demo", "--data-dir"): [("wrong", ["demo", "--store", "{new}", "--scale", "smoke", "--data-dir", "{bad}"], 2)],
    ("config", "--config"): [("wrong", ["config", "--config", "{dir}"], 2)],
    ("config", "--init-from"): [("wrong", ["config", "--init-from", "{bad}"], 2)],
    # config prints the config and reads no corpus: the data dir is checked by train (below)
    ("config", "--data-dir"): [("wrong", ["config", "--data-dir", "{bad}"], 0)],
    ("train", "--config"): [("wrong", ["train", "--out", "{new}", "--config", "{dir}", *TRAIN], 2)],
    ("train", "--out"): [("wrong", ["train", "--out", "{bad}", *TRAIN], 2),
                         ("ro", ["train", "--out", "{ro}/new", *TRAIN], 2)],
    ("train", "--resume"): [("wrong", ["train", "--quiet", "--resume", "{bad}"], 2),
                            ("ro", ["train", "--quiet", "--resume", "{ro}/part"], 2)],
    ("train", "--data-dir"): [("wrong", ["train", "--out", "{new}", "--data-dir", "{bad}", *TRAIN], 2)],
    ("train", "--init-from"): [("wrong", ["train", "--out", "{new}", "--init-from", "{bad}", *TRAIN], 2)],
    ("data prepare", "--out"): [("wrong", ["data", "prepare", "tinyshakespeare", "--out", "{bad}", "--quiet"], 2),
                                ("ro", ["data", "prepare", "tinyshakespeare", "--out", "{ro}/new", "--quiet"], 2)],
    ("sample", "run"): [("wrong", ["sample", "{bad}", "--tokens", "2"], 2),
                        ("damaged", ["sample", "{damaged_run}", "--tokens", "2"], 2),
                        ("ro", ["sample", "{ro}/run", "--tokens", "2"], 0)],
    ("report", "paths"): [("wrong", ["report", "--quiet", "{bad}"], 2),
                          ("damaged", ["report", "--quiet", "{damaged_store}"], 2),
                          ("ro", ["report", "--quiet", "{ro}/run"], 2),
                          ("ro", ["report", "--quiet", "{ro}/run", "--out", "{ro}/../page"], 0)],
    ("report", "--data-dir"): [("wrong", ["report", "--quiet", "{run}", "--out", "{new}", "--data-dir", "{bad}"], 2)],
    ("report", "--out"): [("wrong", ["report", "--quiet", "{run}", "--out", "{bad}"], 2),
                          ("ro", ["report", "--quiet", "{run}", "--out", "{ro}/new"], 2)],
    ("claims", "--registration"): [("wrong", ["claims", "--quick", "--seeds", "3", "--out", "{new}",
                                              "--registration", "{bad}"], 2)],
    ("claims", "--seen"): [("wrong", ["claims", "--quick", "--seeds", "3", "--out", "{new}", "--seen", "{bad}"], 2)],
    ("campaign", "--out"): [("wrong", ["campaign", "run", "{plan}", "--out", "{bad}"], 2),
                            ("ro", ["campaign", "run", "{plan}", "--out", "{ro}/new"], 2)],
    ("claims", "--out"): [("wrong", ["claims", "--quick", "--seeds", "3", "--out", "{bad}"], 2),
                          ("ro", ["claims", "--quick", "--seeds", "3", "--out", "{ro}/new"], 2)],
    ("probe", "--data-dir"): [("wrong", ["probe", "--out", "{new}", "--data-dir", "{bad}", *PROBE], 2)],
    ("probe", "--out"): [("wrong", ["probe", "--out", "{bad}", "--data", "random", *PROBE], 2),
                         ("ro", ["probe", "--out", "{ro}/new", "--data", "random", *PROBE], 2)],
    ("study run", "spec"): [("wrong", ["study", "run", "{dir}", "--store", "{new}"], 2)],
    ("study run", "--store"): [("wrong", ["study", "run", "{spec}", "--store", "{bad}"], 2),
                               ("damaged", ["study", "run", "{spec}", "--store", "{damaged_store}"], 2),
                               ("damaged", ["study", "run", "--store", "{damaged_store}"], 2),
                               ("ro", ["study", "run", "{spec}", "--store", "{ro}/new"], 2),
                               ("ro", ["study", "run", "--store", "{ro}/store"], 2)],
    ("study run", "--slurm-config"): [
        ("wrong", ["study", "run", "{spec}", "--store", "{new}", "--executor", "slurm", "--slurm-config", "{dir}"], 2),
        ("missing", ["study", "run", "{spec}", "--store", "{new}", "--executor", "slurm", "--slurm-config",
                     "{new}/slurm.toml"], 2)],
    ("study status", "store"): [("wrong", ["study", "status", "{bad}"], 2),
                                ("damaged", ["study", "status", "{damaged_store}"], 2),
                                ("ro", ["study", "status", "{ro}/store"], 0)],
    ("study export", "store"): [("wrong", ["study", "export", "{bad}"], 2),
                                ("damaged", ["study", "export", "{damaged_store}"], 2),
                                ("ro", ["study", "export", "{ro}/store"], 2),  # STORE/export: not writable
                                ("ro", ["study", "export", "{ro}/store", "--out", "{ro}/../tables"], 0)],
    ("study export", "--out"): [("wrong", ["study", "export", "{store}", "--out", "{bad}"], 2),
                                ("ro", ["study", "export", "{store}", "--out", "{ro}/new"], 2)],
    ("analyze", "run"): [("wrong", ["analyze", "{bad}"], 2), ("damaged", ["analyze", "{damaged_run}"], 2),
                         ("ro", ["analyze", "{ro}/run"], 2)],
    ("analyze", "--data-dir"): [("wrong", ["analyze", "{run}", "--out", "{new}", "--data-dir", "{bad}"], 2)],
    ("analyze", "--out"): [("wrong", ["analyze", "{run}", "--out", "{bad}"], 2),
                           ("ro", ["analyze", "{run}", "--out", "{ro}/new"], 2)],
    ("lr-sensitivity", "runs"): [("wrong", ["lr-sensitivity", "{bad}"], 2),
                                 ("damaged", ["lr-sensitivity", "{damaged_run}"], 2),
                                 ("ro", ["lr-sensitivity", "{ro}/run", "{ro}/run_lr"], 0)],
    ("bench", "--out"): [("wrong", ["bench", *BENCH, "--out", "{dir}"], 2),
                         ("ro", ["bench", *BENCH, "--out", "{ro}/b.json"], 2)],
    ("inspect", "model"): [("wrong", ["inspect", "{bad}", "--out", "{new}", "--quiet"], 2)],
    ("inspect", "--text"): [("wrong", ["inspect", "{run}", "--out", "{new}", "--text", "{dir}", "--quiet"], 2)],
    ("inspect", "--out"): [("wrong", ["inspect", "{run}", "--out", "{bad}", "--quiet"], 2),
                           ("ro", ["inspect", "{run}", "--out", "{ro}/new", "--quiet"], 2)],
    ("inspect", "--data-dir"): [("wrong", ["inspect", "{run}", "--out", "{new}", "--data-dir", "{bad}",
                                           "--quiet"], 2)],
    ("import", "model"): [("wrong", ["import", "{bad}", "{new}"], 2)],
    ("import", "dir"): [("wrong", ["import", "{run}", "{bad}"], 2), ("ro", ["import", "{run}", "{ro}/new"], 2)],
    ("export", "run"): [("wrong", ["export", "{bad}", "{new}"], 2), ("damaged", ["export", "{damaged_run}", "{new}"], 2),
                        ("ro", ["export", "{ro}/run", "{ro}/../exported"], 0)],
    ("export", "dir"): [("wrong", ["export", "{run}", "{bad}"], 2), ("ro", ["export", "{run}", "{ro}/new"], 2)],
}
OUTPUTS = {k for k in CASES if k[1] in ("--out", "--store") or k in (("import", "dir"), ("export", "dir"))}
STORES = {k for k in CASES if "store" in k[1]}


def _pathlike(a: argparse.Action) -> bool:
    meta = str(a.metavar or "").upper()
    return (a.type is Path or meta in ("DIR", "RUN", "PATH", "FILE", "FILE.TOML", "SPEC_OR_PRESET", "MODEL", "STORE")
            or a.dest in ("out", "output", "store", "data_dir") or a.dest.endswith(("_dir", "_file", "_path")))


def path_arguments() -> set[tuple[str, str]]:
    """(command, option or positional) for every argument of the CLI that takes a path."""
    return {(" ".join(prefix), a.option_strings[0] if a.option_strings else a.dest)
            for prefix, a in cli_arguments() if _pathlike(a)}


def test_every_path_argument_has_cases():
    found = path_arguments()
    assert found - set(CASES) == set(), "path arguments without cases here: add them to CASES"
    assert set(CASES) - found == set(), "CASES names arguments the CLI no longer has"
    for key in OUTPUTS:
        assert {"wrong", "ro"} <= {kind for kind, _, _ in CASES[key]}, key
    for key in STORES - {("demo", "--store")}:
        assert "damaged" in {kind for kind, _, _ in CASES[key]}, key


# -- the world the cases run against ------------------------------------------------------------
@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = os.environ.get("NORMLAB_DATA_DIR")
    if not d or not (Path(d) / "tinyshakespeare.txt").exists():
        pytest.skip("Tiny Shakespeare not available (set NORMLAB_DATA_DIR)")
    from normlab.study.presets import study_preset
    from normlab.study.runner import open_store
    from normlab.study.spec import load_spec
    from normlab.train import run_training

    root = tmp_path_factory.mktemp("paths")
    w = {"root": root, "run": root / "run", "spec": root / "s.toml", "store": root / "store", "dir": root / "adir",
         "bad": root / "afile", "new": root / "nothing" / "here"}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NORMLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
        run_training(tiny_cfg("train.steps=10", "train.eval_every=5"), w["run"], quiet=True)
        # a second learning rate: lr-sensitivity needs runs at two or more
        run_training(tiny_cfg("train.steps=10", "train.eval_every=5", "optim.lr=3e-3"), root / "run_lr", quiet=True)
    w["dir"].mkdir()
    w["bad"].write_bytes(b"precious\n")
    w["spec"].write_text('name = "p"\nseeds = [0]\n[base.train]\nsteps = 2\n[axes]\n"model.placement" = ["pre"]\n')
    w["plan"] = root / "plan.toml"  # a campaign plan whose stage is not registered: --out is checked first
    w["plan"].write_text('name = "c"\nfirst_seed = 9000\n[[stage]]\nname = "a"\nregistration = "r.json"\n'
                         'claims = ["deepnorm-depth"]\n')
    open_store(load_spec(w["spec"]), w["store"]).close()
    # damaged copies: the best checkpoint's weights truncated, the database cut in half
    w["damaged_run"] = root / "damaged_run"
    shutil.copytree(w["run"], w["damaged_run"])
    f = w["damaged_run"] / "checkpoints" / "best" / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    (w["damaged_run"] / "summary.json").write_text('{"status": "compl')
    w["damaged_store"] = root / "damaged_store"
    shutil.copytree(w["store"], w["damaged_store"])
    _damage_db(w["damaged_store"] / "study.sqlite", "half")
    w["demo_store"] = root / "demo_store"
    open_store(study_preset("pre-vs-post", "smoke"), w["demo_store"]).close()
    _damage_db(w["demo_store"] / "study.sqlite", "garbage")
    return w


def _damage_db(db: Path, how: str) -> None:
    if how == "foreign":  # a sound SQLite file, but not a store's
        import sqlite3

        db.unlink()
        with contextlib.closing(sqlite3.connect(db)) as conn:
            conn.execute("CREATE TABLE notes (x)")
            conn.commit()
        return
    data = db.read_bytes()
    db.write_bytes({"half": data[: len(data) // 2], "garbage": b"not a database " * 64, "empty": b"",
                    "header": b"\0" * 100 + data[100:]}[how])


def _argv(template: list[str], w: dict[str, Path], ro: Path | None = None) -> list[str]:
    names = {k: str(v) for k, v in w.items()} | {"ro": str(ro)}
    return [t.format(**names) for t in template]


def _check(case: dict, key: tuple[str, str], kind: str, want: int) -> None:
    what = f"{key} {kind}: {case['argv']}"
    assert case["traceback"] is None, f"{what}: a traceback\n{case['traceback']}"
    assert case["rc"] == want, f"{what}: exit {case['rc']}, stderr:\n{case['err']}"
    if want == 2:
        lines = case["err"].strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"normlab {key[0].split()[0]}: error: "), f"{what}:\n{case['err']}"
        assert not any(w in lines[0] for w in ("Traceback", "Errno")), f"{what}: {lines[0]}"


WRONG_AND_DAMAGED = [(key, kind, argv, want) for key, cases in CASES.items() for kind, argv, want in cases
                     if kind != "ro"]
# an output under an existing file (a part of the path is a file): the same one line
WRONG_AND_DAMAGED += [(key, "under-a-file", [a.replace("{bad}", "{bad}/sub") for a in argv], want)
                      for key, cases in CASES.items() if key in OUTPUTS for kind, argv, want in cases
                      if kind == "wrong" and "{bad}" in argv]


@pytest.mark.parametrize("key, kind, template, want", WRONG_AND_DAMAGED,
                         ids=[f"{k[0]}:{k[1]}:{kind}" for k, kind, _, _ in WRONG_AND_DAMAGED])
def test_wrong_or_damaged_path_is_one_line_exit_2_and_changes_nothing(world, key, kind, template, want, monkeypatch):
    monkeypatch.chdir(world["root"])  # default outputs (./probe, ./runs) land in the hashed tree too
    before = digest(world["root"])
    case = run_case(_argv(template, world))
    _check(case, key, kind, want)
    if kind == "damaged":
        assert "damaged" in case["err"], case["err"]
    assert digest(world["root"]) == before, f"{case['argv']} changed files"
    assert not world["new"].parent.exists(), f"{case['argv']} created {world['new'].parent}"


def test_only_file_system_refusals_become_one_line():
    import errno

    from normlab.core.fscheck import refusal

    line = refusal(OSError(errno.EROFS, os.strerror(errno.EROFS), "/x/y"))
    assert line and line.startswith("/x/y: ") and "\n" not in line
    assert refusal(OSError(errno.ENOENT, "No such file", "/x")) is None  # a missing file here is a bug: traceback
    assert refusal(OSError("no errno")) is None


def test_damaged_best_names_itself_and_the_other_checkpoint(world):
    for cmd in (["sample", str(world["damaged_run"]), "--tokens", "2"], ["analyze", str(world["damaged_run"])]):
        err = run_case(cmd)["err"]
        assert "checkpoints/best" in err and "damaged" in err and "--checkpoint latest" in err, err
    assert run_case(["sample", str(world["damaged_run"]), "--tokens", "2", "--checkpoint", "latest"])["rc"] == 0


@pytest.mark.parametrize("how", ["empty", "header", "garbage", "foreign"])
def test_every_kind_of_database_damage_is_reported_not_replaced(world, tmp_path, how):
    store = tmp_path / "store"
    shutil.copytree(world["store"], store)
    _damage_db(store / "study.sqlite", how)
    before = digest(store)
    for argv in (["study", "status", str(store)], ["study", "run", str(world["spec"]), "--store", str(store)]):
        case = run_case(argv)
        _check(case, ("study status", "store"), how, 2)
        assert "damaged" in case["err"] and "study.sqlite" in case["err"], case["err"]
    assert digest(store) == before


def test_a_store_path_that_is_a_file_does_not_advise_the_failing_command(world):
    err = run_case(["study", "status", str(world["bad"])])["err"]
    assert "is a file" in err and "study run" not in err, err


# -- read-only: a real read-only mount, in a subprocess ------------------------------------------
def _ro_unavailable() -> str | None:
    if not sys.platform.startswith("linux") or not shutil.which("unshare") or not shutil.which("mount"):
        return "read-only cases need Linux with unshare and mount (util-linux)"
    r = subprocess.run([*_unshare(), "sh", "-c", "mount --bind / / 2>&1 || exit 1"], capture_output=True, text=True,
                       timeout=60)
    return None if r.returncode == 0 else f"cannot make a private read-only mount: {r.stdout.strip()[-300:]}"


def _unshare() -> list[str]:
    return ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--mount", "--map-root-user"]


@pytest.mark.slow
def test_read_only_directories_are_one_line_exit_2_and_readers_still_work(world, tmp_path):
    reason = _ro_unavailable()
    if reason:
        if os.environ.get(REQUIRE):
            pytest.fail(reason)
        pytest.skip(reason)
    ro = tmp_path / "ro"
    shutil.copytree(world["run"], ro / "run")
    shutil.copytree(world["root"] / "run_lr", ro / "run_lr")
    shutil.copytree(world["run"], ro / "part")
    (ro / "part" / "summary.json").unlink()  # an unfinished run: --resume would write to it
    shutil.copytree(world["store"], ro / "store")
    cases = [(key, kind, want, _argv(argv, world, ro)) for key, cs in CASES.items() for kind, argv, want in cs
             if kind == "ro"]
    (tmp_path / "cases.json").write_text(json.dumps([argv for *_, argv in cases]))
    before = digest(ro)
    script = (f'mount --bind "{ro}" "{ro}" && mount -o remount,bind,ro "{ro}" && '
              f'cd "{tmp_path}" && exec "$0" "$@"')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "NORMLAB_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*_unshare(), "sh", "-c", script, sys.executable, str(HERE / "cli_cases.py"),
                           str(tmp_path / "cases.json"), str(tmp_path / "results.json")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    for (key, kind, want, _), case in zip(cases, results):
        _check(case, key, kind, want)
        if want == 2:
            assert "read-only" in case["err"] and str(ro) in case["err"], case["err"]
    assert digest(ro) == before
    assert not (tmp_path / "runs").exists() and not (tmp_path / "probe").exists()
