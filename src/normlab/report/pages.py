"""The three report pages: one training run, one probe output, one study store.

Each page opens with a summary table, then the figures, then the exact configurations
and software versions that produced the data.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from normlab.report import figures as F
from normlab.report.html import Page, esc
from normlab.report.load import RunData, load_probe, load_run, load_study, run_label

CURVES = [  # (metric key, x key, y label, title, file name)
    ("train/loss", "step", "train loss (nats/token)", "training loss against step", "train_loss_step"),
    ("val/loss", "step", "validation loss (nats/token)", "validation loss against step", "val_loss_step"),
    ("train/loss", "tokens", "train loss (nats/token)", "training loss against tokens seen", "train_loss_tokens"),
    ("val/loss", "tokens", "validation loss (nats/token)", "validation loss against tokens seen", "val_loss_tokens"),
    ("lr", "step", "learning rate", "learning-rate schedule", "lr"),
    ("grad_norm", "step", "global grad norm (before clipping)", "global gradient norm", "grad_norm"),
]
_LAYER_KEY = re.compile(r"^(?P<pre>.*?)[/_.]?(?:layer|l)[/_.]?(?P<n>\d+)(?P<post>.*)$")


def mean_std(values: list[float]) -> str:
    """'mean ± sample std' (ddof=1, as `normlab study status` and the claims use)."""
    v = [x for x in values if isinstance(x, (int, float)) and math.isfinite(x)]
    if not v:
        return "-"
    return f"{np.mean(v):.4f} ± {np.std(v, ddof=1):.4f}" if len(v) > 1 else f"{v[0]:.4f}"


def curve_figures(page: Page, groups: dict[str, list[RunData]]) -> None:
    """Loss / lr / grad-norm curves, one line (mean over seeds, min-max band) per group."""
    for key, x, ylabel, title, name in CURVES:
        series = {}
        for label, runs in groups.items():
            per_seed = [r.series(key, x) for r in runs]
            per_seed = [s for s in per_seed if s[0]]
            if per_seed:
                series[label] = F.stack_seeds(per_seed)
        if series:
            xl = "step" if x == "step" else "tokens seen"
            page.figure(F.curves(series, xl, ylabel, title), name,
                        f"{title}; line = mean over seeds, band = min-max over seeds.")


def diag_matrices(rows: list[dict[str, Any]]) -> dict[str, tuple[list[float], list[int], np.ndarray]]:
    """Per-layer statistics from diagnostics.jsonl: {stat: (steps, layers, matrix (L, steps))}.

    Accepts per-layer lists (``"grad_norm": [..]``) and per-layer keys (``"grad_norm/layer3"``).
    """
    table: dict[str, dict[int, dict[float, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        step = row.get("step")
        if step is None:
            continue
        for k, v in row.items():
            if isinstance(v, list) and v and all(isinstance(e, (int, float)) for e in v):
                for i, e in enumerate(v):
                    table[k][i + 1][float(step)] = float(e)
            elif isinstance(v, (int, float)) and (m := _LAYER_KEY.match(k)):
                stat = (m["pre"] + m["post"]).strip("/_.") or "value"
                table[stat][int(m["n"])][float(step)] = float(v)
    # diagnostics.jsonl list lengths (normlab.diagnostics.training): L per block, L + 1 per stream
    # x_0..x_L, L + 2 per parameter group [embeddings, blocks 1..L, final norm/head]
    n_block = max((len(by) for k, by in table.items() if k in ("cos", "angle")), default=None)
    out = {}
    for stat, by_layer in table.items():
        layers = sorted(by_layer)
        steps = sorted(set().union(*(by_layer[lv].keys() for lv in layers)))
        if len(layers) < 2 or len(steps) < 2:
            continue
        m = np.array([[by_layer[lv].get(s, np.nan) for s in steps] for lv in layers])
        names: list[Any] = layers
        if n_block is not None and len(layers) == n_block + 2:
            names = ["emb", *range(1, n_block + 1), "head"]
        elif n_block is not None and len(layers) == n_block + 1:
            names = [f"x{i}" for i in range(n_block + 1)]
        out[stat] = (steps, names, m)
    return out


# colour-bar label and row axis of each diagnostics statistic
DIAG_LABELS = {
    "grad_norm": ("||grad||_F per group", "parameter group"), "update_ratio": ("||ΔW|| / ||W||", "parameter group"),
    "rms": ("RMS of x_l", "stream x_l"), "max_abs": ("max |x_l|", "stream x_l"),
    "cos": ("cos(block input, output)", "block"), "angle": ("arccos(cos)/π", "block"),
    "attn_max_logit": ("max |q·k|/√d_head", "block"), "attn_min_entropy": ("min entropy (nats)", "block"),
    "attn_mean_entropy": ("mean entropy (nats)", "block"),
}


def run_page(path: str | Path) -> Path:
    run = load_run(path)
    page = Page(f"normlab run report: {run.path.name} ({run.label})", run.path / "report")
    s = run.summary or {}
    page.heading("Summary", "summary")
    keys = ["status", "steps", "best_val_loss", "final_val_loss", "diverged_at_step", "wall_time_s", "tokens_per_s"]
    page.table(["trial", *keys], [[run.label, *(s.get(k) for k in keys)]])
    if not s:
        page.text("No summary.json yet: the run is still going or was killed; curves show what was logged.", "muted")
    curve_figures(page, {run.label: [run]})
    mats = diag_matrices(run.diagnostics)
    if mats:
        page.heading("Per-layer statistics during training", "heatmaps")
        for stat, (steps, layers, m) in mats.items():
            safe = re.sub(r"[^A-Za-z0-9_]+", "_", stat)
            label, rows = DIAG_LABELS.get(stat, (stat, "layer"))
            page.figure(F.heatmap(m, steps, layers, label, f"{stat} per layer against step", ylabel=rows),
                        f"heat_{safe}",
                        f"{stat} per layer (rows) against training step (columns), from diagnostics.jsonl.")
    layer_section(page, run.path)
    page.heading("Configuration", "config")
    page.pre(json.dumps(run.config, indent=2, sort_keys=True))
    if run.env:
        page.pre(json.dumps(run.env, indent=2, sort_keys=True))
    page.versions()
    return page.write()


def layer_section(page: Page, run_dir: Path) -> None:
    """Layer similarity and deletion from RUN/analysis/analysis.json (``normlab analyze``),
    which is computed first when absent; skipped with a note when it cannot be (no
    checkpoint, corpus not available)."""
    from normlab.diagnostics.analyze import analyze_run
    from normlab.errors import UserError

    path = run_dir / "analysis" / "analysis.json"
    try:
        res = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else analyze_run(run_dir)
    except (UserError, json.JSONDecodeError) as e:
        page.text(f"Layer similarity and deletion skipped: {e}", "muted")
        return
    page.heading("Layer similarity and deletion (checkpoint, validation text)", "layers")
    page.figure(F.similarity_matrix(np.asarray(res["angular_distance"])), "layer_similarity",
                "Angular distance arccos(cos)/π between the stream states x_0..x_L, mean over tokens.")
    delta = [v - res["val_loss"] for v in res["deletion_loss"]]
    page.figure(F.deletion_bars(range(1, len(delta) + 1), delta), "layer_deletion",
                f"Validation loss increase when one block is skipped (full model: {res['val_loss']:.4f}).")


def probe_page(path: str | Path) -> Path:
    probe = load_probe(path)
    page = Page(f"normlab probe report: {probe.path.name}", probe.path / "report")
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in probe.rows:
        groups[(r["metric"], r.get("param") or "", r.get("sublayer") or "")].append(r)
    page.heading("Summary", "summary")
    page.table(["placement", "init", "depths", "seeds", "rows"], [
        [pl, init, ",".join(map(str, sorted({r["n_layer"] for r in rs}))), len({r["seed"] for r in rs}), len(rs)]
        for (pl, init), rs in _by(probe.rows, ("placement", "init")).items()])
    if probe.summary:
        page.heading("Fits (summary.json)", "fits")
        page.pre(json.dumps(probe.summary, indent=2, sort_keys=True, default=str))
    for (metric, param, sub), rows in groups.items():
        what = " ".join(v for v in (metric, param, sub) if v)
        safe = re.sub(r"[^A-Za-z0-9_]+", "_", what)
        label_keys = ("placement", "init") if len({r.get("init") for r in rows}) > 1 else ("placement",)
        depth = max(r["n_layer"] for r in rows)
        prof = {}
        for lab, rs in _by([r for r in rows if r["n_layer"] == depth], label_keys).items():
            prof["/".join(lab)] = _seed_matrix(rs, "layer")
        if any(len(x) > 1 for x, _ in prof.values()):
            page.figure(F.layer_profile(prof, what, f"{what} per layer at init, L={depth}"), f"layers_{safe}",
                        f"{what} against layer index, depth {depth}; mean over seeds with min-max band.")
        depths = sorted({r["n_layer"] for r in rows})
        if len(depths) > 2:
            last = [r for r in rows if r["layer"] == r["n_layer"]]
            scal = {"/".join(lab): _seed_matrix(rs, "n_layer") for lab, rs in _by(last, label_keys).items()}
            if all(np.all(ys > 0) for _, ys in scal.values()):
                fig, _ = F.depth_scaling(scal, f"{what} at the last layer", f"depth scaling: {what}")
                page.figure(fig, f"depth_{safe}", f"{what} at the last layer against depth L (log-log), "
                            "least-squares slope of the seed mean in the legend.")
    page.heading("Configuration", "config")
    page.pre(json.dumps(probe.config, indent=2, sort_keys=True, default=str))
    page.versions()
    return page.write()


def _by(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    out: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[tuple(str(r.get(k)) for k in keys)].append(r)
    return dict(out)


def _seed_matrix(rows: list[dict[str, Any]], xkey: str) -> tuple[np.ndarray, np.ndarray]:
    """(x values, (seeds, x) matrix) from long-format rows."""
    xs = sorted({r[xkey] for r in rows})
    seeds = sorted({r["seed"] for r in rows})
    m = np.full((len(seeds), len(xs)), np.nan)
    for r in rows:
        m[seeds.index(r["seed"]), xs.index(r[xkey])] = r["value"]
    return np.array(xs, float), m


def study_page(path: str | Path) -> Path:
    from normlab.report.study_page import build

    return build(load_study(path))


def build_report(path: str | Path) -> Path:
    """Write PATH/report/index.html for a run dir, probe output or study store; return its path."""
    from normlab.report.load import detect

    return {"run": run_page, "probe": probe_page, "study": study_page}[detect(path)](path)


__all__ = ["build_report", "run_page", "probe_page", "study_page", "run_label", "esc"]
