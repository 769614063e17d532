"""Every CUDA path of normlab, checked and measured by one command in under 9 minutes on one
H200, so that a short loan of a GPU is enough (and a rerun fits in it).

    PYTHONPATH=src python benchmarks/gpu_check.py --out gpu_check.json [--only PART,...]
    python benchmarks/gpu_check.py --dry-run        # CPU, tiny sizes: the test suite runs this

Parts, each in its own process under its own cap (seconds on the GPU; --cap PART=S changes one):

  cuda-tests           70  pytest -m cuda tests/cuda: every placement fwd/bwd in float32 and
                           bf16 vs CPU float64; 50-step run, Ctrl-C, resume, metrics bit for
                           bit; the probe vs CPU; an out-of-range token id is a one-line error
  throughput-eager     60  bf16 tokens/s and MFU against the bf16 matmul peak measured in the
  throughput-compiled 150  same process, baby and GPT-2 small: normlab vs x-transformers vs
                           HF GPT-2, eager, then each under torch.compile
  trial-batching       50  benchmarks/trial_batching.py: 8 tiny trials batched vs sequential
  claims-quick         90  normlab claims --quick: wall time and verdicts
  study-trial          40  one pre-vs-post --scale gpu trial through normlab train, 300 steps
  packed-study         60  trials per hour of a study packed K to a GPU (K from the trials'
                           memory cost, as --executor slurm chooses it) vs one trial at a time

A part stopped at its cap keeps the rows it finished; a missing optional peer is a row, not a
failure. Without Tiny Shakespeare (NORMLAB_DATA_DIR, --data-dir or the normlab cache) the
training parts use a synthetic text and the claims are skipped. Writes one JSON file
{"rows": [{target, measured, goal, verdict}], "parts": [...], "machine": {...}} and prints
the table. Exit 0 when every part ran (targets may be MISSED), 1 when a part crashed.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
try:  # run from a source tree without PYTHONPATH=src: use the tree's own package
    import normlab
except ImportError:
    sys.path.insert(0, str(HERE.parent / "src"))
    import normlab

from _gpu_parts import PARTS, Ctx  # noqa: E402

CAPS = {"cuda-tests": 70, "throughput-eager": 60, "throughput-compiled": 150, "trial-batching": 50,
        "claims-quick": 90, "study-trial": 40, "packed-study": 60}
# Dry-run caps are only a safety net on a loaded CPU, except the claims: a few seconds of
# `normlab claims --quick` show that the command starts; the whole takes minutes on a CPU.
DRY_CAPS = {**{p: 300 for p in CAPS}, "claims-quick": 10}
BUDGET_S = 540
OPTIONAL = [("x_transformers", "x-transformers", "the xt-pre throughput rows"),
            ("transformers", "transformers", "the hf-gpt2 throughput rows"),
            ("pytest", "pytest", "the cuda-tests part")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", "--json", dest="out", type=Path, default=Path("gpu_check.json"),
                    help="the JSON of target rows (default ./gpu_check.json)")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes: check the script, not the GPU")
    ap.add_argument("--only", help="comma-separated parts to run (default all): " + ", ".join(PARTS))
    ap.add_argument("--cap", action="append", default=[], metavar="PART=SECONDS", help="change one part's cap")
    ap.add_argument("--data-dir", help="directory holding tinyshakespeare.txt (else $NORMLAB_DATA_DIR)")
    ap.add_argument("--work", type=Path, help="keep logs, run directories and the claims page here")
    for hidden in ("--part", "--rows", "--corpus"):  # a part's own process
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.part:
        PARTS[a.part](Ctx(Path(a.rows), Path(a.rows).parent, a.dry_run, "cpu" if a.dry_run else "cuda",
                          a.corpus or None))
        return 0
    try:
        parts, caps = _plan(a)
    except ValueError as e:
        print(f"gpu_check: error: {e}", file=sys.stderr)
        return 2
    import torch

    if not a.dry_run and not torch.cuda.is_available():
        print("gpu_check: error: no CUDA device here (torch.cuda.is_available() is False); "
              "use --dry-run to check the script on the CPU", file=sys.stderr)
        return 2
    if a.work is None:
        with tempfile.TemporaryDirectory(prefix="gpu_check-") as tmp:
            return _check(a, parts, caps, Path(tmp))
    a.work.mkdir(parents=True, exist_ok=True)
    return _check(a, parts, caps, a.work.resolve())


def _plan(a: argparse.Namespace) -> tuple[list[str], dict[str, int]]:
    parts = [p.strip() for p in a.only.split(",") if p.strip()] if a.only else list(PARTS)
    caps = dict(DRY_CAPS if a.dry_run else CAPS)
    for item in a.cap:
        name, _, sec = item.partition("=")
        if name not in PARTS or not sec.isdigit() or int(sec) <= 0:
            raise ValueError(f"--cap {item!r}: use PART=SECONDS with a part of {', '.join(PARTS)}")
        caps[name] = int(sec)
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        raise ValueError(f"--only {a.only!r}: unknown part {', '.join(bad) or '(none)'}; parts: {', '.join(PARTS)}")
    return parts, caps


def _check(a: argparse.Namespace, parts: list[str], caps: dict[str, int], work: Path) -> int:
    from _common import target

    from normlab.core.fsutil import atomic_write_json

    t_start = time.perf_counter()
    info = _machine(a.dry_run)
    rows = [target("machine", info["summary"], "-", None)]
    for module, pip, what in OPTIONAL:
        found = importlib.util.find_spec(module) is not None
        rows.append(target(f"optional peer {pip}", f"installed {_version(pip)}" if found
                           else f"missing (pip install {pip}): {what} are skipped", "-", None))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if a.dry_run:  # tiny models: one thread each is faster, and kinder to a shared CPU
        env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(Path(normlab.__file__).resolve().parents[1]),
                                         *filter(None, [env.get("PYTHONPATH")])])
    if a.data_dir:
        env["NORMLAB_DATA_DIR"] = str(Path(a.data_dir).resolve())
    corpus, note = _corpus(env, work, a.dry_run)
    rows.append(target("corpus", note, "-", None))
    records = []
    for i, name in enumerate(parts, 1):
        print(f"[{i}/{len(parts)}] {name} (cap {caps[name]} s)", flush=True)
        rec, got = _run_part(name, caps[name], a.dry_run, corpus, env, work)
        for r in got:
            print(f"    {r['verdict']:<7} {r['target']}: {r['measured']}", flush=True)
        print(f"    {rec['status']} in {rec['wall_s']:.1f} s ({rec['cpu_s']:.1f} CPU s)", flush=True)
        rows += got
        records.append(rec)
        if rec["status"] == "interrupted":
            break
    total = time.perf_counter() - t_start
    rows.append(target("whole check", f"{total:.0f} s for {len(records)} parts", "-" if a.dry_run else
                       f"< {BUDGET_S} s", None if a.dry_run else total < BUDGET_S))
    _print_table(rows)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "dry_run": a.dry_run, "machine": info, "corpus": note, "parts": records, "rows": rows}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(a.out, report)
    print(f"\nwrote {a.out}")
    if any(r["status"] == "interrupted" for r in records):
        return 130
    return 1 if any(r["status"] == "error" for r in records) else 0


def _run_part(name: str, cap: int, dry: bool, corpus: str | None, env: dict[str, str],
              work: Path) -> tuple[dict, list[dict]]:
    """Run one part in its own process group, stop the whole group at ``cap`` seconds."""
    pdir = work / name
    pdir.mkdir(parents=True, exist_ok=True)
    rows_file, log = pdir / "rows.jsonl", pdir / "log.txt"
    rows_file.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--part", name, "--rows", str(rows_file),
           "--corpus", corpus or "", *(["--dry-run"] if dry else [])]
    t0, cpu0 = time.perf_counter(), _child_cpu()
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(HERE.parent),
                                start_new_session=True)  # its own group: the cap stops its children too
        try:
            rc: int | None = proc.wait(timeout=cap)
            status = "done" if rc == 0 else "error"
        except subprocess.TimeoutExpired:
            rc, status = None, "capped"
        except KeyboardInterrupt:
            rc, status = None, "interrupted"
        if rc is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    got = [json.loads(line) for line in rows_file.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if rows_file.is_file() else []
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
    if status == "capped":
        got.append({"target": f"{name} within its cap", "measured": f"stopped at {cap} s; the rows above are "
                    "what it finished", "goal": f"<= {cap} s", "verdict": "MISSED"})
    elif status == "error":
        last = next((ln for ln in reversed(tail) if ln.strip()), "")
        got.append({"target": name, "measured": f"crashed (exit {rc}): {last.strip()[:200]}", "goal": "runs",
                    "verdict": "error"})
    return {"name": name, "cap_s": cap, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "status": status,
            "exit": rc, "log_tail": tail}, got


def _child_cpu() -> float:
    """CPU seconds of every finished child process so far (a part and what it started)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _machine(dry: bool) -> dict:
    import torch

    info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "cpus": os.cpu_count()}
    if dry:
        info["summary"] = f"dry run on the CPU (tiny sizes: the numbers mean nothing), torch {torch.__version__}"
    else:
        mem = torch.cuda.get_device_properties(0).total_memory / 2 ** 30
        info["summary"] = (f"{info['device']} ({mem:.0f} GiB), torch {torch.__version__}, CUDA {torch.version.cuda}, "
                           f"Python {info['python']}, {info['cpus']} CPUs")
    return info


