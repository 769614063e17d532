"""``normlab inspect --series SRC ...``: one model's checkpoints over training, each measured as
``normlab inspect`` measures one, and the page that draws every per-layer statistic against step.

A SRC is one of

| SRC | the checkpoints it gives | the step of each |
|---|---|---|
| a lab run trained with ``train.keep_checkpoints`` | ``RunDir.step_checkpoints`` (step 0: the model at initialisation) | from the folder name |
| a directory of step directories (lab checkpoints or Hugging Face ``save_pretrained`` dirs, e.g. ``normlab export`` per step) | each child with a number in its name | the last number in the name |
| one checkpoint or Hugging Face directory | itself | its state.json's step, else the last number in its name |
| ``hf:REPO@REV,REV,...``: revisions of one Hub repository (``hub.hub_series``) | each revision's snapshot in the local Hugging Face cache (never downloaded) | the N of a ``step<N>`` in the revision's name, else its place in the list |

OUT holds ``series.json`` (the settings and the checkpoints, written first), ``steps/step_NNNNNN/``
(``normlab inspect``'s own files for that checkpoint), ``series.csv`` (every step's probe.csv
rows with a ``step`` column in front) and ``report/index.html`` (``report.series_page``). A step
is measured into ``step_NNNNNN.tmp`` and renamed when complete, so a rerun (after Ctrl-C, a kill
or with more checkpoints) measures only the steps without a folder; a step's folder is never
recomputed unless ``force``. The checkpoints and settings are checked before OUT is created.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_text
from normlab.core.progress import Progress
from normlab.data.source import KNOWN
from normlab.diagnostics.rows import COLUMNS, write_csv
from normlab.inspect import inspect_subject, read_text
from normlab.inspect.hub import hub_series, hub_series_name, is_hub_series
from normlab.inspect.subject import DTYPES, load_subject
from normlab.model.io import is_hf_dir, is_model_dir
from normlab.report.pages import series_page
from normlab.run import checkpoint as checkpoint_files  # (callers name their argument `checkpoint`)
from normlab.run.dir import RunDir, note_if_written
from normlab.run.outdir import PROBE_CSV, SERIES_CSV, SERIES_JSON, STEPS, OutDir

SERIES, ROWS = SERIES_JSON, SERIES_CSV  # the series folder's entries (normlab.run.outdir.ENTRIES)
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Member:
    """One checkpoint of a series; ``label`` names a Hub revision (``REPO@REV``)."""

    step: int
    path: Path
    label: str = ""


def _step_of_name(path: Path) -> int | None:
    found = _NUMBER.findall(path.name)
    return int(found[-1]) if found else None


def _is_model_dir(p: Path) -> bool:
    """A lab checkpoint or model directory, or a Hugging Face one."""

    return p.is_dir() and (is_model_dir(p) or is_hf_dir(p))


def _one(p: Path) -> Member:
    step = checkpoint_files.step_of(p)  # the checkpoint's own record, else the number in its name
    step = step if step is not None else _step_of_name(p)
    if step is None:
        raise UserError(f"--series {p}: cannot tell its training step (no state.json, no number in its name); "
                        "name the folder after its step, e.g. step_100")
    return Member(step, p)


def members(sources: list[str]) -> list[Member]:
    """The checkpoints of the series SRCs (module docstring), in step order; a step given
    twice, or fewer than two steps, is an error."""

    out: list[Member] = []
    for src in sources:
        if is_hub_series(src):
            out += [Member(s, f, label) for s, f, label in hub_series(src)]
            continue
        p = Path(src)
        if not p.is_dir():
            raise UserError(f"--series {src}: no such directory (a run, a directory of step checkpoints, "
                            "or one checkpoint)")
        run = RunDir(p)
        if run.is_run() and not _is_model_dir(p):  # a lab run (a Hugging Face dir has a config.json too)
            note_if_written(p, "inspect --series")  # a reader: it never locks, and says so
            run.config("--series")  # its data is measured on: damage is refused before OUT is made
            kept = run.step_checkpoints()
            if not kept:
                raise UserError(f"--series {src}: the run kept no step checkpoints (checkpoints/step_NNNNNN); "
                                "train it with --set train.keep_checkpoints=true")
            out += [Member(s, f) for s, f in kept]
        elif _is_model_dir(p):
            out.append(_one(p))
        else:
            kids = [c for c in sorted(p.iterdir()) if _is_model_dir(c) and _step_of_name(c) is not None]
            if not kids:
                raise UserError(f"--series {src}: neither a run, a checkpoint, nor a directory of step "
                                "checkpoints (subdirectories with a number in their name, e.g. step_100)")
            out += [Member(_step_of_name(c) or 0, c) for c in kids]
    seen: dict[int, str] = {}
    for m in out:
        if m.step in seen:
            raise UserError(f"--series: step {m.step} is given twice ({seen[m.step]} and {m.label or m.path}); "
                            "give each checkpoint once")
        seen[m.step] = m.label or str(m.path)
    if len(out) < 2:
        raise UserError(f"--series: {len(out)} checkpoint found; a series needs at least 2 (give more --series)")
    return sorted(out, key=lambda m: m.step)


def source_name(src: str) -> str:
    """A SRC's name: its folder's, or a Hub repository's (``pythia-70m``)."""
    return hub_series_name(src) if is_hub_series(src) else Path(src.rstrip("/")).resolve().name


