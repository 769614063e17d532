"""The settling engine (claims/settling.py) on synthetic curves: run directories whose validation
losses are written stage by stage, a stand-in for resuming that reveals each run's curve up to
the next stage, and real catalogue claims read at each stage (claims/at_horizon.py).

A slow starter is extended until it trains and settles there; a true stall (its loss creeping
down on the plateau) is held to the longest stage, unsettled and scoped to it; a part stable
after stage 2 stops extending its runs; a rerun after an interruption repeats no extension; a
claim that analyses a checkpoint refuses to be read at a horizon; without stages nothing
changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from normlab.claims.cache import Cache
from normlab.claims.claim import CLAIMS
from normlab.claims.settling import Engine, settle_claims, staged
from normlab.claims.studies import StudyContext
from normlab.core.errors import UserError
from normlab.data.unigram import DataCE
from normlab.run.resolve import RunConfig
from normlab.study.at_horizon import reached
from normlab.study.extend import to_stage
from normlab.study.settle import SETTLED, UNSETTLED
from normlab.study.store import TrialRecord

CE = DataCE(unigram=3.347, vocab_size=65)  # the plateau's edge: 3.197
STAGES = [200, 400, 1000, 2000]
MAP, RV, BR, BR6 = "stability-map", "recipe-variants", "frontier-bracket", "frontier-bracket-post6"
P, LR, L, W, INIT = "model.placement", "optim.lr", "model.n_layer", "optim.warmup_steps", "model.init"
Curve = Callable[[int], float]  # step -> val loss


def flat(v: float) -> Curve:
    return lambda s: v


def steps_to(points: dict[int, float]) -> Curve:
    """Piecewise constant: the value of the last point at or before the step."""
    return lambda s: points[max(k for k in points if k <= s)]


class World(StudyContext):
    """Synthetic staged studies: each trial a run directory revealed up to the step it reached."""

    def __init__(self, root: Path, cells: list[tuple[str, dict[str, Any], Curve | list[Curve]]], seeds: int = 3) -> None:
        super().__init__(out=root / "out", scale="cpu", train=True, stages={MAP: STAGES, RV: STAGES, BR: STAGES, BR6: STAGES})
        self.curves: dict[str, Curve] = {}
        self.by_study: dict[str, list[TrialRecord]] = {}
        self.events: list[tuple[str, int]] = []  # (trial, stage): the "extended" events
        for i, (study, params, curve) in enumerate(cells):
            for s in range(seeds):
                tid = f"{study}-{i}-{s}"
                d = root / "runs" / tid
                d.mkdir(parents=True)
                (d / "config.json").write_text(RunConfig.from_dict({"optim": {"lr": params.get(LR, 1e-3)}}).to_json())
                one = curve[s] if isinstance(curve, list) else curve  # a curve per seed, or one for all
                self.curves[tid] = lambda st, c=one, j=s: c(st) + 0.001 * j  # seeds a hair apart
                self._reveal(d, tid, STAGES[0])
                self.by_study.setdefault(study, []).append(
                    TrialRecord(tid, {**params, "seed": s}, "completed", json.loads((d / "summary.json").read_text()),
                                d, None))

    def _reveal(self, d: Path, tid: str, to: int) -> None:
        evals = [(st, self.curves[tid](st)) for st in range(100, to + 1, 100)]
        (d / "metrics.jsonl").write_text("".join(json.dumps({"step": st, "val/loss": v}) + "\n" for st, v in evals))
        (d / "summary.json").write_text(json.dumps({"status": "completed", "steps": to, "diverged_at_step": None,
                                                    "best_val_loss": min(v for _, v in evals),
                                                    "final_val_loss": evals[-1][1]}))

    def trials(self, name: str) -> list[Any]:
        return self.by_study[name]

    def data_ce(self, t: Any) -> DataCE:  # noqa: ARG002 (every synthetic run trains on the same data)
        return CE

    def extend(self, ctx: Any, study: str, ids: list[str], to: int, stop_after: int | None = None) -> int:
        """What resuming does to the files (``study.extend.extend_to``'s choice of runs)."""
        done = 0
        for t, _ in to_stage([t for t in self.by_study[study] if t.id in ids], to):
            if stop_after is not None and done == stop_after:
                raise KeyboardInterrupt  # interrupted part-way through a stage
            self._reveal(Path(t.run_dir), t.id, to)
            self.events.append((t.id, to))
            done += 1
        return done


def m(p: str, lr: float, w: int, n: int = 6) -> dict[str, Any]:
    return {P: p, LR: lr, L: n, W: w}


def deepnorm_world(root: Path, dn18: Curve) -> World:
    """deepnorm-depth's cells at lr 5e-4, warm-up 50: DeepNorm at 18 blocks as given, the rest flat."""
    return World(root, [(MAP, m("deepnorm", 5e-4, 50, 18), dn18), (MAP, m("deepnorm", 5e-4, 50, 6), flat(2.6)),
                        (MAP, m("post", 5e-4, 50, 18), flat(3.36)), (MAP, m("post", 5e-4, 50, 6), flat(2.6))])


def _run(world: World, ids: list[str], **kw: Any) -> dict[str, Any]:
    return settle_claims(world, [CLAIMS.get(i) for i in ids], Cache(None), extend=world.extend, **kw)


def _part(rec: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in rec["parts"] if p["id"] == pid)


def test_a_slow_starter_is_extended_until_it_trains(tmp_path: Path) -> None:
    # on the plateau at step 200 (as HybridNorm's seed 200), below it from step 400, flat by 1000
    world = deepnorm_world(tmp_path, steps_to({100: 3.36, 400: 2.62, 600: 2.61}))
    rec = _run(world, ["deepnorm-depth"])["deepnorm-depth"]
    trains = _part(rec, "deepnorm-trains")
    assert (trains["settle_status"], trains["settled_at"], trains["horizon"]) == (SETTLED, 1000, 1000)
    assert trains["drift"] == pytest.approx(-0.01, abs=1e-9) and trains["rule_verdict"] == "supported"
    assert trains["numbers"]["outcomes"]["cell"]["trains"] == 3  # read at 1000: every seed trains
    assert rec["stages"] == STAGES
    # every run the claim reads went to 400 and 1000 (the part moved at 400); only the runs of
    # vs-post, whose Post-LN arm stays on the plateau (a stall is read at the longest stage), to 2000
    vs_post = _part(rec, "vs-post")
    assert (vs_post["settle_status"], vs_post["settled_at"]) == (UNSETTLED, 2000)
    assert sorted({h for _, h in world.events}) == [400, 1000, 2000]
    assert {t for t, h in world.events if h == 2000} <= set(vs_post["trials"])
    assert len([e for e in world.events if e[1] < 2000]) == 2 * 12


def test_a_true_stall_is_held_to_the_longest_stage(tmp_path: Path) -> None:
    # every seed stays on the plateau (above 3.197) while its loss creeps down: never within 0.02
    world = deepnorm_world(tmp_path, steps_to({100: 3.36, 400: 3.32, 1000: 3.27, 2000: 3.22}))
    rec = _run(world, ["deepnorm-depth"])["deepnorm-depth"]
    trains = _part(rec, "deepnorm-trains")
    assert (trains["settle_status"], trains["settled_at"]) == (UNSETTLED, 2000)
    assert trains["drift"] == pytest.approx(-0.05, abs=1e-9)
    assert "read at step 2000, still moving (3 of 3 runs still on the plateau" in trains["note"]
    assert "effect moved -0.05" in trains["note"]
    assert "scoped to step 2000" in trains["settle_text"] and "steps" in trains["departures"]
    assert trains["verdict"] == "not seen at the lab's settings"  # contradicted, scoped to the longest stage
    assert trains["numbers"]["outcomes"]["cell"]["stalls"] == 3
    assert {h for _, h in world.events} == {400, 1000, 2000}


def test_a_part_stable_after_stage_2_stops_extending_its_runs(tmp_path: Path) -> None:
    # warmup-post: Post-LN at lr 5e-4 without warm-up starts slowly; every other cell is flat
    slow = steps_to({100: 3.36, 400: 2.81, 600: 2.8})
    cells = [(MAP, m(p, lr, w), slow if (p, lr, w) == ("post", 5e-4, 0) else flat(2.6 + 0.05 * (w == 0)))
             for p in ("post", "pre") for lr in (5e-4, 1e-3) for w in (0, 50)]
    cells += [(MAP, m("post", 3e-3, w), flat(2.6 + 0.05 * (w == 0))) for w in (0, 50)]
    cells += [(RV, {P: "post", INIT: "gpt2", W: w}, flat(2.6)) for w in (0, 50)]
    world = World(tmp_path, cells)
    rec = _run(world, ["warmup-post"])["warmup-post"]
    got = {p["id"]: (p["settle_status"], p["settled_at"]) for p in rec["parts"]}
    assert got == {"post-5e-4": (SETTLED, 1000), "post-1e-3": (SETTLED, 400), "pre-5e-4": (SETTLED, 400),
                   "pre-1e-3": (SETTLED, 400), "post-1e-3-gpt2": (SETTLED, 400), "post-3e-3": (SETTLED, 400)}
    past_400 = {t for t, h in world.events if h > 400}
    assert past_400 == {f"{MAP}-{i}-{s}" for i in (0, 1) for s in range(3)}  # post at 5e-4, w 0 and w 50 only
    assert len([e for e in world.events if e[1] == 400]) == 36  # stage 2: every run read (12 cells x 3 seeds)
    assert _part(rec, "post-5e-4")["horizon"] == 1000 and _part(rec, "pre-1e-3")["horizon"] == 400


def test_a_rerun_after_an_interruption_repeats_no_extension(tmp_path: Path) -> None:
    world = deepnorm_world(tmp_path, steps_to({100: 3.36, 400: 2.62, 600: 2.61}))
    calls = {"n": 0}

    def interrupted(ctx: Any, study: str, ids: list[str], to: int) -> int:
        calls["n"] += 1
        return world.extend(ctx, study, ids, to, stop_after=5 if calls["n"] == 2 else None)  # dies in stage 3

    with pytest.raises(KeyboardInterrupt):
        settle_claims(world, [CLAIMS.get("deepnorm-depth")], Cache(None), extend=interrupted)
    first = list(world.events)
    assert sorted({h for _, h in first}) == [400, 1000] and len(first) == 12 + 5
    again = _run(world, ["deepnorm-depth"])["deepnorm-depth"]
    assert world.events[:len(first)] == first
    assert sorted(world.events) == sorted(set(world.events))  # no run resumed twice to one stage
    assert len([e for e in world.events if e[1] < 2000]) == 2 * 12
    assert _part(again, "deepnorm-trains")["settled_at"] == 1000


def test_a_claim_that_reads_a_checkpoint_refuses_a_horizon(tmp_path: Path) -> None:
    from normlab.claims.at_horizon import HorizonContext
    from normlab.core.errors import ConfigError

    world = deepnorm_world(tmp_path, flat(2.6))
    world.stages = {**world.stages, "collapse": [300, 600]}
    with pytest.raises(ConfigError, match=r"stages.*constant lr after warm-up"):  # a cosine study is not staged
        world.spec("collapse").trials()

    with pytest.raises(UserError, match=r"checkpoint.*cannot be read at step 400"):
        HorizonContext(world, 400).analysis(world.by_study[MAP][0])
    with pytest.raises(UserError, match=r"study 'new-methods' has no stages"):
        HorizonContext(world, 400).trials("new-methods")
    with pytest.raises(UserError, match=r"staged at steps \[200, 400, 1000, 2000\], not at 300"):
        HorizonContext(world, 300).trials(MAP)


def test_studies_staged_unlike_are_refused_in_one_line(tmp_path: Path) -> None:
    world = deepnorm_world(tmp_path, flat(2.6))
    world.stages = {MAP: STAGES}  # recipe-variants unstaged
    with pytest.raises(UserError, match=r"^claim warmup-post: its studies are not staged alike"):
        staged(world, [CLAIMS.get("warmup-post")])


def test_without_stages_nothing_is_settled_or_extended(tmp_path: Path) -> None:
    world = deepnorm_world(tmp_path, steps_to({100: 3.36, 400: 2.62}))
    world.stages = {}
    assert _run(world, ["deepnorm-depth"]) == {} and world.events == []
    assert Engine(world, [CLAIMS.get("deepnorm-depth")], Cache(None)).claims == []


def test_a_view_at_the_first_stage_is_the_store_record(tmp_path: Path) -> None:
    world = deepnorm_world(tmp_path, steps_to({100: 3.36, 400: 2.62}))
    from normlab.claims.at_horizon import HorizonContext

    at = HorizonContext(world, 200)
    for t, v in zip(world.by_study[MAP], at.trials(MAP)):
        assert {k: v.summary[k] for k in ("status", "steps", "best_val_loss", "final_val_loss")} == \
            {k: t.summary[k] for k in ("status", "steps", "best_val_loss", "final_val_loss")}
        assert world.outcome(t) == at.outcome(v) and reached(v) == 200
    plain = CLAIMS.get("deepnorm-depth").decide(world)  # the claim read as it always was
    staged_ = CLAIMS.get("deepnorm-depth").decide(at)
    assert [p["effect"] for p in plain["parts"]] == [p["effect"] for p in staged_["parts"]]


def test_a_critical_lr_that_drifts_then_settles(tmp_path: Path) -> None:
    # frontier-depth: Post-LN with warm-up, 6 against 12 blocks. At 6 blocks half the seeds train at
    # 2e-3 by step 200, and half at 3e-3 by step 400 (slow starters): the critical lr moves up by
    # about 0.18 decades (issue 40), then stays
    T, S, SLOW = flat(2.6), flat(3.36), steps_to({100: 3.36, 400: 2.6})
    l6 = {5e-4: [T] * 4, 1e-3: [T] * 4, 2e-3: [T, T, SLOW, SLOW], 3e-3: [SLOW, SLOW, S, S], 6e-3: [S] * 4,
          1.2e-2: [S] * 4}
    l12 = {5e-4: [T] * 4, 1e-3: [T, T, S, S], 3e-3: [S] * 4}
    cells = [(BR6, m("post", lr, 50), c) for lr, c in l6.items()]
    cells += [(BR, m("post", lr, 50, 12), c) for lr, c in l12.items()]
    cells += [(BR6, m("post", 1e-3, 0), T), (BR, m("pre", 1e-3, 0, 18), T)]  # cells of lines the part does not read
    world = World(tmp_path, cells, seeds=4)
    engine = Engine(world, [CLAIMS.get("frontier-depth")], Cache(None), extend=world.extend)
    rec = engine.run()["frontier-depth"]
    part = _part(rec, "post")
    assert (part["settle_status"], part["settled_at"], part["numbers"]["horizon"]) == (SETTLED, 1000, 1000)
    assert part["lr_drift"] == pytest.approx(0.0, abs=1e-6) and part["drift"] == pytest.approx(0.0, abs=1e-6)
    assert part["settling"]["effect_tol"] == 0.1  # a difference of critical lrs: decades, the 0.1
    crit = [st.critical["post L6 w50"] for st in engine.readings[("frontier-depth", "post")]]
    assert [st.horizon for st in engine.readings[("frontier-depth", "post")]] == [200, 400, 1000]
    assert crit[0].lr is not None and crit[1].lr is not None and crit[1].lr / crit[0].lr > 10 ** 0.1  # it drifted
    assert {h for _, h in world.events} == {400, 1000}
