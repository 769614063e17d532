"""The page of one training run: how far it got and how, then the curves, the per-layer
statistics, the layers of its checkpoint, the numbers and the exact configuration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from normlab.diagnostics.catalogue import STATISTICS
from normlab.report import figures as F
from normlab.report.curves import curve_figures, loss_series
from normlab.report.diag import diag_figures
from normlab.report.html import Page
from normlab.report.kinds import heading, still_written
from normlab.report.load import RunData
from normlab.report.numbers import duration, num
from normlab.run.dir import RunDir
from normlab.run.outdir import ANALYSIS, ANALYSIS_JSON, OutDir, default_page


def describe(config: dict[str, Any]) -> str:
    """'post-LN, 6 blocks, d=128, lr 1e-3 cosine, warm-up 50, 500 steps' from a RunConfig dict."""
    m, o, t = config.get("model", {}), config.get("optim", {}), config.get("train", {})
    pl = m.get("placement", "?")
    pl = f"{pl}-LN" if pl in ("pre", "post") else (pl if isinstance(pl, str) else "mixed placement")
    bits = [pl + (f" + qk_norm {m['qk_norm']}" if m.get("qk_norm") else "")]
    if m.get("n_layer"):
        bits.append(f"{m['n_layer']} blocks")
    if m.get("d_model"):
        bits.append(f"d={m['d_model']}")
    if o.get("lr") is not None:
        bits.append(f"lr {num(o['lr'])}" + (f" {o['schedule']}" if o.get("schedule") else ""))
    if o.get("warmup_steps") is not None:
        bits.append(f"warm-up {num(o['warmup_steps'])}")
    if t.get("steps"):
        bits.append(f"{num(t['steps'])} steps")
    return ", ".join(bits)


def current_summary(run: RunData) -> tuple[dict[str, Any], str | None]:
    """(the summary the page presents, why it is not summary.json as written, else None).

    summary.json is written when a run ends; a resumed run that is killed (or still runs)
    leaves the earlier end's summary behind while metrics.jsonl goes past it. That summary is
    not the run's state: the headline numbers are then read off metrics.jsonl, and the page
    says which and why."""
    s = run.summary or {}
    last = max((m["step"] for m in run.metrics if isinstance(m.get("step"), int)), default=None)
    if not s or last is None or not isinstance(s.get("steps"), int) or s["steps"] >= last:
        return s, None
    _, val = run.series("val/loss")
    t, m = run.config.get("train", {}), run.config.get("model", {})
    tokens = last * t["batch_size"] * m["context"] if isinstance(t.get("batch_size"), int) and \
        isinstance(m.get("context"), int) else None
    derived = {"steps": last, "tokens": tokens, "best_val_loss": min(val) if val else None,
               "final_val_loss": val[-1] if val else None, "params": s.get("params")}
    why = "the run is still going" if run.writer else "the run was stopped without writing one (killed)"
    return derived, (f"summary.json is older than metrics.jsonl: it records the run {s.get('status')} at step "
                     f"{num(s['steps'])}, the metrics go on to step {num(last)} ({why}); the numbers here are "
                     "read from metrics.jsonl")


def answer(run: RunData) -> str:
    """The run's outcome in one or two sentences with the numbers."""
    s, stale = current_summary(run)
    x, y = loss_series(run)
    which = "validation" if run.series("val/loss")[1] and len(run.series("val/loss")[1]) >= 2 else "training"
    parts = []
    if y:
        parts.append(f"{which.capitalize()} loss went from {num(y[0])} (step {num(x[0])}) to {num(y[-1])} "
                     f"(step {num(x[-1])})")
        if s.get("best_val_loss") is not None:
            parts[-1] += f", best {num(s['best_val_loss'])}"
    status = s.get("status")
    if stale:
        parts.append(stale)
    elif status == "diverged":
        parts.append(f"the run diverged at step {num(s.get('diverged_at_step'))} and stopped")
    elif status:
        speed = f" at {num(s['tokens_per_s'])} tok/s" if s.get("tokens_per_s") else ""
        tokens = f" ({num(s['tokens'])} tokens)" if s.get("tokens") else ""
        took = f" in {duration(s['wall_time_s'])}" if s.get("wall_time_s") is not None else ""
        parts.append(f"{status} {num(s.get('steps'))} steps{tokens}{took}{speed}")
    else:
        parts.append("no summary.json yet: the run is still going or was killed; curves show what was logged")
    return "; ".join(parts) + "."