def default_out(sources: list[str]) -> Path:
    """``inspect/<first SRC's name>-over-training``: apart from ``inspect/<name>`` (what a plain
    ``normlab inspect`` of the same run writes), and no ``series-series`` for a run named series."""
    return Path("inspect") / f"{source_name(sources[0])}-over-training"


def step_dir(out: Path, step: int) -> Path:
    return OutDir(out, "series").step_dir(step)


def _plan(out: Path, name: str, settings: dict[str, Any], chosen: list[Member], force: bool) -> None:
    """Write (or check, on a rerun) OUT/series.json; ``force`` starts over."""

    meta = out / SERIES
    if OutDir(out, "series").contents():
        if force:
            shutil.rmtree(out / STEPS, ignore_errors=True)
        elif not meta.is_file():
            raise UserError(f"--out {out}: already exists and holds no series; choose another or pass --force")
        else:
            try:
                old = json.loads(meta.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                raise UserError(f"--out {out}: {SERIES} is damaged; pass --force to measure again") from None
            if old.get("settings") != settings:
                diff = ", ".join(f"{k} {old.get('settings', {}).get(k)!r} -> {v!r}" for k, v in settings.items()
                                 if old.get("settings", {}).get(k) != v)
                raise UserError(f"--out {out}: measured with other settings ({diff}); use another --out, "
                                "or --force to measure every step again")
            was = {int(k): v for k, v in old.get("sources", {}).items()}
            for m in chosen:
                if m.step in was and was[m.step] != str(m.path.resolve()) and step_dir(out, m.step).is_dir():
                    raise UserError(f"--out {out}: step {m.step} was measured from {was[m.step]}, not {m.path}; "
                                    "use another --out, or --force")
            labels = old.get("revisions", {})
            chosen = [*chosen, *(Member(s, Path(p), labels.get(str(s), "")) for s, p in was.items()
                                 if s not in {m.step for m in chosen})]
    chosen = sorted(chosen, key=lambda m: m.step)
    doc = {"name": name, "settings": settings, "sources": {str(m.step): str(m.path.resolve()) for m in chosen}}
    if any(m.label for m in chosen):  # Hub revisions: REPO@REV of each step (the page shows it)
        doc["revisions"] = {str(m.step): m.label for m in chosen if m.label}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(meta, json.dumps(doc, indent=2))


def inspect_series(sources: list[str], out: str | Path, text: str | None = None, *, context: int | None = None,
                   max_tokens: int = 2048, dtype: str = "float32", device: str = "cpu", seed: int = 0,
                   data_dir: str | None = None, quiet: bool = False, force: bool = False,
                   page: bool = True) -> dict[str, Any]:
    """Measure every checkpoint of the SRCs into OUT/steps/ (skipping finished steps), write
    OUT/series.csv and, with ``page``, OUT/report/index.html. ``text`` None measures a lab
    run's checkpoints on the run's own validation split (``inspect.measured_ids``). Returns
    {"steps": every step, "measured": the steps measured by this call, "page": the page or
    None, "data": the data the measured steps were measured on}."""

    if dtype not in DTYPES:
        raise UserError(f"--dtype {dtype}: use one of {', '.join(DTYPES)}")
    if max_tokens < 2 or (context is not None and context < 2):
        raise UserError("--max-tokens and --context must be >= 2")
    out = Path(out)
    chosen = members(sources)
    if text is not None:
        read_text(text, data_dir)  # a missing --text fails before OUT is made
    # text None: each checkpoint of a lab run is measured on the run's own validation split
    named = text is None or (text in KNOWN and not Path(text).exists())
    settings = {"text": text if text is None or named else str(Path(text).resolve()), "context": context, "max_tokens": max_tokens,
                "dtype": dtype, "device": device, "seed": seed}
    name = source_name(sources[0]) if len(sources) == 1 else chosen[0].label or chosen[0].path.name
    with OutDir(out, "series").writing("--out"):  # one writer: a second `inspect --series` into OUT is refused
        return _measure(out, name, settings, chosen, force, text, context, max_tokens, dtype, device, seed,
                        data_dir, quiet, page)


def _measure(out: Path, name: str, settings: dict[str, Any], chosen: list[Member], force: bool, text: str | None,
             context: int | None, max_tokens: int, dtype: str, device: str, seed: int, data_dir: str | None,
             quiet: bool, page: bool) -> dict[str, Any]:
    """``inspect_series``'s work, into the folder it holds."""

    _plan(out, name, settings, chosen, force)
    todo = [m for m in chosen if not step_dir(out, m.step).is_dir()]
    measured: list[int] = []
    used: list[str] = []
    with Progress("normlab inspect", enabled=not quiet) as bar:
        bar.add("checkpoint", len(chosen), done=len(chosen) - len(todo))
        if len(todo) < len(chosen):
            bar.note(f"{len(chosen) - len(todo)} of {len(chosen)} steps already measured in {out}"
                     + ("; measuring the rest" if todo else "; nothing to measure"))
        for m in todo:
            bar.item(f"step {m.step} ({m.label or m.path.name})")
            bar.start("checkpoint")
            tmp = step_dir(out, m.step).with_name(step_dir(out, m.step).name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)  # what an interrupted run left
            subject = load_subject(str(m.path), dtype, device, context)
            got = inspect_subject(subject, tmp, text, max_tokens=max_tokens, seed=seed, data_dir=data_dir,
                                  quiet=True, settings={"model": str(m.path), "dtype": dtype, "device": device})
            if got["text"] not in used:  # say which data, once per source (a lab run: its own)
                used.append(got["text"])
                bar.note(f"measuring on {got['text']}")
            tmp.rename(step_dir(out, m.step))
            measured.append(m.step)
            bar.advance("checkpoint")
    steps = write_rows(out)
    path = None
    if page:
        path = series_page(out, progress=not quiet)
    return {"steps": steps, "measured": measured, "page": path, "data": used}


def write_rows(out: Path) -> list[int]:
    """OUT/series.csv from every finished step's probe.csv (``step`` first); returns the steps.
    Every step must be the same model: one number of layers."""
    import csv

    meta = json.loads((out / SERIES).read_text(encoding="utf-8"))
    steps = sorted(int(s) for s in meta["sources"] if step_dir(out, int(s)).is_dir())
    rows: list[dict[str, Any]] = []
    depth: dict[int, int] = {}
    for s in steps:
        with OutDir(step_dir(out, s), "inspect").file(PROBE_CSV).open(newline="", encoding="utf-8") as fh:
            got = [{"step": s, **r} for r in csv.DictReader(fh)]
        if got:
            depth[s] = int(got[0]["n_layer"])
        rows += got
    if len(set(depth.values())) > 1:
        a, b = sorted(depth, key=lambda s: depth[s])[::len(depth) - 1]
        raise UserError(f"--series: step {a} has {depth[a]} blocks but step {b} has {depth[b]}; "
                        "a series is the checkpoints of one model")
    write_csv(rows, out / ROWS, ("step", *COLUMNS))
    return steps


__all__ = ["Member", "inspect_series", "members", "step_dir", "write_rows"]
