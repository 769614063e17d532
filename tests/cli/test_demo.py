"""`normlab demo` (the README's main job) end to end at smoke scale."""

from __future__ import annotations

from normlab.cli import main


def test_demo_smoke_runs_study_report_and_headline(tmp_path, data_dir, capsys):
    store = tmp_path / "pvp"
    assert main(["demo", "--scale", "smoke", "--store", str(store), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert (store / "report" / "index.html").stat().st_size > 1000
    assert "Pre - Post" in out and "report: " in out
    assert out.count("check of the implementation: transformers GPT-2") == 2 and "lab - baseline = " in out
    # Every trial ran once and left its run directory; rerunning repeats nothing.
    runs = sorted(p.name for p in (store / "runs").iterdir())
    assert len(runs) == 12  # (post, pre, GPT-2 baseline) x 2 warm-ups x 2 seeds
    assert main(["demo", "--scale", "smoke", "--store", str(store), "--workers", "1"]) == 0
    assert sorted(p.name for p in (store / "runs").iterdir()) == runs


def test_without_transformers_the_demo_leaves_out_its_baseline_arm_saying_so(monkeypatch, caplog):
    """`pip install normlab` (no hf extra) runs the demo: the GPT-2 baseline arm is left out, in one line."""
    import logging
    import sys

    from normlab.cli.demo_cmd import demo_spec

    full = demo_spec("smoke").trials()
    monkeypatch.setitem(sys.modules, "transformers", None)  # find_spec: not installed
    with caplog.at_level(logging.INFO, logger="normlab"):
        lab = demo_spec("smoke").trials()
    assert [t.id for t in lab] == [t.id for t in full if t.params["model.impl"] != "hf-gpt2"]
    assert len(lab) == 8 and len(full) == 12
    notes = [r.getMessage() for r in caplog.records if "transformers" in r.getMessage()]
    assert len(notes) == 1 and "pip install 'normlab[hf]'" in notes[0]
