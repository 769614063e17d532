"""`normlab report` on a run, a probe output and a study store; each page opened in headless
Chromium (Debian's `chromium`; skipped when absent): no console errors, every image decoded."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402

from normlab.cli import main  # noqa: E402

CHECK = """<script>window.addEventListener('load',()=>{const bad=[...document.images].filter(
i=>!i.complete||i.naturalWidth===0).length;document.title='IMGCHECK n='+document.images.length+' bad='+bad;});
</script>"""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    return exe


def browse(page: Path, tmp: Path) -> tuple[int, int]:
    """Open ``page``: screenshot beside it, then (images, undecoded images) read from the DOM."""
    exe = _chromium()
    probe = page.with_name("_check.html")
    probe.write_text(page.read_text().replace("</body>", CHECK + "</body>"))
    base = [exe, *FLAGS, f"--user-data-dir={tmp / 'profile'}"]
    shot = subprocess.run([*base, f"--screenshot={page.parent / 'screenshot.png'}", "--window-size=1200,2400",
                           page.as_uri()], capture_output=True, text=True, timeout=120)
    dom = subprocess.run([*base, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    probe.unlink()
    errors = [ln for ln in (shot.stderr + dom.stderr).splitlines() if "CONSOLE" in ln and "ERROR" in ln.upper()]
    assert not errors, errors
    assert (page.parent / "screenshot.png").stat().st_size > 1000
    m = re.search(r"IMGCHECK n=(\d+) bad=(\d+)", dom.stdout)
    assert m, dom.stdout[-500:]
    return int(m[1]), int(m[2])


@pytest.mark.parametrize("kind", ["run", "probe", "study"])
def test_report_page(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = {"run": synth.write_run, "probe": synth.write_probe, "study": synth.write_store}[kind](tmp_path / kind)
    assert main(["report", str(path)]) == 0
    page = path / "report" / "index.html"
    assert capsys.readouterr().out.strip() == str(page)
    html = page.read_text()
    assert "http://" not in html and "https://" not in html  # works offline, from file://
    assert "<h2 id=\"summary\">" in html and "Versions" in html
    pngs = sorted((path / "report" / "figures").glob("*.png"))
    assert pngs and all(p.with_suffix(".svg").is_file() for p in pngs)
    assert html.count("<img") == len(pngs)
    n, bad = browse(page, tmp_path)
    assert n == len(pngs) and bad == 0


def test_report_bad_path_is_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a run dir" in err and len(err.strip().splitlines()) == 1
