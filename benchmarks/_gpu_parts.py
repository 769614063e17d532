"""The parts of ``benchmarks/gpu_check.py``. Each runs in its own process under its own time
cap and appends target rows to a JSONL file as soon as it has them, so a part stopped at
its cap keeps what it finished. Claims and studies are driven through the ``normlab`` CLI,
as a user would, so the check follows their internals wherever they go.
"""

from __future__ import annotations

import gc
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from _common import target

from normlab.bench.peers import Size

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# GPU shapes: nanoGPT's baby GPT at its own batch, and GPT-2 small (vocabulary padded to a
# multiple of 64, as nanoGPT does). The dry run uses one tiny shape for both.
SIZES = {"baby": Size(6, 384, 6, 256, 64), "gpt2-small": Size(12, 768, 12, 1024, 8, vocab=50304)}
DRY_SIZE = Size(2, 32, 2, 16, 2)
EAGER = ["normlab-fused", "xt-pre", "hf-gpt2"]  # normlab-fused is what `normlab train` runs


@dataclass
class Ctx:
    rows: Path           # JSONL of target rows, appended to
    work: Path           # scratch directory of this check
    dry: bool
    device: str          # "cuda", or "cpu" in the dry run
    corpus: str | None   # a text file standing in for Tiny Shakespeare, or None (use the real one)

    def add(self, name: str, measured: str, goal: str, ok: bool | None) -> None:
        self.add_row(target(name, measured, goal, ok))

    def add_row(self, row: dict[str, str]) -> None:
        with self.rows.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        print(f"  {row['verdict']:<7} {row['target']}: {row['measured']}", flush=True)


