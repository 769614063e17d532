"""A study's page is the stability map's, critical lrs and all, because of its axes, not its
name: the synthetic frontier store of test_frontier_page.py under another name still gets it,
and loses it without an lr axis of 3 values, without seeds, or with a decaying schedule. One
call, ``normlab.study.load(S).frontiers()``, gives the critical lrs the long route gives."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_frontier_page import CRIT, LRS, MIXED, _store  # noqa: E402

from normlab.report.kinds import page_kind, study_question  # noqa: E402

SPEC: dict[str, Any] = {"name": "my-lr-sweep", "trial": "train", "seeds": [0, 1, 2],
                        "base": {"optim": {"schedule": "constant"}},
                        "axes": {"model.placement": ["post", "pre"], "optim.lr": LRS, "model.n_layer": [6, 18],
                                 "optim.warmup_steps": [0, 50]}}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = _store(tmp_path_factory.mktemp("axes") / "s")
    (d / "spec.json").write_text(json.dumps(SPEC))
    return d


def _with(store: Path, tmp_path: Path, **changes: Any) -> Path:
    """A copy of the store's spec.json with ``changes``, beside a link to its database."""
    d = tmp_path / "copy"
    d.mkdir()
    (d / "study.sqlite").symlink_to(store / "study.sqlite")
    (d / "spec.json").write_text(json.dumps({**SPEC, **changes}))
    return d


def test_a_renamed_frontier_study_gets_the_frontier_page(store: Path, data_dir: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from normlab.cli import main

    assert page_kind(store) == "stability"
    assert study_question(SPEC)[0].startswith("Up to which learning rate does each placement train")
    assert main(["report", str(store), "--quiet"]) == 0
    html = Path(capsys.readouterr().out.strip()).read_text()
    assert re.findall(r'<figure id="fig-([^"]+)"', html) == ["map_post", "map_pre", "frontier_40"]
    assert "Stability map: study my-lr-sweep" in html and "Critical learning rates" in html


@pytest.mark.parametrize("changes", [
    {"axes": {**SPEC["axes"], "optim.lr": LRS[:2]}},                 # two lrs cannot place a transition
    {"seeds": [0]},                                                   # no half of one seed
    {"base": {"optim": {"schedule": "cosine"}}},                      # the outcome by H depends on the length
    {"trial": "probe"},                                               # no training, no outcome
], ids=["two-lrs", "one-seed", "cosine", "probe"])
def test_without_frontier_axes_it_is_a_plain_study_page(store: Path, tmp_path: Path, changes: dict[str, Any]) -> None:
    assert page_kind(_with(store, tmp_path, **changes)) == "study"


def test_an_lr_in_a_zip_group_counts_and_the_map_names_keep_their_page(store: Path, tmp_path: Path) -> None:
    axes = {k: v for k, v in SPEC["axes"].items() if k != "optim.lr"}
    assert page_kind(_with(store, tmp_path, axes=axes, zip=[{"optim.lr": LRS, "train.steps": [40] * 5}])) == "stability"
    (tmp_path / "copy" / "spec.json").write_text(json.dumps({"name": "frontier-ends", "seeds": [0]}))
    assert page_kind(tmp_path / "copy") == "stability"  # the claims' map studies, whatever their smoke axes


def test_load_frontiers_is_the_long_route_in_one_call(store: Path, data_dir: Path) -> None:
    import normlab.study
    from normlab.stats.frontier import critical_lr
    from normlab.study.frontier import frontiers
    from normlab.study.horizons import horizons
    from normlab.study.outcome import study_data_ce
    from normlab.study.store import Store

    trials = Store(store).trials()
    long = frontiers(trials, study_data_ce(trials), 40)
    assert horizons(trials)[0] == 40
    for got in (normlab.study.load(store).frontiers(), normlab.study.load(store).frontiers(horizon=40)):
        assert [x.record() for x in got] == [x.record() for x in long]
    lines = {(x.placement, x.depth, x.warmup): x.frontier for x in long}
    assert set(lines) == set(CRIT)
    k = [3 if j < CRIT[MIXED] else 0 for j in range(len(LRS))]
    k[CRIT[MIXED]] = 1
    assert lines[MIXED].as_dict() == critical_lr(LRS, k, [3] * len(LRS)).as_dict()
