"""Claims output: Holm adjustment over every part, claims.json, the verdict history, the
evidence page with one figure per claim, and the terminal table."""

from __future__ import annotations

import json
import platform
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import normlab
from normlab.claims.figures import CONTEXT_CAPTIONS, effect_figure, quick_context_figures
from normlab.claims.folder import CLAIMS_JSON, CLAIMS_MD, FIGURES, INDEX
from normlab.claims.history import update_history  # (re-exported: history.jsonl is claims/history.py's)
from normlab.claims.holm import adjust, holm_verdicts  # (re-exported: the outputs' Holm step)
from normlab.claims.page_regime import check_rows, mode_sentence, regime_rows, regime_sentence
from normlab.claims.registered import summary, tag
from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_text
from normlab.report.html import Page, esc


def headline(r: dict[str, Any]) -> str:
    """The verdict the tables lead with: the family-adjusted one (Holm over every part of the run)."""
    return str(r.get("verdict_holm") or r["verdict"])


def verdict_text(r: dict[str, Any]) -> str:
    """The claim's adjusted verdict as the tables show it: 'supported', or, when the adjustment
    changes it, with the note ('inconclusive after Holm: rests on part ...'). The unadjusted
    verdict stands in its own column."""
    if not r.get("holm_note"):
        return headline(r)
    return f"{headline(r)} after Holm: {r['holm_note']}"


