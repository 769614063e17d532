"""What a page is about, decided in one place: its kind, its title and the question it opens with.

| kind | what the directory holds | recognised by |
|---|---|---|
| run | one training run | config.json + metrics.jsonl |
| probe | ``normlab probe``: models at initialisation over depths and seeds | probe.csv |
| inspect | ``normlab inspect``: one trained checkpoint under the lab's statistics | probe.csv + a summary.json naming the model's family |
| study | a study store | study.sqlite |
| stability | a stability map: a study of outcomes over lr x depth x warm-up | study.sqlite whose spec has frontier axes (``frontier_axes``) or is named in ``STABILITY_STUDIES`` |
| demo | ``normlab demo``: Pre-LN vs Post-LN with per-step curves and a seed-robust verdict | study.sqlite whose spec is named in ``DEMO_STUDIES`` |
| compare | several of one kind on shared axes | (``normlab report A B ...``) |
| series | ``normlab inspect --series``: one model's checkpoints over training | series.csv + series.json |

The readers (``load.detect``) know four file formats; an inspected checkpoint is written
in the probe's format. Each folder's marker (``normlab.json``, ``normlab.run.outdir``) names its
kind; a folder written before markers is told apart from a probe at initialisation by its
summary.json.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from normlab.report.html import Page
from normlab.report.load import detect
from normlab.run.dir import folder_kind
from normlab.run.outdir import SUMMARY, OutDir, default_page
from normlab.study.store import Store

KINDS = ("run", "probe", "inspect", "study", "stability", "demo", "compare", "series")

# Studies whose page is the stability map (``report.stability_page``) whatever their axes: the
# claims' map studies, whose smallest scales have too few lrs for ``frontier_axes``.
STABILITY_STUDIES = ("stability-map", "stability-frontier", "frontier-ends", "stability-map-width")
MIN_LRS = 3  # fewer lrs on a line cannot place a transition (the page draws no frontier either)
# Studies whose page is the demo's (``report.demo_page``): per-step curves, a verdict by rule.
DEMO_STUDIES = ("pre-vs-post-demo",)

# The question each preset study asks, answered first on its page (``study_answer``): the
# axis whose values are contrasted, within each setting of the other scientific axes. A
# study without an entry asks its spec's description, or which setting is best.
STUDY_QUESTIONS: dict[str, tuple[str, str]] = {
    "pre-vs-post": ("Does Pre-LN reach a lower validation loss than Post-LN at the same settings, "
                    "with and without warm-up (seed 002; Xiong et al. 2020)?", "model.placement"),
    "xiong-warmup": ("Does Post-LN need learning-rate warm-up where Pre-LN does not, at each peak "
                     "learning rate (Xiong et al. 2020)?", "optim.warmup_steps"),
    "lr-sensitivity": ("How much does the final loss depend on the learning rate for Pre-LN, Pre-LN with "
                       "QK-norm and Post-LN (Wortsman et al. 2023)?", "model.placement"),
    "zloss": ("Does the z-loss change the loss it is meant to leave alone (PaLM)?", "optim.z_loss"),
    "depth": ("Which placements train at depth without warm-up?", "model.placement"),
    "deep-stability": ("Which placements train at depth 48 without warm-up where Post-LN fails "
                       "(DeepNet, Admin, sandwich)?", "model.placement"),
    "collapse": ("Do deep layers become similar, and which placements avoid it?", "model.placement"),
    "pre-vs-post-demo": ("Does Pre-LN train faster and lower than Post-LN with identical hyper-parameters, and "
                         "does Post-LN need learning-rate warm-up where Pre-LN does not (seed 002; Xiong et al. "
                         "2020)?", "model.placement"),
    "stability-map": ("Where in learning rate x depth x warm-up does each placement train, stall at the "
                      "unigram loss, or diverge?", "model.placement"),
    "stability-frontier": ("Up to which learning rate does each placement train, at each depth, with and without "
                           "warm-up, and at each horizon?", "model.placement"),
    "stability-map-width": ("Where in learning rate x width does each placement train, under standard "
                            "parametrisation and under muP?", "model.placement"),
}


@dataclass(frozen=True)
class Heading:
    """The page's title (also the browser tab's) and its opening question."""

    title: str
    question: str


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the reader of the page's kind reports a damaged file in its own words


def inspected(path: str | Path) -> bool:
    """True for the output of ``normlab inspect``: its marker says so, or, in a folder written
    before markers, its summary.json names the model and its family (a probe's summary holds
    depth fits instead)."""

    marked = folder_kind(path)
    if marked in ("probe", "inspect"):
        return marked == "inspect"
    s = _json(OutDir(path, "inspect").file(SUMMARY))
    return isinstance(s, dict) and isinstance(s.get("model"), str) and "family" in s


def page_kind(path: str | Path) -> str:
    """'run', 'probe', 'inspect', 'study', 'stability', 'demo' or 'series' for a directory the lab wrote
    (a UserError otherwise)."""

    kind = detect(path)
    if kind == "study":
        spec = _json(Store.spec_path(path))
        spec = spec if isinstance(spec, dict) else {}
        if spec.get("name") in DEMO_STUDIES:
            return "demo"
        return "stability" if spec.get("name") in STABILITY_STUDIES or frontier_axes(spec) else kind
    return "inspect" if kind == "probe" and inspected(path) else kind


def frontier_axes(spec: dict[str, Any]) -> bool:
    """Whether a study's outcomes place a critical lr, whatever its name: training trials over an
    lr axis of at least ``MIN_LRS`` values (its own or a zip group's), at least two seeds (the
    critical lr is where half of them train), and a constant lr after warm-up in its base (the
    stability maps' schedule: only then is a run's outcome by step H that of any longer run,
    which the horizons and the extensions of stalled runs read)."""
    lrs = list((spec.get("axes") or {}).get("optim.lr") or [])
    lrs += [v for g in spec.get("zip") or [] for v in g.get("optim.lr", [])]
    optim = (spec.get("base") or {}).get("optim") or {}
    return (spec.get("trial", "train") == "train" and len(set(lrs)) >= MIN_LRS and len(spec.get("seeds") or []) >= 2
            and optim.get("schedule") == "constant")


def still_written(who: str) -> str:
    """The note opening a page of a folder another process still writes (``who``: its holder)."""
    return f"Still being written by {who}: this page shows it as it was when drawn; rerun normlab report later."


def study_question(spec: dict[str, Any]) -> tuple[str, str | None]:
    """(question, contrasted axis) of a study: its preset's (a preset's spec carries its name),
    else its description, else the generic one (no contrast: the page ranks the settings)."""
    if spec.get("name") in STUDY_QUESTIONS:
        return STUDY_QUESTIONS[spec["name"]]
    if frontier_axes(spec) and not spec.get("description"):
        return STUDY_QUESTIONS["stability-frontier"]
    metric = str(spec.get("metric", "best_val_loss")).replace("_", " ")
    sci = ", ".join(spec.get("scientific") or []) or "the axes"
    return spec.get("description") or f"Which setting of {sci} gives the lowest {metric}?", None


def heading(kind: str, **facts: Any) -> Heading:
    """Title and question of a page of ``kind``; ``facts`` are the words each kind needs."""
    f = facts
    if kind == "run":
        on = f" on {f['corpus']}" if f.get("corpus") else ""
        return Heading(f"Training run {f['name']} ({f['label']})", f"How far does {f['what']} get{on}?")
    if kind == "probe":
        return Heading(f"Probe at initialisation: {f['name']}",
                       f"How do gradients and activations at initialisation scale with depth ({f['what']})?")
    if kind == "inspect":
        return Heading(f"Inspected checkpoint: {f['model']}",
                       f"What does each block of {f['model']} ({f['what']}) do to the residual stream on "
                       f"{f['text']}, and which blocks matter most for its loss?")
    if kind == "study":
        return Heading(f"Study {f['name']}", f["question"])
    if kind == "stability":
        return Heading(f"Stability map: study {f['name']}", f["question"])
    if kind == "demo":
        return Heading(f"Pre-LN vs Post-LN: study {f['name']}", f["question"])
    if kind == "compare":  # the names only when they are short: the question line says what each one is
        names = " vs ".join(f["names"])
        return Heading(f"Comparison of {f['what']}: {names}" if len(names) <= 40 else
                       f"Comparison of {len(f['names'])} {f['what']}", f["question"])
    if kind == "series":
        return Heading(f"Checkpoint series: {f['name']}",
                       f"How do the layer statistics of {f['name']} change from checkpoint to checkpoint "
                       f"({f['what']})?")
    raise ValueError(f"unknown page kind {kind!r}; one of {', '.join(KINDS)}")


__all__ = ["DEMO_STUDIES", "KINDS", "MIN_LRS", "STABILITY_STUDIES", "STUDY_QUESTIONS", "Heading", "heading", "inspected",
           "frontier_axes", "open_study_page", "page_kind", "still_written", "study_question"]


def open_study_page(study: Any, kind: str, progress: bool, out: Path | None,
                    none_yet: str) -> tuple[Page, Heading, list[Any]]:
    """The start every study page shares: its heading, its Page (OUT or STORE/report) and the
    trials with an outcome; with none, the page says ``none_yet`` (the caller checks
    ``finished`` and writes it)."""
    spec = study.spec
    question, _ = study_question(spec)
    head = heading(kind, name=spec.get("name", study.path.name), question=question)
    page = Page(head.title, out or default_page(study.path), progress=progress)
    finished = [t for t in study.trials if t.status in ("completed", "diverged")]
    if not finished:
        page.lead(head.question, none_yet)
        page.versions()
    return page, head, finished
