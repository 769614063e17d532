"""The outcome of a trial (trains / stalls / diverged) on synthetic store records, and the
stability map's cells: counts, shares, mean best loss, ids, and axes read from the run."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from normlab.data.unigram import DataCE
from normlab.study.outcome import OUTCOMES, STALL_MARGIN, Cell, CellKey, cell_key, classify, map_cells
from normlab.study.store import TrialRecord

CE = DataCE(unigram=3.35, vocab_size=65)  # ln 65 = 4.1744
EDGE = CE.unigram - STALL_MARGIN           # 3.2: at it a run stalls, below it it trains


def rec(tid: str = "t", status: str = "completed", best: Any = 2.5, final: Any = "same", params: dict | None = None,
        run_dir: Path = Path("/nonexistent"), **summary: Any) -> TrialRecord:
    s = {"status": status, "best_val_loss": best, "final_val_loss": best if final == "same" else final,
         "diverged_at_step": None, **summary}
    p = params if params is not None else {"model.placement": "post", "optim.lr": 1e-3, "model.n_layer": 6,
                                           "optim.warmup_steps": 0, "seed": 0}
    return TrialRecord(tid, p, status, s, run_dir, None)


@pytest.mark.parametrize("record, outcome", [
    (rec(best=2.5), "trains"),
    (rec(best=EDGE - 1e-9), "trains"),                      # just below the edge
    (rec(best=EDGE), "stalls"),                             # "not below": the edge itself stalls
    (rec(best=3.358), "stalls"),                            # the deep-stability plateau
    (rec(best=3.9, final=4.0), "stalls"),                   # worse than unigram, still below ln V
    (rec(best=3.0, final=4.2), "diverged"),                 # final loss above ln V = 4.174
    (rec(best=math.nan), "diverged"),                       # non-finite loss
    (rec(best=2.5, final=math.inf), "diverged"),
    (rec(status="diverged", best=2.9, final=None), "diverged"),  # the store says so
    (rec(best=2.5, diverged_at_step=120), "diverged"),      # the run's flag, whatever its status
    (rec(best=None, final=3.0), "trains"),                  # only a final value: judged by it
    (rec(best=None, final=None), None),                     # never validated: no outcome
    (rec(status="failed", best=2.5), None),                 # raised: not an outcome of training
    (rec(status="pending", best=None), None),
    (rec(status="running", best=2.5), None),
])
def test_every_outcome_of_the_rule(record: TrialRecord, outcome: str | None) -> None:
    assert classify(record, CE) == outcome


def test_margin_and_reference_are_the_callers_when_given() -> None:
    r = rec(best=3.1)
    assert classify(r, CE) == "trains" and classify(r, CE, margin=0.3) == "stalls"
    assert classify(r, DataCE(3.2, 65)) == "stalls"  # the unigram value is the data's, not a constant


def test_map_cells_counts_shares_and_ids() -> None:
    def p(pl: str, lr: float, seed: int, depth: int = 6) -> dict:
        return {"model.placement": pl, "optim.lr": lr, "model.n_layer": depth, "optim.warmup_steps": 0, "seed": seed}

    trials = [rec("a", best=2.5, params=p("post", 1e-3, 0)), rec("b", best=3.36, params=p("post", 1e-3, 1)),
              rec("c", status="diverged", best=3.0, final=None, params=p("post", 1e-3, 2)),
              rec("d", best=2.7, params=p("post", 1e-3, 3)), rec("e", status="pending", best=None, params=p("post", 1e-3, 4)),
              rec("f", best=2.4, params=p("pre", 1e-3, 0)), rec("g", best=2.6, params=p("pre", 3e-3, 0, depth=24))]
    cells = map_cells(trials, CE)
    assert set(cells) == {CellKey("post", 1e-3, 6, 0), CellKey("pre", 1e-3, 6, 0), CellKey("pre", 3e-3, 24, 0)}
    post = cells[("post", 1e-3, 6, 0)]  # plain tuples index the map too
    assert post.n == 4 and post.missing == 1 and post.trial_ids == ["a", "b", "c", "d"]
    assert post.counts == {"trains": 2, "stalls": 1, "diverged": 1} and list(post.counts) == list(OUTCOMES)
    assert post.share("trains") == 0.5 and post.share("diverged") == 0.25
    assert post.best_vals == [2.5, 3.36, 3.0, 2.7]
    assert post.mean_best() == pytest.approx((2.5 + 3.36 + 2.7) / 3)  # the diverged seed's 3.0 left out
    assert cells[("pre", 3e-3, 24, 0)].counts == {"trains": 1, "stalls": 0, "diverged": 0}
    empty = Cell(missing=2)
    assert empty.n == 0 and empty.share("trains") == 0.0 and empty.mean_best() is None


def test_an_axis_the_study_does_not_vary_comes_from_the_runs_config(tmp_path: Path) -> None:
    from normlab.run.dir import RunDir
    from normlab.run.resolve import RunConfig

    cfg = RunConfig.from_dict({"model": {"placement": "deepnorm", "n_layer": 48}, "optim": {"lr": 2e-3, "warmup_steps": 7}})
    RunDir(tmp_path / "r").write_config(cfg)
    t = rec(params={"model.placement": "deepnorm", "seed": 0}, run_dir=tmp_path / "r")
    assert cell_key(t) == CellKey("deepnorm", 2e-3, 48, 7)
    assert cell_key(rec(params={"model.n_layer": 6})) == CellKey("?", None, 6, None)  # no run: unknown
