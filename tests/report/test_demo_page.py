"""The demo's page (study ``pre-vs-post-demo``): its verdict is read off the data by a fixed rule,
one synthetic store per outcome; it does not depend on which seeds stall; the figures draw the
training loss at every step for both placements; the published results it cites match their
files."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import demo_synth as S  # noqa: E402

from normlab.data.unigram import DataCE  # noqa: E402
from normlab.report.demo_answer import (  # noqa: E402
    PLACEMENT_OUTCOMES,
    WARMUP_OUTCOMES,
    Demo,
    Seed,
    answer,
    collect,
    placement_verdict,
    warmup_verdict,
)
from normlab.report.load import load_study  # noqa: E402

CE = DataCE(3.3473, 65)  # Tiny Shakespeare's unigram cross-entropy; ln 65 = 4.174
W = S.WARMUP
ROOT = Path(__file__).resolve().parents[2]


def _arms(post0, postw, pre0, prew):  # best val losses per seed; early values sit 0.3 above them
    return {("post", 0): post0, ("post", W): postw, ("pre", 0): pre0, ("pre", W): prew}


def _ends(*best: float) -> list[S.Ending]:
    return [(b + 0.3, b) for b in best]


STALL = _ends(3.36, 3.361, 3.359)
TRAIN = _ends(2.49, 2.5, 2.51)
WARMUP_WORLDS = {  # outcome -> (post no warm-up, post W, pre no warm-up, pre W), 3 seeds each
    "post-only": (STALL, TRAIN, _ends(2.48, 2.5, 2.52), TRAIN),
    "post-more": (STALL, TRAIN, _ends(2.7, 2.71, 2.69), TRAIN),
    "both": (_ends(2.7, 2.71, 2.69), TRAIN, _ends(2.7, 2.72, 2.69), TRAIN),
    "hurts": (TRAIN, _ends(2.7, 2.71, 2.69), TRAIN, TRAIN),
    "none": (_ends(2.48, 2.5, 2.52), TRAIN, TRAIN, TRAIN),
    "few": (STALL[:2], TRAIN, TRAIN, TRAIN),
}
WORDING = {"post-only": "Post-LN needs warm-up at this setting and Pre-LN does not: ",
           "post-more": "Warm-up helps both here, Post-LN far more: ",
           "both": "Warm-up helps Post-LN here, but not distinguishably more than Pre-LN: ",
           "hurts": "Warm-up makes Post-LN worse here: ",
           "none": "Post-LN does not need warm-up at this setting (within seed noise): ",
           "few": "Too few finished seeds to weigh warm-up (fewer than 3 in an arm; 2 in the smallest)"}


def _demo(tmp_path: Path, endings) -> Demo:
    return collect(load_study(S.write_store(tmp_path / "store", endings)))


def test_the_worlds_cover_every_outcome_of_the_rule() -> None:
    assert set(WARMUP_WORLDS) == set(WORDING) == set(WARMUP_OUTCOMES)


@pytest.mark.parametrize("outcome", WARMUP_OUTCOMES)
def test_warmup_verdict_is_read_off_the_store(tmp_path: Path, outcome: str) -> None:
    demo = _demo(tmp_path, _arms(*WARMUP_WORLDS[outcome]))
    assert (demo.steps, demo.warmup, sorted(demo.arms)) == (S.STEPS, W, [("post", 0), ("post", W), ("pre", 0), ("pre", W)])
    got, sentence = warmup_verdict(demo, CE)
    assert got == outcome and sentence.startswith(WORDING[outcome])
    text, _ = answer(demo, CE)
    assert text.startswith(WORDING[outcome])
    if outcome != "few":  # the numbers are the data's: Post-LN's cost of no warm-up, Welch over seeds
        from normlab.report.numbers import signed
        from normlab.stats.effects import welch

        post0, postw = ([b for _, b in WARMUP_WORLDS[outcome][i]] for i in (0, 1))
        e = welch(post0, postw)
        assert f"Post-LN {signed(e.estimate)} [{signed(e.lo)}, {signed(e.hi)}] nats/token" in sentence


PLACEMENT_WORLDS = {  # outcome -> (Post-LN, Pre-LN) best val losses with warm-up
    "pre": (_ends(2.6, 2.61, 2.59), TRAIN),
    "post": (_ends(2.4, 2.41, 2.39), TRAIN),
    "tie": (_ends(2.48, 2.5, 2.52), TRAIN),
    "few": (TRAIN[:2], TRAIN),
}
PLACEMENT_WORDING = {"pre": "Pre-LN ends lower by 0.1 [", "post": "Post-LN ends lower by 0.1 [",
                     "tie": "the two end within seed noise of each other (Post-LN minus Pre-LN 0 [",
                     "few": "the placements are not weighed (fewer than 3 seeds a side)"}


@pytest.mark.parametrize("outcome", PLACEMENT_OUTCOMES)
def test_placement_verdict_is_read_off_the_store(tmp_path: Path, outcome: str) -> None:
    post, pre = PLACEMENT_WORLDS[outcome]
    demo = _demo(tmp_path, _arms(STALL, post, TRAIN, pre))
    ends = ([s.ending(CE.uniform) for s in demo.seeds(pl, W)] for pl in ("post", "pre"))
    assert placement_verdict(*ends)[0] == outcome
    early = ([s.at(demo.early) for s in demo.seeds(pl, W)] for pl in ("post", "pre"))
    assert placement_verdict(*early, demo.early)[0] == outcome  # early values sit 0.3 above: the same order
    text, _ = answer(demo, CE)
    with_w = text.split(f"With warm-up {W}, ")[1].split("; without warm-up")[0]
    assert PLACEMENT_WORDING[outcome] in with_w
    if outcome in ("pre", "post"):
        assert f"is ahead at step {demo.early} by" in with_w


def test_a_diverged_seed_counts_as_the_uniform_loss(tmp_path: Path) -> None:
    demo = _demo(tmp_path, _arms(["diverged"] * 3, TRAIN, TRAIN, TRAIN))
    assert [s.diverged for s in demo.seeds("post", 0)] == [True] * 3
    assert [s.ending(CE.uniform) for s in demo.seeds("post", 0)] == [CE.uniform] * 3
    assert warmup_verdict(demo, CE)[0] == "post-only"  # worse than any stall, not left out
    assert "Post-LN without warm-up: 0 of 3" in answer(demo, CE)[1][0]  # a diverged seed is not on the plateau


@pytest.mark.parametrize("stalled", [4, 5, 6])
def test_the_verdict_does_not_depend_on_which_seeds_stall(tmp_path: Path, stalled: int) -> None:
    """6 seeds of Post-LN without warm-up, ``stalled`` of them on the plateau: the verdict is the
    same whichever seeds they are, and still "needs warm-up" down to 4 of 6."""
    texts = []
    for which in ("first", "last"):
        ends = [(3.66, 3.36)] * stalled + [(2.9, 2.55)] * (6 - stalled)
        post0 = ends if which == "first" else ends[::-1]
        six = _ends(2.49, 2.5, 2.51, 2.495, 2.505, 2.5)
        demo = _demo(tmp_path / which, _arms(post0, six, six, six))
        assert warmup_verdict(demo, CE)[0] == "post-only"
        texts.append(answer(demo, CE))
    assert texts[0] == texts[1]
    assert f"Post-LN without warm-up: {stalled} of 6" in texts[0][1][0]


def test_plateau_counts_are_stated_at_the_map_horizon_and_at_the_end() -> None:
    from normlab.study.demo_preset import horizon, pre_vs_post_demo
    from normlab.study.map_preset import STABILITY_GRID

    spec = pre_vs_post_demo("cpu").to_json_data()
    assert horizon(spec) == STABILITY_GRID["cpu"]["steps"] == 200  # the map's length, inside the run's 300
    spec["base"]["train"]["steps"] = 250  # edited away from the preset: the run's own length
    assert horizon(spec) == 250 and horizon(pre_vs_post_demo("smoke").to_json_data()) == 20
    leaves = Seed([(s, 3.36 if s <= 250 else 2.6) for s in range(25, 301, 25)])  # leaves the plateau after H
    stays = Seed([(s, 3.36) for s in range(25, 301, 25)])
    trains = Seed([(s, 2.5) for s in range(25, 301, 25)])
    demo = Demo({("post", 0): [leaves, stays, stays], ("post", 50): [trains] * 3, ("pre", 0): [trains] * 3,
                 ("pre", 50): [trains] * 3}, steps=300, warmup=50, horizon=200)
    assert (demo.horizon, demo.early) == (200, 100)
    _, notes = answer(demo, CE)
    assert notes[0].startswith("Still on the unigram plateau at step 200")
    assert "Post-LN without warm-up: 3 of 3 (2 of 3 at step 300); Post-LN with warm-up 50: 0 of 3 (0 of 3" in notes[0]


def test_loss_figure_draws_every_step_raw_under_its_moving_average() -> None:
    from normlab.report.demo_page import loss_figure, smooth

    steps = list(range(1, 61))
    raw = {("post", 0): [(steps, [3.3 + 0.1 * math.sin(s) for s in steps])],
           ("pre", 0): [(steps, [4 - s / 30 + 0.1 * math.cos(s) for s in steps])] * 2}
    fig = loss_figure(raw, [0], "training loss", "loss", 3.35, window=9)
    lines = {ln.get_gid(): ln for ln in fig.axes[0].get_lines() if ln.get_gid()}
    assert sorted(lines) == ["raw:post:0:0", "raw:pre:0:0", "raw:pre:0:1", "smooth:post:0:0", "smooth:pre:0:0",
                             "smooth:pre:0:1"]
    for pl in ("post", "pre"):
        r, m = lines[f"raw:{pl}:0:0"], lines[f"smooth:{pl}:0:0"]
        assert list(r.get_xdata()) == steps and list(r.get_ydata()) == raw[(pl, 0)][0][1]  # every step, as logged
        assert r.get_alpha() < m.get_alpha() and r.get_zorder() < m.get_zorder()  # faint, underneath
        assert list(m.get_ydata()) == pytest.approx(list(smooth(raw[(pl, 0)][0][1], 9)))
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["Post-LN", "Pre-LN", "unigram plateau"]
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_smooth_is_a_centred_moving_average() -> None:
    from normlab.report.demo_page import smooth

    assert list(smooth([2.0] * 7, 5)) == [2.0] * 7
    ramp = smooth(list(range(10)), 5)
    assert list(ramp[2:-2]) == [2, 3, 4, 5, 6, 7] and ramp[0] == 1.0  # no lag inside; fewer steps at the ends


def test_the_page_shows_per_step_curves_and_the_verdict(tmp_path: Path, data_dir: Path) -> None:
    from normlab.report import build_report
    from normlab.report.kinds import page_kind

    store = S.write_store(tmp_path / "store", _arms(*WARMUP_WORLDS["post-only"]))
    assert page_kind(store) == "demo"
    html = build_report(store).read_text()
    assert re.search(r"<title>(.*?)</title>", html)[1] == "Pre-LN vs Post-LN: study pre-vs-post-demo"
    lead = re.search(r'<section class="lead".*?</section>', html, flags=re.S)[0]
    assert "Post-LN needs warm-up at this setting and Pre-LN does not" in lead
    assert "Still on the unigram plateau at step" in lead and "normlab study run pre-vs-post" in lead
    assert "6 of 6 seeds" in lead  # seed 002's own settings, from the registered seed-scale run
    for name in ("train_loss", "val_loss", "best_per_seed"):
        assert f'id="fig-{name}"' in html
    svg = (store / "report" / "figures" / "train_loss.svg").read_text()
    for pl in ("post", "pre"):
        for wu in (0, W):
            for i in range(3):
                assert f'id="raw:{pl}:{wu}:{i}"' in svg and f'id="smooth:{pl}:{wu}:{i}"' in svg


def test_the_published_results_it_cites_match_their_files() -> None:
    from normlab.report.demo_page import KNIFE, MAP_CELL, SEED_SCALE

    html = (ROOT / "docs/evidence/maps/stability-map/index.html").read_text()
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(.*?)</tr>", html)]
    cells = {(r[0], int(r[3])): (int(r[4]), int(r[5])) for r in rows
             if len(r) == 10 and r[0] in ("post", "pre") and r[1] == "0.003" and r[2] == str(MAP_CELL["n_layer"])}
    assert {k: v[1] for k, v in cells.items()} == MAP_CELL["trains"]
    assert {v[0] for v in cells.values()} == {MAP_CELL["seeds"]}

    seed = {c["id"]: c for c in json.loads((ROOT / "docs/evidence/confirm-seed/claims.json").read_text())["claims"]}
    parts = {p["id"]: p for p in seed["seed002-pet-project"]["parts"]}
    eff = parts["faster"]["effect"]
    assert (round(eff["estimate"], 3), round(eff["lo"], 3), round(eff["hi"], 3)) == SEED_SCALE["faster"]
    eff = parts["lower"]["effect"]
    assert (round(eff["estimate"], 3), round(eff["lo"], 3), round(eff["hi"], 3)) == SEED_SCALE["lower"]
    outcomes = parts["post-fails"]["numbers"]["outcomes"]  # each Post-LN run at step 4900
    assert (outcomes.count("trains"), len(outcomes)) == SEED_SCALE["converged"]
    pre, post = (round(math.log(65) + sum(v) / len(v), 2) for v in (parts["lower"]["numbers"]["a"],
                                                                     parts["lower"]["numbers"]["b"]))
    assert (pre, post) == SEED_SCALE["best"]

    page = (ROOT / "docs/evidence/pre-vs-post/index.html").read_text()
    k, n = KNIFE["page"]
    assert f"post warmup_steps=0: {k} of {n} seeds stalled" in page
    claims = {c["id"]: c for c in json.loads((ROOT / "docs/evidence/exploratory/claims.json").read_text())["claims"]}
    outcomes = next(p for p in claims["seed002-pet-project"]["parts"] if p["id"] == "post-fails")["numbers"]["outcomes"]
    assert (outcomes.count("stalls"), len(outcomes)) == KNIFE["claims"]
