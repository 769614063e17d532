"""`normlab demo` (the README's main job) end to end at smoke scale."""

from __future__ import annotations

import json
import re

import pytest

from normlab.cli import main


def test_demo_smoke_runs_study_page_and_verdict(tmp_path, data_dir, capsys):
    from normlab.study.demo_preset import demo_settings

    store = tmp_path / "demo"
    assert main(["demo", "--scale", "smoke", "--store", str(store), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    d = demo_settings("smoke")
    runs = sorted(p.name for p in (store / "runs").iterdir())
    assert len(runs) == 4 * len(d["seeds"])  # (post, pre) x 2 warm-ups x seeds
    for r in runs:  # the training loss at every step, the validation loss at every eval_every
        rows = [json.loads(line) for line in (store / "runs" / r / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in rows if "train/loss" in m] == list(range(1, d["steps"] + 1))
        assert [m["step"] for m in rows if "val/loss" in m] == list(range(d["eval_every"], d["steps"] + 1, d["eval_every"]))
    html = (store / "report" / "index.html").read_text()
    assert 'id="fig-train_loss"' in html and 'id="fig-val_loss"' in html
    svg = (store / "report" / "figures" / "train_loss.svg").read_text()
    assert all(f'id="raw:{pl}:{wu}:0"' in svg for pl in ("post", "pre") for wu in (0, d["warmup"]))
    # stdout's verdict is the page's answer, word for word
    answer = re.search(r'<p class="answer"><b>Answer.</b> (.*?)</p>', html)[1]
    import html as H

    assert H.unescape(answer) in out and "Still on the unigram plateau at step" in out and "report: " in out
    # Every trial ran once; rerunning repeats nothing.
    assert main(["demo", "--scale", "smoke", "--store", str(store), "--workers", "1"]) == 0
    assert sorted(p.name for p in (store / "runs").iterdir()) == runs


def test_demo_refuses_an_unknown_scale_before_writing(tmp_path, capsys):
    store = tmp_path / "demo"
    assert main(["demo", "--scale", "seed", "--store", str(store)]) == 2 and not store.exists()
    assert "smoke, cpu, gpu" in capsys.readouterr().err


@pytest.mark.parametrize("scale", ["smoke", "cpu", "gpu"])
def test_the_demo_needs_no_optional_extra(scale):
    """`pip install normlab` (no extras) runs the main job: every demo trial is the lab's own model."""
    from normlab.run.config import RunConfig
    from normlab.study.demo_preset import NAME
    from normlab.study.presets import study_preset

    trials = study_preset(NAME, scale).trials()
    assert trials and all(RunConfig.from_json(t.config_json).model.impl == "normlab" for t in trials)
