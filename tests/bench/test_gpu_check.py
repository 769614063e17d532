"""benchmarks/gpu_check.py: the dry run (CPU, tiny sizes) goes through every part the GPU run
does, so the script cannot rot on machines without a GPU; the CUDA tests skip, saying why."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
SCRIPT = BENCH / "gpu_check.py"


def _load(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod  # dataclasses look their module up there
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NORMLAB_TEST_DEVICE"}
    env["NORMLAB_CACHE_DIR"] = str(tmp_path / "cache")  # token caches never go to ~/.cache
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    return env


@pytest.mark.slow
def test_dry_run_goes_through_every_part(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--out", str(out), "--work", str(tmp_path / "w")],
                          capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    status = {p["name"]: p["status"] for p in report["parts"]}
    parts = _load("_gpu_parts").PARTS
    assert list(status) == list(parts)
    # Every part ran to its end; the claims part may stop at its short dry-run cap (the whole
    # command takes minutes on a CPU), after starting without an error.
    assert {k: v for k, v in status.items() if k != "claims-quick"} == {k: "done" for k in parts if k != "claims-quick"}
    assert status["claims-quick"] in ("done", "capped"), status
    rows = {r["target"]: r for r in report["rows"]}
    assert all(set(r) == {"target", "measured", "goal", "verdict"} for r in report["rows"])
    assert not [r for r in report["rows"] if r["verdict"] == "error"]
    # The cuda tests ran on the CPU (not skipped) and passed.
    tests = [r for t, r in rows.items() if t.startswith("cuda test ")]
    assert len(tests) >= 4 and all(r["verdict"] == "met" for r in tests), tests
    # Both arms measured normlab and its peers at both shapes; the ratio rows have verdicts.
    for size in ("baby", "gpt2-small"):
        for peer in ("normlab-fused", "normlab-fused+compile", "xt-pre", "hf-gpt2+compile"):
            assert any(t.startswith(size) and t.endswith(f": {peer} bf16") for t in rows), (size, peer)
        for arm in ("eager", "compiled"):
            ratio = next(r for t, r in rows.items() if t.startswith(size) and t.endswith(f"fastest peer, {arm}"))
            assert ratio["verdict"] in ("met", "MISSED"), ratio
    assert any(t.startswith("trial batching loss curves") for t in rows)
    trial = next(r for t, r in rows.items() if t.startswith("pre-vs-post --scale smoke"))
    assert trial["verdict"] == "met" and "4 steps" in trial["measured"], trial
    packed = next(r for t, r in rows.items() if t.startswith("packed study"))
    assert "trials/h packed vs" in packed["measured"] and "packs" in packed["measured"], packed
    assert "target" in proc.stdout and "whole check" in proc.stdout  # the table is printed


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: the tests would run")
def test_cuda_tests_skip_saying_no_cuda_device(tmp_path: Path) -> None:
    xml = tmp_path / "t.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests/cuda", "-m", "cuda", "-q", "-p", "no:cacheprovider",
                           f"--junitxml={xml}"], capture_output=True, text=True, env=_env(tmp_path), cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    parts = _load("_gpu_parts")
    groups = parts.junit_groups(xml)
    assert len(groups) >= 4
    for cases in groups.values():
        measured, _, ok = parts.summarise(cases)
        assert ok is None and all(c[1] == "skipped" and "no CUDA device" in c[2] for c in cases), measured


def test_without_cuda_the_gpu_run_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    gpu_check = _load("gpu_check")
    assert gpu_check.main(["--only", "nope", "--out", str(tmp_path / "a.json")]) == 2
    assert gpu_check.main(["--cap", "claims-quick=soon", "--out", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "unknown part nope; parts: cuda-tests," in err[0] and "PART=SECONDS" in err[1]
    if not torch.cuda.is_available():
        assert gpu_check.main(["--out", str(tmp_path / "a.json")]) == 2
        assert capsys.readouterr().err.strip().startswith("gpu_check: error: no CUDA device here")
    assert not (tmp_path / "a.json").exists()


def test_helpers_read_what_the_tools_write(tmp_path: Path) -> None:
    parts = _load("_gpu_parts")
    from normlab.run.resolve import RunConfig, resolve

    cfg = resolve("baby-gpt", None, None, ["model.placement=[\"post\", \"pre\", \"post\", \"pre\", \"post\", \"pre\"]",
                                           "optim.z_loss=1e-4", "train.loggers=[\"tensorboard\"]"])
    data = json.loads(cfg.to_json())
    assert RunConfig.from_dict(tomllib.loads(parts.to_toml(data))).to_json() == cfg.to_json()
    (tmp_path / "claims.json").write_text(json.dumps({"probe": {}, "claims": [
        {"id": "a", "verdict": "supported"}, {"id": "b", "verdict": "not supported"}, {"id": "c", "verdict": "supported"}]}))
    assert parts.claim_counts(tmp_path / "claims.json") == "3 claims: 2 supported, 1 not supported"
    assert parts.claim_counts(tmp_path / "missing.json") == "no readable missing.json"
    measured, goal, ok = parts.summarise([("post-bf16", "passed", ""), ("pre-bf16", "failure", "grads 9e-2 > 5e-2"),
                                          ("pre-fp32", "skipped", "no CUDA device")])
    assert ok is False and measured.startswith("1/3 passed; pre-bf16: grads 9e-2") and "1 skipped" in measured
    assert parts.summarise([("", "passed", "")]) == ("1/1 passed", "all pass", True)