def _version(pip: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(pip)
    except PackageNotFoundError:
        return "(version unknown)"


def _corpus(env: dict[str, str], work: Path, dry: bool) -> tuple[str | None, str]:
    """(None, where Tiny Shakespeare is) or (a synthetic text file, why it is used)."""
    from normlab.data.source import cache_dir

    d = env.get("NORMLAB_DATA_DIR")
    for path in ([Path(d) / "tinyshakespeare.txt"] if d else []) + [cache_dir() / "corpora" / "tinyshakespeare.txt"]:
        if path.is_file():
            return None, f"Tiny Shakespeare: {path}"
    path = work / "synthetic.txt"
    path.write_text(synthetic_text(100_000 if dry else 1_200_000), encoding="utf-8")
    return str(path), ("Tiny Shakespeare not found (set NORMLAB_DATA_DIR or --data-dir): training parts "
                       "use a synthetic text, the claims are skipped")


def synthetic_text(n_chars: int, seed: int = 0) -> str:
    """Seeded word salad over letters and punctuation (a corpus of about 60 characters)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 9))) for _ in range(2000)]
    out, n = [], 0
    while n < n_chars:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(2, 12))) + rng.choice(".,;:!?'-") + "\n"
        out.append(line)
        n += len(line)
    return "".join(out)[:n_chars]


def _print_table(rows: list[dict]) -> None:
    w = min(max(len(r["target"]) for r in rows), 70)
    print(f"\n{'target':<{w}}  {'verdict':<7}  {'goal':<10}  measured")
    for r in rows:
        print(f"{r['target']:<{w}}  {r['verdict']:<7}  {r['goal']:<10}  {r['measured']}")


if __name__ == "__main__":
    sys.exit(main())
