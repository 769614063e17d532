"""`normlab report` on a run, a probe output, a study store and a comparison of runs: each
page opens with its question and answer, then figures, then tables and configuration, and
each is opened in headless Chromium (Debian's `chromium`; skipped when absent): no console
errors, every image decoded, no figure wider than a laptop's viewport, the answer shown.

Set NORMLAB_REPORT_SHOTS=DIR to keep a copy of each page's screenshot in DIR.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402

from normlab.cli import main  # noqa: E402
from normlab.report.numbers import num, signed  # noqa: E402

VIEW = (1366, 768)  # the most common laptop screen, in CSS pixels
CHECK = """<script>window.addEventListener('load',()=>{const vw=document.documentElement.clientWidth;
const imgs=[...document.images];const r=imgs.map(i=>i.getBoundingClientRect());const a=document.querySelector('.lead .answer');
const out={n:imgs.length,bad:imgs.filter(i=>!i.complete||i.naturalWidth===0).length,vw:vw,
wide:r.filter(b=>b.right>vw+1).length,hscroll:document.documentElement.scrollWidth>vw+1,
minw:Math.min(...r.map(b=>b.width)),answer:a?a.textContent:'',height:document.documentElement.scrollHeight};
const p=document.createElement('pre');p.id='layoutcheck';p.textContent=JSON.stringify(out);document.body.appendChild(p);});
</script>"""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return exe


def browse(page: Path, tmp: Path, shot: str) -> dict:
    """Open ``page`` at a laptop's width: the layout numbers read from the DOM, then a
    screenshot of the whole page (``tmp/shot.png``, copied to $NORMLAB_REPORT_SHOTS)."""
    exe = _chromium()
    probe = page.with_name("_check.html")
    probe.write_text(page.read_text().replace("</body>", CHECK + "</body>"))
    base = [exe, *FLAGS, f"--user-data-dir={tmp / 'profile'}"]
    dom = subprocess.run([*base, f"--window-size={VIEW[0]},{VIEW[1]}", "--virtual-time-budget=5000", "--dump-dom",
                          probe.as_uri()], capture_output=True, text=True, timeout=120)
    probe.unlink()
    m = re.search(r'<pre id="layoutcheck">(.*?)</pre>', dom.stdout)
    assert m, dom.stdout[-500:]
    layout = json.loads(m[1].replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    png = tmp / f"{shot}.png"
    ss = subprocess.run([*base, f"--screenshot={png}", f"--window-size={VIEW[0]},{min(layout['height'], 9000)}",
                         page.as_uri()], capture_output=True, text=True, timeout=120)
    layout["errors"] = [ln for ln in (ss.stderr + dom.stderr).splitlines() if "CONSOLE" in ln and "ERROR" in ln.upper()]
    assert png.stat().st_size > 1000
    if os.environ.get("NORMLAB_REPORT_SHOTS"):
        keep = Path(os.environ["NORMLAB_REPORT_SHOTS"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(png, keep / png.name)
    return layout


def make(kind: str, tmp: Path) -> tuple[list[str], Path]:
    """(argv after `report`, the page it writes) for each page type."""
    if kind == "run":
        p = synth.write_run(tmp / "run", "pre", 0)
        return [str(p)], p / "report" / "index.html"
    if kind == "probe":
        p = synth.write_probe(tmp / "probe")
        return [str(p)], p / "report" / "index.html"
    if kind == "study":  # post at lr 1e-3 without warm-up: seed 1 stalls near 3.3 while 0 and 2 train
        p = synth.write_store(tmp / "study", seeds=(0, 1, 2), stall=("post", 1e-3, 0, 1))
        return [str(p)], p / "report" / "index.html"
    a = synth.write_run(tmp / "pre-run", "pre", 0)
    b = synth.write_run(tmp / "post-run", "post", 1, warmup=0)
    return [str(a), str(b), "--out", str(tmp / "cmp")], tmp / "cmp" / "index.html"


def _text(html: str) -> str:
    """The page without its embedded images (base64 would match anything)."""
    return re.sub(r'src="data:[^"]*"', "", html)


@pytest.mark.parametrize("kind", ["run", "probe", "study", "compare"])
def test_report_page(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv, page = make(kind, tmp_path)
    assert main(["report", *argv]) == 0
    cap = capsys.readouterr()
    assert cap.out.strip() == str(page)
    pngs = sorted((page.parent / "figures").glob("*.png"))
    assert pngs and all(p.with_suffix(".svg").is_file() for p in pngs)
    assert [ln for ln in cap.err.splitlines() if ln.startswith("normlab report: drawing")] == [
        f"normlab report: drawing {p} ({i})" for i, p in enumerate(_drawn(page), 1)]  # progress, figure by figure
    html = _text(page.read_text())
    assert "http://" not in html and "https://" not in html  # works offline, from file://
    assert html.count("<img") == len(pngs)
    # question and answer first, then the figures, then tables, then the configuration
    order = [html.find(s) for s in ('class="lead"', "<figure", "<table", "<details", "Versions")]
    assert -1 not in order and order == sorted(order), order
    assert "<details open" not in html  # the configuration is folded (docs/report.md, how a page reads)
    assert not re.search(r"\d\.\d{7,}|\de[+-]\d\d", re.sub(r"<details.*?</details>", "", html, flags=re.S)), \
        "a raw float reached the page"
    assert "-0.9999999999999999" not in html
    title = {"run": "Training run run (pre)", "probe": "Probe at initialisation: probe", "study": "Study pre-vs-post",
             "compare": "Comparison of 2 runs"}[kind]
    assert re.search(r"<title>(.*?)</title>", html)[1].startswith(title)
    captions = " ".join(re.findall(r"<figcaption>(.*?)</figcaption>", html))
    answer = re.search(r'<p class="answer">(.*?)</p>', html)[1]
    if kind == "run":
        assert "seed" not in captions  # one run: no talk of seeds
        assert f"to {num(synth.loss_at('pre', 0, 40) + 0.1)}" in answer
    if kind == "probe":
        fits = json.loads((page.parent.parent / "summary.json").read_text())["w2_slope"]
        for pl in ("post", "pre"):
            assert f"{pl} {signed(fits[pl]['slope'])} ± {num(fits[pl]['stderr'], 2)}" in answer
    if kind == "study":  # the preset's question (Pre-LN vs Post-LN) answered first, the ranking after it
        assert "Does Pre-LN reach a lower validation loss than Post-LN" in html
        assert answer.startswith("<b>Answer.</b> lr 0.001, warm-up 0: Pre-LN ") and "vs Post-LN" in answer
        assert "Pre-LN lower by" in answer and "95% interval [" in answer
        notes = re.search(r'<section class="lead".*?</section>', html, flags=re.S)[0]
        assert "Best setting overall: pre lr=0.003 warmup_steps=0 is best" in notes and "over 3 seeds" in notes
        assert "post lr=0.001 warmup_steps=0: 1 of 3 seeds stalled" in notes
        assert "post lr=0.003 warmup_steps=0: 2 of 3 seeds diverged" not in notes and "3 of 3 seeds diverged" in notes
        assert "Stalled seeds" in captions and "thin lines are single seeds (3 per setting)" in captions
    if kind == "compare":
        assert "placement=pre, optim.warmup_steps=10, seed=0 is lowest" in answer
        assert "below placement=post, optim.warmup_steps=0, seed=1" in answer
        assert "They differ in model.placement, optim.warmup_steps, seed" in html
        assert "one run per line" in captions
    layout = browse(page, tmp_path, kind)
    assert not layout["errors"], layout["errors"]
    assert layout["n"] == len(pngs) and layout["bad"] == 0
    assert layout["wide"] == 0 and not layout["hscroll"], layout  # nothing wider than the viewport
    assert layout["minw"] >= 500, layout  # two figures side by side at most: readable on a laptop
    assert "Answer." in layout["answer"] and re.search(r"\d", layout["answer"])


def _drawn(page: Path) -> list[str]:
    return re.findall(r'<figure id="fig-([^"]+)"', page.read_text())


def test_console_errors_are_seen(tmp_path: Path) -> None:
    """The console check above can fail: a page that logs an error is caught."""
    page = tmp_path / "p" / "index.html"
    page.parent.mkdir()
    page.write_text('<html><body><p class="lead"></p><script>console.error("boom")</script></body></html>')
    assert any("boom" in e for e in browse(page, tmp_path, "console")["errors"])


def test_compare_refuses_mixed_kinds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, probe = synth.write_run(tmp_path / "r"), synth.write_probe(tmp_path / "p")
    assert main(["report", str(run), str(probe), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "different kinds" in err and "only runs" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_report_bad_path_is_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a run dir" in err and len(err.strip().splitlines()) == 1


def test_compare_studies_and_probes_share_axes(tmp_path: Path) -> None:
    """Two studies (or probes) on one page: each figure holds the curves of both, named by
    directory, and the answer names the best of each."""
    from normlab.report import compare_report

    a = synth.write_store(tmp_path / "s1", seeds=(0, 1))
    b = synth.write_store(tmp_path / "s2", placements=("pre",), seeds=(0, 1))
    html = _text(compare_report([a, b], tmp_path / "cs").read_text())
    answer = re.search(r'<p class="answer">(.*?)</p>', html)[1]
    assert "Over all of them:" in answer and "s1: pre" in html and "s2: pre" in html
    legend = {ln for ln in re.findall(r"(s[12]): (?:pre|post)", html)}
    assert legend == {"s1", "s2"}
    p1, p2 = synth.write_probe(tmp_path / "p1"), synth.write_probe(tmp_path / "p2", depths=(2, 4, 8, 16))
    html = _text(compare_report([p1, p2], tmp_path / "cp").read_text())
    fits = json.loads((p2 / "summary.json").read_text())["w2_slope"]
    assert f"p2: post {signed(fits['post']['slope'])}" in html
    assert html.count("<figure") >= 2