# -- cuda tests ------------------------------------------------------------------------------
def cuda_tests(ctx: Ctx) -> None:
    """pytest -m cuda tests/cuda, one row per test function (on the CPU in the dry run)."""
    try:
        import pytest
    except ImportError:
        ctx.add("cuda tests", "not run: pytest is not installed (pip install pytest)", "all pass", None)
        return
    xml = ctx.work / "cuda_tests.xml"
    if ctx.dry:
        os.environ["NORMLAB_TEST_DEVICE"] = "cpu"
    os.chdir(ROOT)
    code = pytest.main(["tests/cuda", "-m", "cuda", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"])
    groups = junit_groups(xml) if xml.is_file() else {}
    if not groups:
        ctx.add("cuda tests", f"no test ran (pytest exit {int(code)})", "all pass", False)
    for name, cases in groups.items():
        ctx.add(f"cuda test {name}", *summarise(cases))


def junit_groups(xml: Path) -> dict[str, list[tuple[str, str, str]]]:
    """pytest's JUnit XML as {module::function: [(parameters, outcome, message)]}."""
    import xml.etree.ElementTree as ET

    groups: dict[str, list[tuple[str, str, str]]] = {}
    for case in ET.parse(xml).iter("testcase"):
        name = case.get("name", "?")
        func, _, params = name.partition("[")
        module = case.get("classname", "").rsplit(".", 1)[-1]
        outcome, msg = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome, msg = tag, " ".join((el.get("message") or el.text or "").split())[:300]
                break
        groups.setdefault(f"{module}::{func}", []).append((params.rstrip("]"), outcome, msg))
    return groups


def summarise(cases: list[tuple[str, str, str]]) -> tuple[str, str, bool | None]:
    """(measured, goal, ok) of one test function over its parameter sets."""
    bad = [c for c in cases if c[1] in ("failure", "error")]
    skipped = [c for c in cases if c[1] == "skipped"]
    passed = len(cases) - len(bad) - len(skipped)
    parts = [f"{passed}/{len(cases)} passed"]
    parts += [f"{p or c}: {m}" for p, c, m in bad[:3]]
    if len(bad) > 3:
        parts.append(f"and {len(bad) - 3} more failures")
    if skipped:
        parts.append(f"{len(skipped)} skipped ({skipped[0][2]})")
    ok = None if len(skipped) == len(cases) else not bad
    return "; ".join(parts), "all pass", ok


# -- throughput ------------------------------------------------------------------------------
def _register_compiled(backend: str) -> list[str]:
    """A ``+compile`` variant of every eager peer: its loss function under torch.compile
    (dynamo inlines the module call). The dry run uses the ``eager`` backend: the same
    tracing, no code generation."""
    import torch

    from normlab.bench.peers import PEERS

    def variant(base: str) -> Callable[[Size], Any]:
        def make(s: Size) -> Any:
            model, fn = PEERS.get(base)(s)
            return model, torch.compile(fn, backend=backend)
        return make

    names = []
    for base in EAGER:
        name = f"{base}+compile"
        if name not in PEERS:
            PEERS.add(name, variant(base))
        names.append(name)
    return names


def throughput(ctx: Ctx, arm: str) -> None:
    """bf16 tokens/s and MFU of normlab vs x-transformers vs HF GPT-2 at both shapes, in one
    arm: ``eager`` (the peers in interleaved windows) or ``compiled`` (each under
    torch.compile, one at a time, normlab first, so that a slow compilation costs only its
    own row when the cap stops the part)."""
    import torch

    from normlab.bench.harness import matmul_peak, measure_many

    dev = torch.device(ctx.device)
    n, reps = (256, 3) if ctx.dry else (8192, 10)
    peak = matmul_peak(torch.bfloat16, dev, n=n, reps=reps)
    ctx.add(f"bf16 matmul peak ({arm} part)", f"{peak / 1e3:.1f} TFLOP/s ({n}^3, best of {reps}, in the "
            "process that measures the peers)", "-", None)
    timing = dict(warmup=1, repeats=2, window=2) if ctx.dry else dict(warmup=3, repeats=5, window=10)
    peers = EAGER if arm == "eager" else _register_compiled("eager" if ctx.dry else "inductor")
    for size_name, full in SIZES.items():
        s = DRY_SIZE if ctx.dry else full
        label = f"{size_name} ({s.n_layer}L d={s.d_model} ctx {s.context} batch {s.batch} vocab {s.vocab})"
        results = []
        for group in ([peers] if arm == "eager" else [[p] for p in peers]):
            for r in measure_many(group, size_name, s, dev, dtype="bfloat16", peak=peak, **timing):
                if isinstance(r, str):
                    ctx.add(f"{label}: {r.split(':')[0]}", r.split(": ", 1)[-1], "-", None)
                    continue
                results.append(r)
                mem = f", {r.peak_dev_mib:.0f} MiB" if r.peak_dev_mib is not None else ""
                ctx.add(f"{label}: {r.peer} bf16", f"{r.tokens_per_s:,.0f} tok/s ({r.tps_min:,.0f}-"
                        f"{r.tps_max:,.0f}), MFU {r.mfu:.1%}{mem}, loss {r.final_loss:.2f}", "-", None)
            gc.collect()
            if dev.type == "cuda":
                torch.cuda.empty_cache()
        ctx.add_row(_ratio(f"{label}: normlab vs fastest peer, {arm}", results))


def _ratio(name: str, results: list) -> dict[str, str]:
    ours = [r for r in results if r.peer.startswith("normlab")]
    theirs = [r for r in results if not r.peer.startswith("normlab")]
    if not ours or not theirs:
        return target(name, "no ratio (needs normlab and at least one peer measured)", ">= 1.0x", None)
    a, b = ours[0], max(theirs, key=lambda r: r.tokens_per_s)
    x = a.tokens_per_s / b.tokens_per_s
    return target(name, f"{a.peer} {a.tokens_per_s:,.0f} / {b.peer} {b.tokens_per_s:,.0f} tok/s = {x:.2f}x",
                  ">= 1.0x", x >= 1.0)


# -- trial batching --------------------------------------------------------------------------
def trial_batching(ctx: Ctx) -> None:
    """benchmarks/trial_batching.py on the device: 8 tiny trials batched vs one by one."""
    out = ctx.work / "trial_batching.json"
    cmd = [sys.executable, str(HERE / "trial_batching.py"), "--device", ctx.device, "--json", str(out),
           *(["--steps", "6", "--trials", "2"] if ctx.dry else ["--steps", "200", "--trials", "8"]),
           *(["--corpus", ctx.corpus] if ctx.corpus else [])]
    rc = subprocess.run(cmd).returncode
    if rc != 0 or not out.is_file():
        ctx.add("trial batching", f"script failed (exit {rc}); see the log", "runs", False)
        return
    for row in json.loads(out.read_text(encoding="utf-8"))["rows"]:
        ctx.add_row(row)


# -- claims ----------------------------------------------------------------------------------
def claims(ctx: Ctx) -> None:
    """``normlab claims --quick`` in a subprocess: wall time and the verdict counts."""
    name = "normlab claims --quick"
    if ctx.corpus:
        ctx.add(name, "not run: the probe needs Tiny Shakespeare (set NORMLAB_DATA_DIR or --data-dir)",
                "completes", None)
        return
    out = ctx.work / "claims"
    t0 = time.perf_counter()
    rc = subprocess.run([sys.executable, "-m", "normlab", "claims", "--quick", "--out", str(out),
                         *(["--seeds", "2"] if ctx.dry else [])]).returncode
    wall = time.perf_counter() - t0
    if rc != 0:
        ctx.add(name, f"exit {rc} after {wall:.0f} s; see the log", "completes", False)
        return
    ctx.add(name, f"{claim_counts(out / 'claims.json')} in {wall:.0f} s wall", "completes", True)


def claim_counts(path: Path) -> str:
    """'N claims: k supported, ...' from claims.json, whatever else its layout holds."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        items = data.get("claims", []) if isinstance(data, dict) else data
        verdicts = [str(c.get("verdict", "?")) for c in items if isinstance(c, dict)]
    except (OSError, ValueError, AttributeError):
        return f"no readable {path.name}"
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    return f"{len(verdicts)} claims: " + ", ".join(f"{n} {v}" for v, n in counts.items())


# -- one study trial -------------------------------------------------------------------------
def study_trial(ctx: Ctx) -> None:
    """The first trial of ``pre-vs-post --scale gpu`` (smoke in the dry run) for a fixed number
    of steps through ``normlab train``; its wall time, and the preset's full length projected."""
    from normlab.study.presets import study_preset

    scale, steps = ("smoke", 4) if ctx.dry else ("gpu", 300)
    trial = study_preset("pre-vs-post", scale).trials()[0]
    data = json.loads(trial.config_json)
    full = int(data["train"]["steps"])
    cfg, run = ctx.work / "trial.toml", ctx.work / "trial-run"
    cfg.write_text(to_toml(data), encoding="utf-8")
    cmd = [sys.executable, "-m", "normlab", "train", "--config", str(cfg), "--out", str(run), "--quiet",
           "--set", f"train.steps={steps}", "--set", f"train.device={ctx.device}",
           *(["--set", f"data.corpus={ctx.corpus}"] if ctx.corpus else [])]
    t0 = time.perf_counter()
    rc = subprocess.run(cmd).returncode
    wall = time.perf_counter() - t0
    what = f"pre-vs-post --scale {scale}, trial {', '.join(f'{k}={v}' for k, v in trial.params.items())}"
    summary = run / "summary.json"
    if rc != 0 or not summary.is_file():
        ctx.add(what, f"normlab train exit {rc} after {wall:.0f} s; see the log", "completes", False)
        return
    s = json.loads(summary.read_text(encoding="utf-8"))
    tps = s.get("tokens_per_s") or 0.0
    per_step = s["wall_time_s"] / max(s["steps"], 1)
    val = s.get("final_val_loss")
    ctx.add(what, f"{s['steps']} steps: {wall:.1f} s wall (process), {s['wall_time_s']:.1f} s in the loop, "
            f"{tps:,.0f} tok/s, val {val if val is None else round(val, 3)}; the preset's {full} steps "
            f"~ {full * per_step / 60:.1f} min per trial", "completes", s["status"] == "completed")


def to_toml(data: dict[str, Any]) -> str:
    """RunConfig data (top-level scalars, then one table per section) as TOML; None = default."""
    top = [f"{k} = {_toml(v)}" for k, v in data.items() if not isinstance(v, dict) and v is not None]
    for k, v in data.items():
        if isinstance(v, dict):
            top += ["", f"[{k}]", *(f"{kk} = {_toml(vv)}" for kk, vv in v.items() if vv is not None)]
    return "\n".join(top) + "\n"


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items() if x is not None) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


from _gpu_pack import packed_study  # noqa: E402  (the part of its own file; it needs Ctx only for types)

PARTS: dict[str, Callable[[Ctx], None]] = {
    "cuda-tests": cuda_tests,
    "throughput-eager": lambda ctx: throughput(ctx, "eager"),
    "throughput-compiled": lambda ctx: throughput(ctx, "compiled"),
    "trial-batching": trial_batching,
    "claims-quick": claims,
    "study-trial": study_trial,
    "packed-study": packed_study,
}
