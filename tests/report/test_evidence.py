"""The evidence page (``normlab claims``) read on a laptop: forest-plot text of at least 9 pt as
displayed at 1366 px, legends beside the data, no empty header row, the depth figure's
legend quoting the table's effects, and a re-render from claims.json alone."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_pages import browse  # noqa: E402

EVIDENCE = Path(__file__).parents[2] / "docs" / "evidence"


def _claims_dir(tmp: Path) -> Path:
    """A claims output of two published records (one-sample slopes; two-sample and rate parts), from the
    exploratory run, which has both kinds."""
    data = json.loads((EVIDENCE / "exploratory" / "claims.json").read_text())
    keep = [r for r in data["claims"] if r["id"] in ("xiong-thm1", "seed002-pet-project")]
    for r in keep:
        r.pop("figure", None)  # the context figure needs the probe grid, not in claims.json
    out = tmp / "claims"
    out.mkdir()
    (out / "claims.json").write_text(json.dumps({"meta": data["meta"], "claims": keep}))
    return out


def _min_text_pt(fig) -> float:  # noqa: ANN001
    from matplotlib.text import Text

    return min(t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip())


def test_evidence_page_reads_at_laptop_width(tmp_path: Path) -> None:
    from normlab.claims.figures import effect_fig
    from normlab.claims.output import render_from_json

    out = _claims_dir(tmp_path)
    page = render_from_json(out)
    html = page.read_text()
    assert not re.search(r"<thead><tr>(<th>\s*</th>)+</tr></thead>", html)  # no empty header row
    assert html.count("<thead>") == 1 + 2 * 2 + 1  # the summary, per claim its parts and its regime, the versions
    records = json.loads((out / "claims.json").read_text())["claims"]
    assert sorted(p.stem for p in (out / "figures").glob("*.png")) == sorted(r["effect_figure"] for r in records)
    assert "diamond: the number in the table" in html
    lay = browse(page, tmp_path, "evidence-1366")
    assert not lay["errors"] and lay["bad"] == 0 and lay["n"] == len(records), lay
    assert lay["wide"] == 0 and not lay["hscroll"], lay
    for r in records:
        fig = effect_fig(r)
        natural = fig.get_size_inches()[0] * 110  # savefig.dpi of the report style
        shown = _min_text_pt(fig) * lay["minw"] / natural  # pt as displayed at 1366 px
        assert shown >= 9.0, (r["id"], shown)
        fig.canvas.draw()  # the legend sits below every panel, over no interval
        box = fig.legends[0].get_window_extent()
        assert all(box.y1 <= ax.get_window_extent().y0 for ax in fig.axes), r["id"]


def test_render_from_json_refuses_a_directory_without_claims(tmp_path: Path) -> None:
    from normlab.claims.output import render_from_json
    from normlab.core.errors import UserError

    with pytest.raises(UserError, match="claims.json: no such file"):
        render_from_json(tmp_path)
    (tmp_path / "claims.json").write_text('{"meta": {}')
    with pytest.raises(UserError, match="not a claims.json"):
        render_from_json(tmp_path)
    assert not (tmp_path / "index.html").exists()


@pytest.mark.parametrize("where", ["", "seed"])
def test_published_evidence_pages_are_re_rendered(where: str, tmp_path: Path) -> None:
    """docs/evidence (and seed/): no empty header row, every figure the page names is there,
    and the depth figure's legend quotes the table's slopes."""
    root = EVIDENCE / where
    html = (root / "index.html").read_text()
    assert "<th></th>" not in html
    data = json.loads((root / "claims.json").read_text())
    for r in data["claims"]:
        for name in [r["effect_figure"], *([r["figure"]] if r.get("figure") else [])]:
            assert (root / "figures" / f"{name}.png").is_file() and (root / "figures" / f"{name}.svg").is_file()
    xiong = next((r for r in data["claims"] if r["id"] == "xiong-thm1"), None)
    if xiong:
        svg = (root / "figures" / "xiong_w2_depth.svg").read_text()
        for p in xiong["parts"]:
            assert f"{p['id']}: slope {p['effect_text']}" in svg, p["id"]
    page = tmp_path / "page"
    shutil.copytree(root, page)
    lay = browse(page / "index.html", tmp_path, f"published-{where or 'cpu'}")
    assert not lay["errors"] and lay["bad"] == 0 and lay["minw"] >= 600, lay


def test_a_published_page_links_its_figures_and_still_shows_them(tmp_path: Path) -> None:
    """render_from_json(embed=False) (and `claims --link-figures`) writes the page with links to
    OUT/figures/ instead of base64 copies: every image still decodes in a browser."""
    from normlab.claims.output import render_from_json

    out = _claims_dir(tmp_path)
    embedded = render_from_json(out).stat().st_size
    page = render_from_json(out, embed=False)
    html = page.read_text()
    assert "data:image" not in html and page.stat().st_size < embedded
    srcs = re.findall(r'<img alt="[^"]*" src="([^"]+)"', html)
    records = json.loads((out / "claims.json").read_text())["claims"]
    assert sorted(srcs) == sorted(f"figures/{r['effect_figure']}.png" for r in records)
    lay = browse(page, tmp_path, "evidence-linked")
    assert not lay["errors"] and lay["bad"] == 0 and lay["n"] == len(records), lay


def _table(text: str) -> list[str]:
    """The claims table of a markdown text: from its header row to the first line not a row."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("| claim | verdict"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def test_the_evidence_table_is_its_claims_json() -> None:
    """claims.md is claims.json's table, led by the Holm-adjusted verdict (the unadjusted beside)."""
    from normlab.claims.output import holm_verdicts, markdown_table

    records = json.loads((EVIDENCE / "claims.json").read_text())["claims"]
    holm_verdicts(records)
    assert _table((EVIDENCE / "claims.md").read_text()) == _table(markdown_table(records))
    assert _table(markdown_table(records))[0].startswith("| claim | verdict (Holm-adjusted) | unadjusted |")


@pytest.mark.parametrize("run", ["", "confirm-2a", "confirm-2b", "confirm-liu", "confirm-ln",
                                 "confirm-seed"])
def test_the_readme_tables_are_the_confirmatory_runs_claims_json(run: str) -> None:
    """README.md's tables are the confirmatory runs' claims.json, row for row (their claims.md):
    run 1's first, then run 2a's and 2b's, liu-amplification's rerun, seed001-ln-amplifies' run and the seed-scale
    run's."""
    from normlab.claims.output import holm_verdicts, markdown_table

    records = json.loads((EVIDENCE / run / "claims.json").read_text())["claims"]
    holm_verdicts(records)
    readme = (EVIDENCE.parents[1] / "README.md").read_text()
    want = "\n".join(_table(markdown_table(records)))
    assert want in readme
    if not run:
        assert _table(readme) == _table(markdown_table(records))  # the table the evidence leads with
    assert _table((EVIDENCE / run / "claims.md").read_text()) == _table(markdown_table(records))