def build(run: RunData, progress: bool = False, out: Path | None = None) -> Path:
    head = heading("run", name=run.path.name, label=run.label, what=describe(run.config),
                   corpus=run.config.get("data", {}).get("corpus"))
    page = Page(head.title, out or default_page(run.path), progress=progress)
    page.lead(head.question, answer(run), [still_written(run.writer)] if run.writer else [])
    s, stale = current_summary(run)
    status = "diverged" if s.get("status") in ("diverged", "failed") else "ok"
    page.heading("Training curves", "curves")
    curve_figures(page, {run.label: [run]}, {run.path: status}, single=True)
    n_layer = run.config.get("model", {}).get("n_layer")
    diag_figures(page, run.diagnostics, n_layer if isinstance(n_layer, int) else None)
    if run.writer:  # the checkpoint still moves, and RUN/analysis is the writer's to write
        page.text("Layer similarity and deletion skipped: the run is still being written; rerun normlab "
                  "report when it has finished.", "muted")
    else:
        layer_section(page, run.path)
    page.heading("Numbers", "numbers")
    was = run.summary or {}
    rows = [("status", f"unknown: summary.json is stale ({was.get('status')} at step {num(was.get('steps'))})"
             if stale else s.get("status")), ("steps", s.get("steps")), ("tokens", s.get("tokens")),
            ("best val loss (nats/token)", s.get("best_val_loss")), ("final val loss", s.get("final_val_loss")),
            ("diverged at step", s.get("diverged_at_step")), ("wall time", duration(s.get("wall_time_s"))),
            ("tokens/s", s.get("tokens_per_s")), ("parameters", s.get("params"))]
    page.table(["quantity", "value"], [r for r in rows if r[1] is not None])
    page.heading("Configuration", "config")
    page.details("RunConfig (config.json)", json.dumps(run.config, indent=2, sort_keys=True))
    if run.env:
        page.details("Environment (env.json)", json.dumps(run.env, indent=2, sort_keys=True))
    page.versions()
    return page.write()


def layer_section(page: Page, run_dir: Path) -> None:
    """The figures the registered ``analyze`` statistics declare (``matrix``: layer x layer,
    ``bars``: one bar per block), read from the run's analysis.json (``normlab analyze``, or
    ``report.prepare`` before this page), under the step of the checkpoint they measured; an
    analysis of other weights than the run's checkpoint now is said to be one. Without an
    analysis the section says how to make it."""
    res, now = analysis_of(run_dir, page.out_dir)
    if res is None:
        page.text(f"Layer similarity and deletion skipped: no analysis of this run yet (`normlab analyze {run_dir}`; "
                  "`normlab report` runs it when the run has a checkpoint and its corpus, `--data-dir DIR` when the corpus moved).",
                  "muted")
        return
    ck = res.get("checkpoint") if isinstance(res.get("checkpoint"), dict) else None
    at = measured_at(ck)
    page.heading(f"Layers of the model at {at} (checkpoint {ck.get('checkpoint')}, validation text)" if ck else
                 "Layers of the model (checkpoint not recorded, validation text)", "layers")
    if not current(res, now):
        was = (f"These figures measured {at} of checkpoint {ck.get('checkpoint')}" if ck else
               "This analysis does not record which checkpoint it measured (it predates the record)")
        page.text(f"{was}, but the run's checkpoint is now {measured_at(now)}: they are not of the model above. "
                  f"Rerun `normlab report {run_dir}` (`--data-dir DIR` when the corpus moved) to measure it.", "muted")
    for key, s, f in analysis_figures():
        v = res.get(key)
        if not isinstance(v, list) or not v:
            continue
        what = f"{s.help[0].upper()}{s.help[1:]}"
        if f.kind == "matrix":
            page.figure(F.similarity_matrix(np.asarray(v, dtype=float), f.title), f.name,
                        f"{what}, for every pair of the stream states x_0..x_L, at {at}.")
        else:
            page.figure(F.deletion_bars(range(1, len(v) + 1), v, f.title), f.name,
                        f"{what} (full model at {at}: {num(res.get('val_loss'))}).")


def measured_at(ck: dict[str, Any] | None) -> str:
    """'step 400' of a checkpoint record (``RunDir.checkpoint_identity``), its weights' hash without a step."""
    if not ck:
        return "an unrecorded step"
    return f"step {num(ck['step'])}" if isinstance(ck.get("step"), int) else f"weights {str(ck.get('sha256'))[:12]}"


def current(res: dict[str, Any], now: dict[str, Any] | None) -> bool:
    """Whether an analysis measured the checkpoint the run has now (by its weights' sha256);
    a run without a checkpoint left cannot tell, and keeps what it has."""
    return now is None or res.get("checkpoint") == now


def analysis_of(run_dir: Path, out_dir: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the analysis a page draws, the checkpoint the run's analysis would measure now): of the
    places an analysis.json may be, the first that measured that checkpoint, else the first
    readable one (stale: the page says so)."""
    now = RunDir(run_dir).checkpoint_identity()
    found = [res for p in analysis_places(run_dir, out_dir) if (res := _read(p)) is not None]
    return next((r for r in found if current(r, now)), found[0] if found else None), now


def _read(path: Path) -> dict[str, Any] | None:
    try:
        res = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except ValueError:  # not JSON, or not UTF-8 text
        return None  # a damaged analysis counts as none: prepare measures again
    return res if isinstance(res, dict) else None


def analysis_figures() -> list[tuple[str, Any, Any]]:
    """(key, statistic, figure) of each layer-section figure a registered analyze statistic declares."""
    return [(s.key, s, f) for _, s in STATISTICS.items() if "analyze" in s.tools
            for f in s.figures() if f.kind in ("matrix", "bars")]


def analysis_places(run_dir: Path, out_dir: Path) -> list[Path]:
    """Where a run's analysis.json may be, in the order a page reads them."""
    return [OutDir(folder, "analysis").file(ANALYSIS_JSON) for folder in (RunDir(run_dir).analysis_dir, out_dir / ANALYSIS)]
