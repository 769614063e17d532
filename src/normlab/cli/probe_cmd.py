"""``normlab probe``: gradient and forward statistics of freshly initialised models."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def _ints(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="statistics at initialisation over placements x depths x seeds",
                       description="Probe freshly initialised models (no training): gradient norms per "
                       "weight and layer, residual-stream norms, cosines, rank collapse, end-to-end "
                       "Jacobian norms, and depth fits. Writes DIR/probe.csv, DIR/summary.json, "
                       "DIR/probe_config.json (and DIR/measurements.json with --measure).")
    p.add_argument("--placements", type=_names, default=["post", "pre"], help="comma-separated (default post,pre)")
    p.add_argument("--depths", type=_ints, default=[2, 4, 8, 16, 32], help="comma-separated L (default 2,4,8,16,32)")
    p.add_argument("--d-model", type=int, default=128, help="residual width d (default 128)")
    p.add_argument("--n-head", type=int, default=4, help="attention heads; must divide --d-model (default 4)")
    p.add_argument("--d-ff", type=int, default=None, help="FFN width (default 4*d_model)")
    p.add_argument("--init", default="xavier", help="weight init (default xavier, Xiong et al.'s setting)")
    p.add_argument("--norm", default="layernorm", help="norm of every placement: layernorm, rmsnorm, ... "
                   "(`normlab placements` lists them; default layernorm)")
    p.add_argument("--seeds", type=int, default=5, help="number of seeds 0..N-1 (default 5)")
    p.add_argument("--batches", type=int, default=1, help="batches per seed (default 1)")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per batch (default 8)")
    p.add_argument("--context", type=int, default=64, help="tokens per sequence (default 64)")
    p.add_argument("--data", default="tinyshakespeare", help="tinyshakespeare or random (uniform tokens)")
    p.add_argument("--data-dir", default=None, help="directory holding tinyshakespeare.txt")
    p.add_argument("--n-proj", type=int, default=2, help="random projections for Jacobian norms (0 = skip)")
    p.add_argument("--sharpness-iters", type=int, default=0, metavar="N", help="also the sharpness, the top Hessian "
                   "eigenvalue of the loss, by N power iterations (default 0 = skip; each iteration costs about two "
                   "backward passes per model)")
    p.add_argument("--out", default="probe", metavar="DIR", help="output directory (default ./probe)")
    p.add_argument("--measure", metavar="KEYS", type=_names, default=[], help="also the named measurements of "
                   "the quick claims (comma-separated, or 'all': identity:pre, one_step:post, rms, ...), per seed "
                   "over --seeds and --depths on probe-sized models, into DIR/measurements.json (docs/diagnostics.md)")
    p.add_argument("--force", action="store_true", help="replace an existing probe in --out (and its stale report)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.set_defaults(func=_probe)


def _probe(args: argparse.Namespace) -> int:
    from normlab.core.errors import UserError
    from normlab.core.fscheck import writable_dir
    from normlab.diagnostics.fits import format_summary
    from normlab.diagnostics.probe import ProbeConfig

    keys = _measure_keys(args.measure)  # before anything is built or written
    cfg = ProbeConfig(placements=args.placements, depths=args.depths, d_model=args.d_model, n_head=args.n_head,
                      d_ff=args.d_ff, init=args.init, norm=args.norm, seeds=args.seeds, batches=args.batches,
                      batch_size=args.batch_size, context=args.context, data=args.data, n_proj=args.n_proj,
                      sharpness_iters=args.sharpness_iters)
    out = writable_dir(args.out, "--out")  # before the work: a probe is never computed only to be lost

    from normlab.run.outdir import ENTRIES, OutDir

    def refuse_existing() -> None:
        names = {p.name for p in OutDir(out, "probe").contents()}  # (a folder of another kind is refused)
        existing = [n.rstrip("/") for n in ENTRIES["probe"] if n.rstrip("/") in names]
        if existing and not args.force:
            raise UserError(f"--out {out}: already holds a probe ({', '.join(existing)}); choose another --out "
                            "or add --force to replace it")

    refuse_existing()
    with OutDir(out, "probe").writing("--out", check=refuse_existing):  # one writer; checked again, held
        summary, n_rows = _run(cfg, args, out, keys)
    if not args.quiet:
        print(format_summary(summary))
        if keys:
            print(f"measured {', '.join(keys)} over {cfg.seeds} seeds (reference depth {_ref_depth(cfg.depths)})")
        print(f"wrote {out}/probe.csv ({n_rows} rows), summary.json, probe_config.json"
              + (", measurements.json" if keys else "") + f" in {summary['wall_time_s']:.1f} s")
    return 0


def _measure_keys(given: list[str]) -> list[str]:
    """--measure's keys of ``diagnostics.measurements.EXTRAS`` in the order given, once each
    ('all': every one); an unknown key is refused listing the valid ones."""
    from normlab.core.errors import unknown_name
    from normlab.diagnostics.measurements import EXTRAS

    for key in given:
        if key != "all" and key not in EXTRAS:
            raise unknown_name("--measure", key, ("all", *EXTRAS))
    return list(EXTRAS) if "all" in given else list(dict.fromkeys(given))


def _ref_depth(depths: list[int]) -> int:
    """The depth of the claims' per-layer profiles (``QuickData.ref_depth``: 16 when probed, else the
    largest probed depth below 16, else the largest): identity:*, ln_gain:post and ln_gain_gpt2:post are measured there."""
    from normlab.claims.measure import QuickData

    return QuickData([], 1, {"depths": list(depths)}).ref_depth()


def _run(cfg: Any, args: argparse.Namespace, out: Path, keys: list[str]) -> tuple[dict[str, Any], int]:
    """Probe into the held folder ``out``, and measure ``keys``: (summary, number of rows)."""
    import json
    import time

    from normlab.core.fsutil import atomic_write_text
    from normlab.core.progress import Progress
    from normlab.core.schema import to_dict
    from normlab.diagnostics.fits import summarize
    from normlab.diagnostics.measurements import extra_size
    from normlab.diagnostics.probe import run_probe, write_csv
    from normlab.run.outdir import MEASUREMENTS, PAGE, PROBE_CONFIG, PROBE_CSV, SUMMARY, OutDir

    display = Progress("probe", enabled=not args.quiet)
    display.add("model", len(cfg.placements) * len(cfg.depths) * cfg.seeds)
    display.note(f"{', '.join(cfg.placements)} x L {','.join(map(str, cfg.depths))} x {cfg.seeds} seeds at init")
    display.start("model")
    if keys:
        display.add("measurement", sum(extra_size(k, cfg.seeds, cfg.depths) for k in keys))
        display.note(f"then measuring {', '.join(keys)} (reference depth {_ref_depth(cfg.depths)})")

    def progress(placement: str, L: int, seed: int) -> None:
        display.item(f"seed {seed + 1}/{cfg.seeds}, last {placement} L={L}")
        display.advance("model")

    t0 = time.perf_counter()
    with display:
        rows = run_probe(cfg, data_dir=args.data_dir, progress=progress)
        measured = _measurements(keys, cfg, display) if keys else None
    summary = summarize(rows)
    summary["wall_time_s"] = time.perf_counter() - t0
    folder = OutDir(out, "probe")
    if args.force and folder.file(PAGE).is_dir():
        import shutil

        shutil.rmtree(folder.file(PAGE))  # built from the probe being replaced: stale now
    if args.force and not keys:
        folder.file(MEASUREMENTS).unlink(missing_ok=True)  # the replaced probe's: stale now
    write_csv(rows, folder.file(PROBE_CSV))
    atomic_write_text(folder.file(SUMMARY), json.dumps(summary, indent=2))
    atomic_write_text(folder.file(PROBE_CONFIG), json.dumps(to_dict(cfg), indent=2))
    if measured is not None:
        atomic_write_text(folder.file(MEASUREMENTS), json.dumps(measured, indent=2, allow_nan=False))
    return summary, len(rows)


def _measurements(keys: list[str], cfg: Any, display: Any) -> dict[str, Any]:
    """measurements.json: the settings, and ``keys`` measured by ``measure_extra`` in its own
    layout (a value per seed; depths as JSON keys are strings, NaN is null)."""
    from normlab.diagnostics import measurements as m
    from normlab.diagnostics.probe import load_tokens

    ref = _ref_depth(cfg.depths)
    try:  # where measure_extra's models read their batches (as claims.measure.empty says it)
        load_tokens("tinyshakespeare")
        data = "tinyshakespeare"
    except Exception:
        data = "random"
    got: dict[str, Any] = {}
    for key in keys:
        display.item(f"measuring {key}")
        m.measure_extra(key, got, cfg.seeds, list(cfg.depths), ref, lambda: display.advance("measurement"),
                        cfg.first_seed)
    settings = {"keys": keys, "seeds": cfg.seeds, "first_seed": cfg.first_seed, "depths": list(cfg.depths), "ref_depth": ref,
                "d_model": m.D, "d_ff": m.D, "n_head": 4, "init": "xavier", "batch": f"{m.BATCH} x {m.CONTEXT} tokens",
                "data": data}
    return {"settings": settings, "measurements": _finite(got)}


def _finite(obj: Any) -> Any:
    """JSON has no NaN: non-finite floats become null (as in inspect's files); keys become strings."""
    import math

    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    return obj
