"""A run page never presents a summary.json older than the run's metrics as the run's state:
a resumed run that is killed leaves the earlier end's summary behind."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import synth  # noqa: E402

from normlab.report.load import load_run  # noqa: E402
from normlab.report.numbers import num  # noqa: E402
from normlab.report.pages import build_report  # noqa: E402
from normlab.report.run_page import answer, current_summary  # noqa: E402


def _killed_after_resume(tmp: Path) -> Path:
    """Metrics to step 40; the summary of an interruption at step 20 with a best that the
    metrics beat later (as after `train --resume` and a SIGKILL)."""
    run = synth.write_run(tmp / "run")
    (run / "summary.json").write_text(json.dumps({
        "status": "interrupted", "steps": 20, "best_val_loss": 9.876, "final_val_loss": 9.876,
        "wall_time_s": 1.0, "tokens": 5120, "tokens_per_s": 1000.0, "params": 1234}))
    return run


def test_stale_summary_is_named_and_the_headline_comes_from_the_metrics(tmp_path: Path) -> None:
    run = load_run(_killed_after_resume(tmp_path))
    _, val = run.series("val/loss")
    text = answer(run)
    assert "interrupted 20 steps" not in text and num(9.876) not in text
    assert f"to {num(val[-1])} (step 40), best {num(min(val))}" in text
    assert "summary.json is older than metrics.jsonl" in text and "interrupted at step 20" in text
    shown, why = current_summary(run)
    assert why and shown["steps"] == 40 and shown["best_val_loss"] == min(val) and shown["params"] == 1234

    html = build_report(run.path).read_text()
    table = html[html.index('id="numbers"'):]
    assert num(9.876) not in re.sub(r'src="data:[^"]*"', "", html)
    assert "unknown: summary.json is stale (interrupted at step 20)" in table


def test_a_current_summary_is_presented_as_written(tmp_path: Path) -> None:
    run = load_run(synth.write_run(tmp_path / "run"))
    shown, why = current_summary(run)
    assert why is None and shown == run.summary
    assert "completed 40 steps" in answer(run)
