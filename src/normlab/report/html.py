"""A self-contained HTML page: inline CSS, PNG figures embedded as base64, no scripts
that fetch anything, so it opens from file:// on a machine without network.

A page is a list of sections; each figure is also kept as PNG and SVG beside the page
(``report/figures/``) and linked, so readers can take the vector version.
"""

from __future__ import annotations

import base64
import html
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from normlab.report import style

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em} h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em} th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:1em 0;display:inline-block;vertical-align:top;max-width:100%} figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85em;color:#555;max-width:640px} pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.8em}
.supported{color:#0a7d28;font-weight:600} .not-supported{color:#b00000;font-weight:600} .inconclusive{color:#a06000;font-weight:600}
.muted{color:#777;font-size:.85em}
"""


def esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def fmt(v: Any, digits: int = 4) -> str:
    """Numbers to short text; everything else through str()."""
    if isinstance(v, bool) or v is None:
        return "-" if v is None else str(v)
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


@dataclass
class Page:
    """Collects sections and figures, then writes ``out_dir/index.html``."""

    title: str
    out_dir: Path
    parts: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)

    @property
    def fig_dir(self) -> Path:
        return self.out_dir / "figures"

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

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], raw_cols: Sequence[int] = ()) -> None:
        """A table; numeric cells right-aligned; columns in ``raw_cols`` hold trusted markup."""
        out = ["<table><thead><tr>", *(f"<th>{esc(h)}</th>" for h in header), "</tr></thead><tbody>"]
        for row in rows:
            out.append("<tr>")
            for i, v in enumerate(row):
                num = isinstance(v, (int, float)) and not isinstance(v, bool)
                cell = v if i in raw_cols else esc(fmt(v))
                out.append(f'<td class="num">{cell}</td>' if num else f"<td>{cell}</td>")
            out.append("</tr>")
        out.append("</tbody></table>")
        self.parts.append("".join(out))

    def figure(self, fig: Any, name: str, caption: str) -> Path:
        """Save ``fig`` as PNG + SVG, embed the PNG (base64) with a caption; closes ``fig``."""
        png = style.save(fig, self.fig_dir, name)
        style.close(fig)
        self.figures.append(png)
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        rel = f"figures/{name}"
        self.parts.append(
            f'<figure id="fig-{esc(name)}"><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
            f'<figcaption>{esc(caption)} <a href="{esc(rel)}.png">PNG</a> · <a href="{esc(rel)}.svg">SVG</a>'
            f"</figcaption></figure>")
        return png

    def versions(self) -> None:
        """The software that produced the page (the exact configurations are shown by callers)."""
        import matplotlib
        import numpy

        from normlab import __version__

        rows = [("normlab", __version__), ("python", platform.python_version()),
                ("numpy", numpy.__version__), ("matplotlib", matplotlib.__version__)]
        try:
            import torch

            rows.append(("torch", torch.__version__))
        except ImportError:  # pragma: no cover - torch is a hard dependency
            pass
        self.heading("Versions", "versions")
        self.table(["package", "version"], rows)

    def write(self) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        body = "\n".join(self.parts)
        doc = (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
               f'<meta name="viewport" content="width=device-width,initial-scale=1">'
               f"<title>{esc(self.title)}</title><style>{CSS}</style></head>\n"
               f"<body><h1>{esc(self.title)}</h1>\n{body}\n</body></html>\n")
        path = self.out_dir / "index.html"
        tmp = path.with_suffix(".html.tmp")
        tmp.write_text(doc, encoding="utf-8")
        tmp.replace(path)  # readers never see a half-written page
        return path
