"""Claims output: a terminal table, claims.json and an HTML page in the report style."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from normlab.report.html import Page, esc


def print_table(records: list[dict[str, Any]], width: int = 100) -> None:
    """id | verdict | numbers, wrapped to ``width`` columns."""
    print(f"{'claim':<22} {'verdict':<14} measured")
    print("-" * width)
    for r in records:
        lines = textwrap.wrap(r["summary"], width - 38) or [""]
        print(f"{r['id']:<22} {r['verdict']:<14} {lines[0]}")
        for line in lines[1:]:
            print(" " * 38 + line)


def write_outputs(records: list[dict[str, Any]], out: Path, probe: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "claims.json").write_text(json.dumps({"probe": probe, "claims": records}, indent=2, default=float))
    page = Page("normlab claims check", out)
    page.text("Each claim as its source puts it, the experiment that tests it, the decision rule and the "
              "verdict with the measured numbers. Figures below; each verdict links to its evidence.")
    rows = []
    for r in records:
        cls = r["verdict"].replace(" ", "-")
        link = f' (<a href="#fig-{esc(r["figure"])}">figure</a>)' if r.get("figure") else ""
        rows.append([esc(r["id"]), f'<span class="{cls}">{esc(r["verdict"])}</span>{link}',
                     esc(r["summary"]), esc(r["source"])])
    page.table(["claim", "verdict", "measured", "source"], rows, raw_cols=(0, 1, 2, 3))
    page.heading("Claims in full", "details")
    for r in records:
        page.raw(f'<h3 id="claim-{esc(r["id"])}">{esc(r["id"])}: '
                 f'<span class="{r["verdict"].replace(" ", "-")}">{esc(r["verdict"])}</span></h3>')
        page.table(["field", "value"], [[k, r[k]] for k in
                                         ("statement", "source", "experiment", "quantity", "rule", "summary", "spread")])
    page.heading("Evidence figures", "figures")
    import base64

    for name in dict.fromkeys(r["figure"] for r in records if r.get("figure")):
        png = out / "figures" / f"{name}.png"
        if png.is_file():
            data = base64.b64encode(png.read_bytes()).decode("ascii")
            page.raw(f'<figure id="fig-{esc(name)}"><img alt="{esc(name)}" src="data:image/png;base64,{data}">'
                     f'<figcaption>{esc(name)} <a href="figures/{esc(name)}.png">PNG</a> · '
                     f'<a href="figures/{esc(name)}.svg">SVG</a></figcaption></figure>')
    page.heading("Experiment", "experiment")
    page.pre(json.dumps(probe, indent=2))
    page.versions()
    page.write()