def provenance() -> dict[str, Any]:
    """normlab version, git revision of the source tree (when it is a checkout), versions."""
    import torch

    rev = None
    try:
        src = Path(normlab.__file__).resolve().parent
        rev = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip() or None
        if rev and subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."], capture_output=True,
                                  text=True, timeout=10).stdout.strip():
            rev += "+dirty"
    except (OSError, subprocess.SubprocessError):
        pass
    return {"normlab": normlab.__version__, "git_revision": rev, "python": platform.python_version(),
            "torch": torch.__version__, "machine": f"{platform.machine()}, {platform.processor() or platform.system()}",
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def write_outputs(records: list[dict[str, Any]], out: Path, meta: dict[str, Any], q: Any = None,
                  embed: bool = True) -> None:

    out.mkdir(parents=True, exist_ok=True)
    meta = {**meta, **provenance(), "family_size": adjust(records)}
    holm_verdicts(records)
    if q is not None:
        quick_context_figures(q, out, records)
    for r in records:
        r["effect_figure"] = effect_figure(r, out)
    update_history(records, out, meta)
    atomic_write_text(out / CLAIMS_JSON, json.dumps({"meta": meta, "claims": records}, indent=2, default=float))
    atomic_write_text(out / CLAIMS_MD, markdown_table(records))
    write_page(records, out, meta, embed)


def markdown_table(records: list[dict[str, Any]]) -> str:
    """claim | verdict | part: verdict, effect [95% interval], n per side (one row per part); a
    post-hoc part (``claims/registered.py``) is marked with the registered rule's verdict."""

    lines = ["| claim | verdict (Holm-adjusted) | unadjusted | part | part verdict | effect [95% interval] | "
             "seeds (n per side) |", "|---|---|---|---|---|---|---|"]
    for r in records:
        for i, p in enumerate(r["parts"]):
            eff = effect_cell(p["effect"])
            e = p["effect"]
            n = f"{e['n_a']}" + (f"/{e['n_b']}" if e["n_b"] is not None else "")
            dag = " †" if p.get("holm_ok") is False else ""
            lines.append(f"| {'`' + r['id'] + '`' if i == 0 else ''} | {verdict_text(r) if i == 0 else ''} | "
                         f"{r['verdict'] if i == 0 else ''} | "
                         f"{p['id']}: {p['asserts'].replace('|', chr(92) + '|')} | {p['verdict']}{dag}{tag(p)} | {eff} | {n} |")
    return "\n".join(lines) + "\n"


def effect_cell(e: dict[str, Any]) -> str:
    """'+0.12 [+0.05, +0.19]'; an open side '-inf' / '+inf'; a censored effect '> +0.3 (censored)'."""
    lo = None if e["lo"] is None else f"{e['lo']:+.3g}"
    hi = None if e["hi"] is None else f"{e['hi']:+.3g}"
    if e["estimate"] is None:
        if lo is not None and hi is None:
            return f"> {lo} (censored)"
        if hi is not None and lo is None:
            return f"< {hi} (censored)"
        return "n/a"
    if lo is None and hi is None:
        return f"{e['estimate']:+.3g}"
    return f"{e['estimate']:+.3g} [{lo or '-inf'}, {hi or '+inf'}]"


def counts(records: list[dict[str, Any]], key: Any = headline) -> dict[str, int]:
    c: dict[str, int] = {}
    for r in records:
        c[key(r)] = c.get(key(r), 0) + 1
    return c


def _badge(v: str) -> str:
    return f'<span class="{esc(v.replace(" ", "-"))}">{esc(v)}</span>'


def _verdict_html(r: dict[str, Any]) -> str:
    if not r.get("holm_note"):
        return _badge(headline(r))
    return f"{_badge(headline(r))} after Holm: {esc(r['holm_note'])}"


def write_page(records: list[dict[str, Any]], out: Path, meta: dict[str, Any], embed: bool = True) -> None:
    """OUT/index.html; ``embed=False`` links the figures in OUT/figures/ instead of embedding them."""

    page = Page("normlab claims: which statements about normalization placement hold up?", out, embed=embed)
    # verdict colours of this page (the report style knows only supported / inconclusive)
    page.raw("<style>.contradicted{color:#b00000;font-weight:600} .partly-supported{color:#6a1b9a;"
             "font-weight:600}</style>")
    if meta.get("superseded"):  # a published run a later rule or run replaces: said before anything else
        page.raw(f'<p><b>Superseded.</b> {esc(meta["superseded"])}</p>')
    c, raw = counts(records), counts(records, lambda r: r["verdict"])
    n_parts = sum(len(r["parts"]) for r in records)
    page.text(f"{len(records)} claims in {n_parts} parts, each decided by its rule from a "
              f"95% interval over seeds. After Holm's adjustment over the {meta['family_size']} parts with a "
              "p-value (the verdicts the table leads with): " + ", ".join(f"{v} {k}" for k, v in sorted(c.items())) +
              "; unadjusted: " + ", ".join(f"{v} {k}" for k, v in sorted(raw.items())) + ". A decisive part "
              "verdict that does not survive the adjustment is marked with †.")
    page.text(mode_sentence(meta))
    page.text(summary(records, meta))  # pre-registration: only what the records show
    page.text(regime_sentence(records))
    for m in meta.get("maps") or []:  # the phase diagrams the depth and warm-up claims read
        page.raw(f'<p>Stability map (trains / stalls / diverges per placement over lr x depth x warm-up): '
                 f'<a href="{esc(m)}">{esc(m)}</a></p>')
    if meta.get("training_wall_s"):
        runs = meta.get("training_runs") or []
        each = "; ".join(f"{', '.join(r['studies'])}: {r['wall_s'] / 60:.1f} min" for r in runs)
        page.text(f"Training studies at scale {meta.get('scale')}: {meta['training_wall_s'] / 60:.1f} min wall "
                  "(first trial start to last finish" + (f" of each run: {each}" if len(runs) > 1 else "") + ").")
    rows = []
    for r in records:
        parts = "<br>".join(f"{esc(p['id'])}: {_badge(p['verdict'])}{' †' if p.get('holm_ok') is False else ''}"
                            f"{esc(tag(p))} {esc(p['effect_text'])}" for p in r["parts"])
        rows.append([f'<a href="#claim-{esc(r["id"])}">{esc(r["id"])}</a>', _verdict_html(r), _badge(r["verdict"]),
                     parts, esc(r["source"])])
    page.table(["claim", "verdict (Holm-adjusted)", "unadjusted", "parts: effect [95% interval], n per side", "source"],
               rows, raw_cols=(0, 1, 2, 3, 4))
    page.heading("Claims in full", "details")
    for r in records:
        page.raw(f'<h3 id="claim-{esc(r["id"])}">{esc(r["id"])}: {_badge(headline(r))}</h3>')
        if r.get("holm_note"):
            page.text(f"{r['verdict_holm']} after Holm's adjustment (unadjusted: {r['verdict']}); the verdict "
                      f"{r['holm_note']}.")
        page.table([], [["statement", esc(r["statement"])], ["source", esc(r["source"])],
                        ["experiment", esc(r["experiment"])], ["settings", esc(r["settings"])],
                        ["rule hash", esc(r["rule_hash"])]], raw_cols=(1,))
        prow = [[esc(p["id"]), esc(p["asserts"]), esc(p["quantity"]), esc(p["rule_text"]) + "<br><i>" + esc(p["why"])
                 + "</i>" + (f"<br>{esc(p.get('registered_note', ''))}" if p.get("registered") == "post-hoc" else ""),
                 esc(p["effect_text"]), _badge(p["verdict"]) + esc(tag(p)),
                 "-" if p["p"] is None else f"{p['p']:.3g} / {p['p_holm']:.3g}"] for p in r["parts"]]
        page.table(["part", "asserts", "quantity", "rule", "effect", "verdict", "p / Holm"], prow,
                   raw_cols=(0, 1, 2, 3, 4, 5, 6))
        if regime_rows(r):
            page.table(["factor", "source's setting", "lab's setting", "lab vs source", "why"], regime_rows(r), raw_cols=(0, 1, 2, 3, 4))
        if r.get("rule_changed"):
            page.text(f"Rule changed since {r['rule_changed']['at']}: verdict then {r['rule_changed']['verdict_before']}.")
        for name in [r["effect_figure"]] + ([r["figure"]] if r.get("figure") else []):
            png = out / FIGURES / f"{name}.png"
            if png.is_file():
                page.image(png, caption(name))
    checks = check_rows(records)
    if checks:
        page.heading("Checks of the implementation", "checks")
        page.text("True by construction (an identity term of weight 1, a slope fixed by alpha and beta): they test "
                  "the code, not the literature, and are not counted among the verdicts.")
        page.table(["check", "asserts", "rule", "measured", "result", "registered"], checks,
                   raw_cols=(0, 1, 2, 3, 4, 5))
    page.heading("Run", "run")
    page.pre(json.dumps(meta, indent=2, default=str))
    page.versions()
    page.write()


def caption(name: str) -> str:
    """The caption of an evidence figure: what is drawn, and how its numbers relate to the table's."""

    if name.startswith("claim-"):
        return ("One row per part: each seed's value (dots; a two-sample effect shows each seed of one side "
                "against the other side's mean), the effect with its 95% interval over seeds (diamond: the "
                "number in the table), and the rule's reference value (dashed) or the band it must lie in (blue).")
    return CONTEXT_CAPTIONS.get(name, name)


def render_from_json(out: str | Path, q: Any = None, embed: bool = True) -> Path:
    """Rebuild OUT/index.html, OUT/claims.md and every evidence figure from OUT/claims.json alone, with no
    measuring or training and no new decision (history.jsonl and claims.json are not touched).
    The quick claims' context figures need the probe grid: they are redrawn only when ``q``
    (``claims.measure.measure``'s QuickData) is given, else the files already there are kept.
    ``embed=False`` links the figures instead of embedding them (a page published in a
    repository). A missing or damaged claims.json is a UserError."""

    out = Path(out)
    path = out / CLAIMS_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        records, meta = data["claims"], data["meta"]
        holm_verdicts(records)  # a claims.json from before the claims' Holm verdicts gets them here
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (give the --out directory of a `normlab claims` run)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a claims.json written by `normlab claims` ({e})") from None
    if q is not None:
        quick_context_figures(q, out, records)
    for r in records:
        effect_figure(r, out)  # the same file name claims.json records as effect_figure
    atomic_write_text(out / CLAIMS_MD, markdown_table(records))  # the table, as claims.json gives it
    write_page(records, out, meta, embed)
    return out / INDEX


def print_table(records: list[dict[str, Any]], width: int = 110, meta: dict[str, Any] | None = None) -> None:
    """claim | verdict | one line per part (effect [interval], n), wrapped to ``width``; then the
    pre-registration line (``meta``: claims.json's, when given)."""

    print(f"{'claim':<26} {'verdict (Holm)':<17} parts")
    print("-" * width)
    for r in records:
        lines = []
        for p in r["parts"]:
            lines += textwrap.wrap(f"{p['id']}: {p['verdict']}{' (not after Holm)' if p.get('holm_ok') is False else ''}"
                                   f"{tag(p)}, {p['effect_text']}", width - 45) or [""]
        if r.get("holm_note"):
            lines += textwrap.wrap(f"claim: unadjusted {r['verdict']}; after Holm it {r['holm_note']}", width - 45)
        print(f"{r['id']:<26} {headline(r):<17} {lines[0]}")
        for line in lines[1:]:
            print(" " * 44 + line)
    if meta is not None:
        print("\n" + textwrap.fill(summary(records, meta), width))
