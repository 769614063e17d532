"""A self-contained HTML page: inline CSS, PNG figures embedded as base64 (or linked, for a
page published beside its figures/), no scripts that fetch anything, so it opens from
file:// on a machine without network.

A page reads top-down like a talk: the question and its answer with the numbers
(``lead``), the figures that back it (consecutive figures share a grid that uses the
page's width), then tables and the exact configuration. Each figure is also kept as PNG
and SVG beside the page (``report/figures/``) and linked, so readers can take the vector
version.
"""

from __future__ import annotations

import base64
import html
import logging
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from normlab import __version__
from normlab.report import style
from normlab.report.numbers import duration, num

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1880px;
margin:0 auto;padding:1em 2.2em 3em;color:#222;line-height:1.5;font-size:16px}
h1{font-size:1.7em;margin:.4em 0 .3em} h2{font-size:1.3em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
h3{font-size:1.08em;margin:1.2em 0 .4em}
.lead{background:#f3f7fb;border-left:5px solid #0072B2;padding:.7em 1.3em;margin:.6em 0 1.2em;max-width:78em}
.lead p{margin:.45em 0;font-size:1.14em} .lead .answer{font-size:1.22em} .lead ul{margin:.3em 0 .3em 1.2em;padding:0}
.lead li{margin:.15em 0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,600px),1fr));gap:1.4em 2em;align-items:start;
margin:1em 0}
figure{margin:0;min-width:0} figure img{display:block;width:100%;max-width:980px;height:auto}
figure.wide{grid-column:1/-1} figure.wide img{width:auto;max-width:100%}
figcaption{font-size:.9em;color:#444;margin-top:.35em;max-width:60em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em} th,td{border:1px solid #ccc;padding:.28em .65em;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.82em;max-width:100%}
details{margin:.4em 0} summary{cursor:pointer;color:#0b4f8a}
.supported{color:#0a7d28;font-weight:600} .not-supported{color:#b00000;font-weight:600} .inconclusive{color:#a06000;font-weight:600} .descriptive{color:#555;font-style:italic}
.muted{color:#666;font-size:.9em}
"""


def esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def fmt(v: Any, digits: int = 4) -> str:
    """Numbers to text for people (``normlab.report.numbers.num``); everything else through str()."""
    return num(v, digits)


def _progress(msg: str) -> None:
    logging.getLogger(__name__).info(msg)  # the CLI shows it as "normlab report: ..."


@dataclass
class Page:
    """Collects sections and figures, then writes ``out_dir/index.html``.

    ``progress`` (opt-in) prints on stderr which figure is being drawn and, at the end,
    where the time went.
    """

    title: str
    out_dir: Path
    parts: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    progress: bool = False
    # False: figures are linked (figures/NAME.png beside the page) instead of embedded, for a
    # page published in a repository, where base64 copies would double every image's size
    embed: bool = True
    spent: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    @property
    def fig_dir(self) -> Path:
        return self.out_dir / "figures"

    def say(self, msg: str) -> None:
        if self.progress:
            _progress(msg)

    def charge(self, what: str, seconds: float) -> None:
        """Account ``seconds`` to ``what`` in the closing timing line."""
        self.spent[what] = self.spent.get(what, 0.0) + seconds

    def lead(self, question: str, answer: str, notes: Sequence[str] = ()) -> None:
        """The page's question and its answer with the numbers, first thing under the title."""
        items = "".join(f"<li>{esc(n)}</li>" for n in notes)
        self.parts.append(
            f'<section class="lead" id="summary"><p class="question"><b>Question.</b> {esc(question)}</p>'
            f'<p class="answer"><b>Answer.</b> {esc(answer)}</p>'
            + (f"<ul>{items}</ul>" if items else "") + "</section>")

    def heading(self, text: str, anchor: str | None = None) -> None:
        ident = f' id="{esc(anchor)}"' if anchor else ""
        self.parts.append(f"<h2{ident}>{esc(text)}</h2>")

    def text(self, text: str, cls: str | None = None) -> None:
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f"<p{c}>{esc(text)}</p>")

    def raw(self, markup: str) -> None:
        """Trusted markup built by this package (callers escape user text with ``esc``)."""
        self.parts.append(markup)

    def pre(self, text: str) -> None:
        self.parts.append(f"<pre>{esc(text)}</pre>")

    def details(self, summary: str, text: str, open_: bool = False) -> None:
        """A folded block (a configuration dump): one line until the reader opens it."""
        o = " open" if open_ else ""
        self.parts.append(f"<details{o}><summary>{esc(summary)}</summary><pre>{esc(text)}</pre></details>")

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], raw_cols: Sequence[int] = ()) -> None:
        """A table; numeric cells right-aligned and formatted by ``num``; columns in
        ``raw_cols`` hold trusted markup. A header of blank names (a two-column list of
        field and value) has no header row at all, rather than an empty one."""
        head = ["<thead><tr>", *(f"<th>{esc(h)}</th>" for h in header), "</tr></thead>"] \
            if any(str(h).strip() for h in header) else []
        out = ['<div class="scroll"><table>', *head, "<tbody>"]
        for row in rows:
            out.append("<tr>")
            for i, v in enumerate(row):
                isnum = isinstance(v, (int, float)) and not isinstance(v, bool)
                cell = v if i in raw_cols else esc(fmt(v))
                out.append(f'<td class="num">{cell}</td>' if isnum else f"<td>{cell}</td>")
            out.append("</tr>")
        out.append("</tbody></table></div>")
        self.parts.append("".join(out))

    def figure(self, fig: Any, name: str, caption: str, wide: bool = False) -> Path:
        """Save ``fig`` as PNG + SVG, embed the PNG (base64) with a caption; closes ``fig``.

        ``wide`` figures (several panels side by side) take a whole row of the grid.
        """
        self.say(f"drawing {name} ({len(self.figures) + 1})")
        t0 = time.perf_counter()
        png = style.save(fig, self.fig_dir, name)
        style.close(fig)
        self.charge("drawing figures", time.perf_counter() - t0)
        self.figures.append(png)
        self.image(png, caption, wide)
        return png

    def image(self, png: Path, caption: str, wide: bool = False) -> None:
        """A figure already saved as ``figures/NAME.png`` (and .svg) beside the page: embedded
        as base64, or linked when the page was made with ``embed=False``."""
        rel = f"figures/{png.stem}"
        src = (f"data:image/png;base64,{base64.b64encode(png.read_bytes()).decode('ascii')}" if self.embed
               else f"{esc(rel)}.png")
        cls = ' class="wide"' if wide else ""
        self.parts.append(
            f'<figure id="fig-{esc(png.stem)}"{cls}><img alt="{esc(caption)}" src="{src}">'
            f'<figcaption>{esc(caption)} <a href="{esc(rel)}.png">PNG</a> · <a href="{esc(rel)}.svg">SVG</a>'
            f"</figcaption></figure>")

    def versions(self) -> None:
        """The software that produced the page (the exact configurations are shown by callers).

        Versions come from the installed package metadata: importing torch only to print
        its version would cost more than drawing a figure.
        """
        from importlib.metadata import PackageNotFoundError, version

        rows = [("normlab", __version__), ("python", platform.python_version())]
        for pkg in ("numpy", "matplotlib", "torch"):
            try:
                rows.append((pkg, version(pkg)))
            except PackageNotFoundError:  # pragma: no cover - all three are dependencies
                rows.append((pkg, "not installed"))
        self.heading("Versions", "versions")
        self.table(["package", "version"], rows)

    def write(self) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        doc = (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
               f'<meta name="viewport" content="width=device-width,initial-scale=1">'
               f"<title>{esc(self.title)}</title><style>{CSS}</style></head>\n"
               f"<body><h1>{esc(self.title)}</h1>\n{_gridded(self.parts)}\n</body></html>\n")
        path = self.out_dir / "index.html"
        tmp = path.with_suffix(".html.tmp")
        tmp.write_text(doc, encoding="utf-8")
        tmp.replace(path)  # readers never see a half-written page
        total = time.perf_counter() - self.started
        rest = total - sum(self.spent.values())
        parts = ", ".join(f"{k} {duration(v)}" for k, v in (*self.spent.items(), ("everything else", rest)))
        self.say(f"wrote {path} ({len(self.figures)} figures in {duration(total)}: {parts})")
        return path


def _gridded(parts: list[str]) -> str:
    """Consecutive figures go into one grid, so they fill the page's width side by side."""
    out: list[str] = []
    run: list[str] = []
    for p in [*parts, ""]:
        if p.startswith("<figure"):
            run.append(p)
            continue
        if run:
            out.append('<div class="grid">' + "\n".join(run) + "</div>")
            run = []
        if p:
            out.append(p)
    return "\n".join(out)
