"""One outcome rule everywhere: `normlab study status`, the study page and the claims judge every
trial of a study with stalls alike (``normlab.study.outcome``), at the horizon they state."""

from __future__ import annotations

import re
from pathlib import Path

from normlab.study.runner import run_study, status_text
from normlab.study.spec import StudySpec

PAGE = {"trains": "", "stalls": " (stalled)", "diverged": ""}


def test_status_page_and_claims_agree_on_every_trial(tmp_path: Path, fake_path: str) -> None:
    from normlab.claims.studies import StudyContext
    from normlab.report.load import load_study
    from normlab.report.study_page import build

    spec = StudySpec(name="stalls", trial=f"{fake_path}:plateau", seeds=[0, 1],
                     base={"train": {"steps": 8}},
                     axes={"model.placement": ["post", "pre"], "optim.lr": [1e-3, 3e-2, 0.1]})
    store = run_study(spec, tmp_path / "stores" / "stalls", workers=1, progress=False)
    trials = store.trials()
    ctx = StudyContext(out=tmp_path, train=False)
    claims = {t.id: ctx.outcome(t) for t in ctx.trials("stalls")}
    assert sorted(claims.values()).count("stalls") == 4 and list(claims.values()).count("diverged") == 4

    text = status_text(store)
    assert "outcomes at step 8; diverged trials where they stopped: trains 4, stalls 4, diverged 4" in text
    assert "3.347 minus 0.15 = 3.197" in text
    listed = {tid: kind for kind, tid in re.findall(r"^  (stalls|diverged) at step \d+: (\w+) ", text, flags=re.M)}
    assert listed == {tid: o for tid, o in claims.items() if o != "trains"}

    html = build(load_study(store.root)).read_text()
    assert "judge), at step 8; diverged trials where they stopped: " in html and "3.197" in html
    for t in trials:  # the page's table of every trial: status, with "(stalled)" exactly where the claims say stalls
        row = re.search(rf"<tr><td>{t.id[:10]}</td>.*?</tr>", html, flags=re.S)
        assert row is not None
        assert f"<td>{t.status}{PAGE[claims[t.id]]}</td>" in row[0], (t.params, claims[t.id])
    # the twins at 3.352 and 3.357 stall alike (the old page rule, the fall from the first evaluation, split them)
    twins = [claims[t.id] for t in trials if t.params["optim.lr"] == 3e-2]
    assert twins == ["stalls"] * 4
