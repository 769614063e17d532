"""Every file the lab's tools write is one its folder's owner names: under RUN/ ``RunDir``
(``RunDir.OWNED``), in a probe, inspect or analysis folder ``OutDir`` (``outdir.ENTRIES``).
Found by running each tool (train, analyze, report, probe, inspect), not from a hand-kept list
of file names."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.cli import main
from normlab.run.dir import OWNED, RunDir
from normlab.run.outdir import KINDS, OutDir
from normlab.run.resolve import resolve


def _written(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    from normlab.report import build_report
    from normlab.train import run_training

    run = tmp_path_factory.mktemp("owned") / "run"
    cfg = resolve("smoke", overrides=["train.steps=4", "train.eval_every=2", "train.checkpoint_every=2",
                                      "train.keep_checkpoints=true", "train.diag_every=2",
                                      "train.log_every=1", "model.n_layer=1"])
    run_training(cfg, run, quiet=True)
    build_report(run)  # the page, and the layer analysis it reads (report.prepare)
    return run


def test_every_file_of_a_trained_analysed_reported_run_is_owned(trained: Path) -> None:
    files = _written(trained)
    tops = {f.split("/")[0] for f in files}
    # the run wrote what the contract says, so the check below is not vacuous
    assert {"config.json", "metrics.jsonl", "summary.json", "checkpoints", "analysis", "report"} <= tops
    assert "diagnostics.jsonl" in tops
    assert [f for f in files if not RunDir.owns(f)] == []


def test_a_stray_file_is_not_owned(trained: Path) -> None:
    assert not RunDir.owns("notes.txt")
    assert not RunDir.owns("metrics.jsonl/extra")  # a file entry owns nothing below it
    assert RunDir.owns("checkpoints/best/model.safetensors")
    assert all(RunDir.owns(e.rstrip("/") + ("/x" if e.endswith("/") else "")) for e in OWNED)


@pytest.mark.parametrize("kind", ["probe", "inspect", "analysis"])
def test_every_file_of_a_probe_inspect_and_analysis_folder_is_owned(trained: Path, tmp_path: Path, kind: str) -> None:
    out = tmp_path / kind
    argv = {"probe": ["probe", "--placements", "pre", "--depths", "2", "--d-model", "16", "--n-head", "2",
                      "--seeds", "1", "--context", "16", "--batch-size", "2", "--out", str(out), "--quiet"],
            "inspect": ["inspect", str(trained), "--out", str(out), "--max-tokens", "64", "--context", "16",
                        "--quiet"],
            "analysis": ["analyze", str(trained), "--out", str(out), "--batches", "1", "--batch-size", "2"]}[kind]
    assert main(argv) == 0
    files = _written(out)
    assert files  # the tool wrote something, so the check below is not vacuous
    folder = OutDir(out, kind)
    assert [f for f in files if not folder.owns(f)] == []


def test_an_output_folder_refuses_a_name_it_does_not_own(tmp_path: Path) -> None:
    for kind in KINDS:
        with pytest.raises(ValueError, match="owns no 'notes.txt'"):
            OutDir(tmp_path, kind).file("notes.txt")
    assert OutDir(tmp_path, "inspect").file("analysis", "analysis.json") == tmp_path / "analysis" / "analysis.json"
    assert not OutDir(tmp_path, "probe").owns("analysis/analysis.json")  # a probe has no analysis
