"""The answer on the page of ``normlab demo`` (study ``pre-vs-post-demo``): a verdict read off
the data by a fixed rule, worded so that it holds whichever seeds stall.

Per seed (``Seed``): its validation losses by step. The ending value is the best validation
loss of the run; a seed that diverged, or never had a finite validation loss, counts at
ln V (the uniform prediction's loss: worse than any stall). Every interval is a 95% Welch
interval over seeds (``normlab.stats.effects``); "within seed noise" means it contains 0; an arm with
fewer than ``MIN_SEEDS`` seeds is not weighed. W is the study's non-zero warm-up.

1. Warm-up (``warmup_verdict``). c_post = ending(Post-LN, no warm-up) - ending(Post-LN, W),
   c_pre the same for Pre-LN, and their difference c_post - c_pre (``stats.contrast``):

   | outcome | when |
   |---|---|
   | ``post-only`` | c_post > 0, the difference > 0, c_pre within noise or below 0 |
   | ``post-more`` | c_post > 0, the difference > 0, c_pre > 0 too |
   | ``both`` | c_post > 0, the difference within noise |
   | ``hurts`` | c_post < 0 |
   | ``none`` | c_post within noise |
   | ``few`` | an arm with fewer than MIN_SEEDS seeds |

2. Placement (``placement_verdict``), Post-LN minus Pre-LN at the same warm-up, of the ending
   value and of the validation loss at the early step E: ``pre`` (above 0: Pre-LN lower),
   ``post`` (below 0), ``tie`` (within noise), ``few``.

Stall counts are stated beside the verdict, never in it: a seed is "still on the plateau at
step H" when its best validation loss up to H is not below the unigram cross-entropy minus
``outcome.STALL_MARGIN`` (the stability map's rule; H its length, 200 steps at cpu:
``demo_preset.horizon``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from normlab.report.load import load_run
from normlab.report.numbers import num, signed
from normlab.run.dir import RunDir
from normlab.stats.effects import MIN_SEEDS, Effect, contrast, rate_diff, welch
from normlab.study.demo_preset import horizon
from normlab.study.outcome import STALL_MARGIN

if TYPE_CHECKING:
    from normlab.data.unigram import DataCE
    from normlab.report.load import StudyData

WARMUP_OUTCOMES = ("post-only", "post-more", "both", "hurts", "none", "few")
PLACEMENT_OUTCOMES = ("pre", "post", "tie", "few")
UNIT = "nats/token"


@dataclass
class Seed:
    """One trial: its validation losses (step, value) and whether it diverged."""

    vals: list[tuple[int, float]] = field(default_factory=list)
    diverged: bool = False

    def best_until(self, step: float = math.inf) -> float:
        """Best finite validation loss at steps <= ``step`` (nan: none)."""
        got = [v for s, v in self.vals if s <= step and math.isfinite(v)]
        return min(got) if got else math.nan

    def at(self, step: int) -> float:
        """Validation loss at the last evaluation at or before ``step`` (nan: none)."""
        got = [v for s, v in self.vals if s <= step]
        return got[-1] if got else math.nan

    def ending(self, uniform: float) -> float:
        """Best validation loss; ln V when the run diverged or has none (``uniform``)."""
        best = self.best_until()
        return uniform if self.diverged or not math.isfinite(best) else best


@dataclass
class Demo:
    """The demo study's seeds per (placement, warm-up), its length, and the steps H and E."""

    arms: dict[tuple[str, int], list[Seed]]
    steps: int
    warmup: int  # W, the non-zero warm-up
    horizon: int = 0  # H (``demo_preset.horizon``); 0: the run's length

    def __post_init__(self) -> None:
        self.horizon = min(self.horizon or self.steps, self.steps)

    @property
    def early(self) -> int:
        return max(1, self.horizon // 2)

    def seeds(self, placement: str, warmup: int) -> list[Seed]:
        return self.arms.get((placement, warmup), [])


def collect(study: StudyData) -> Demo:
    """The seeds of every finished trial (completed or diverged), from their run directories."""

    arms: dict[tuple[str, int], list[Seed]] = {}
    for t in study.trials:
        if t.status not in ("completed", "diverged") or not RunDir(t.run_dir).is_report_run():
            continue
        run = load_run(t.run_dir)
        x, y = run.series("val/loss")
        s = run.summary or {}
        seed = Seed([(int(a), b) for a, b in zip(x, y)],
                    t.status == "diverged" or s.get("status") == "diverged" or s.get("diverged_at_step") is not None)
        key = (str(t.params.get("model.placement")), int(t.params.get("optim.warmup_steps") or 0))
        arms.setdefault(key, []).append(seed)

    base = study.spec.get("base", {})
    warm = [int(w) for w in (study.spec.get("axes") or {}).get("optim.warmup_steps", []) if w]
    return Demo(arms, int(base.get("train", {}).get("steps", 0)), max(warm, default=0), horizon(study.spec))


def _side(e: Effect) -> str:
    """'above' / 'below' 0, 'noise' (the interval contains 0), or 'few' (not weighed)."""
    if e.estimate is None or e.lo is None or e.hi is None or e.n_min < MIN_SEEDS:
        return "few"
    return "above" if e.lo > 0 else "below" if e.hi < 0 else "noise"


def _iv(e: Effect) -> str:
    """'+0.891 [+0.86, +0.92]'"""
    return f"{signed(e.estimate)} [{signed(e.lo)}, {signed(e.hi)}]" if e.lo is not None else signed(e.estimate)


def _endings(demo: Demo, placement: str, warmup: int, ce: DataCE) -> list[float]:
    return [s.ending(ce.uniform) for s in demo.seeds(placement, warmup)]


def warmup_verdict(demo: Demo, ce: DataCE) -> tuple[str, str]:
    """(outcome of ``WARMUP_OUTCOMES``, its sentence): does Post-LN need warm-up, and Pre-LN?"""
    w = demo.warmup
    post0, postw, pre0, prew = (_endings(demo, p, x, ce) for p, x in (("post", 0), ("post", w), ("pre", 0), ("pre", w)))
    c_post, c_pre = welch(post0, postw), welch(pre0, prew)
    diff = contrast([(post0, 1), (postw, -1), (pre0, -1), (prew, 1)])
    cost = (f"best validation loss without minus with warm-up {w}: Post-LN {_iv(c_post)} {UNIT}, "
            f"Pre-LN {_iv(c_pre)}")
    post, pre, more = _side(c_post), _side(c_pre), _side(diff)
    if "few" in (post, pre, more):
        return "few", (f"Too few finished seeds to weigh warm-up (fewer than {MIN_SEEDS} in an arm; "
                       f"{min(len(v) for v in (post0, postw, pre0, prew))} in the smallest)")
    if post == "above" and more == "above":
        gap = f"; the difference, {_iv(diff)}, excludes 0"
        if pre == "above":
            return "post-more", f"Warm-up helps both here, Post-LN far more: {cost}{gap}"
        return "post-only", f"Post-LN needs warm-up at this setting and Pre-LN does not: {cost}{gap}"
    if post == "above":
        return "both", (f"Warm-up helps Post-LN here, but not distinguishably more than Pre-LN: {cost}; "
                        f"the difference, {_iv(diff)}, contains 0")
    if post == "below":
        return "hurts", f"Warm-up makes Post-LN worse here: {cost}"
    return "none", f"Post-LN does not need warm-up at this setting (within seed noise): {cost}"


def placement_verdict(post: list[float], pre: list[float], step: int | None = None) -> tuple[str, str]:
    """(outcome of ``PLACEMENT_OUTCOMES``, its clause): Post-LN minus Pre-LN of the validation loss
    at ``step``, or of the best validation loss (None)."""
    e = welch(post, pre)
    side = _side(e)
    at = f" at step {step}" if step is not None else ""
    if side == "few":
        return "few", f"{'the loss' + at if step else 'the ending'} is not weighed (fewer than {MIN_SEEDS} seeds a side)"
    if side in ("above", "below"):
        ahead, by = ("Pre-LN", e) if side == "above" else ("Post-LN", welch(pre, post))
        verb = f"is ahead{at}" if step is not None else "ends lower"
        gap = f"{num(by.estimate, 3)} [{num(by.lo, 3)}, {num(by.hi, 3)}]"  # positive: no sign to read
        return ("pre" if side == "above" else "post"), f"{ahead} {verb} by {gap} {UNIT}"
    what = f"are within seed noise of each other{at}" if step is not None else "end within seed noise of each other"
    return "tie", f"the two {what} (Post-LN minus Pre-LN {_iv(e)})"


def plateau(demo: Demo, ce: DataCE, step: int) -> dict[tuple[str, int], tuple[int, int]]:
    """(seeds still on the plateau at ``step``, seeds) per arm; a diverged seed counts as off it."""
    line = ce.unigram - STALL_MARGIN
    out = {}
    for key, seeds in demo.arms.items():
        k = sum(not s.diverged and math.isfinite(b := s.best_until(step)) and b >= line for s in seeds)
        out[key] = (k, len(seeds))
    return out


def _arm(key: tuple[str, int]) -> str:
    return f"{key[0].capitalize()}-LN {'without warm-up' if key[1] == 0 else f'with warm-up {key[1]}'}"


def answer(demo: Demo, ce: DataCE) -> tuple[str, list[str]]:
    """(the verdict, notes): warm-up first, then the placements at the same settings, early (step
    E: faster) and at the end (lower); the notes state the plateau counts at H and at the end,
    and how the verdict is read."""
    w, e = demo.warmup, demo.early
    _, warm = warmup_verdict(demo, ce)
    parts = []
    for wu, where in ((w, f"With warm-up {w}"), (0, "without warm-up")):
        post = [s.at(e) for s in demo.seeds("post", wu) if not s.diverged]
        pre = [s.at(e) for s in demo.seeds("pre", wu) if not s.diverged]
        a, early = placement_verdict(post, pre, e)
        b, end = placement_verdict(_endings(demo, "post", wu, ce), _endings(demo, "pre", wu, ce))
        parts.append(f"{where}, the placements are not weighed (fewer than {MIN_SEEDS} seeds a side)"
                     if a == b == "few" else f"{where}, {early}, and {end}")
    return f"{warm}. {'; '.join(parts)}.", [_plateau_note(demo, ce), _rule_note(ce)]


def _plateau_note(demo: Demo, ce: DataCE) -> str:
    h, end = demo.horizon, demo.steps
    order = [k for k in (("post", 0), ("post", demo.warmup), ("pre", 0), ("pre", demo.warmup)) if k in demo.arms]
    at_h, at_end = plateau(demo, ce, h), plateau(demo, ce, end)
    counts = "; ".join(f"{_arm(k)}: {at_h[k][0]} of {at_h[k][1]}" + (f" ({at_end[k][0]} of {at_end[k][1]} at step {end})" if end != h else "")
                       for k in order)
    text = (f"Still on the unigram plateau at step {h} (best validation loss so far at or above "
            f"{num(ce.unigram, 4)} - {num(STALL_MARGIN)} = {num(ce.unigram - STALL_MARGIN, 4)} {UNIT}, the stability "
            f"map's rule at its horizon): {counts}.")
    a, b = at_h.get(("post", 0)), at_h.get(("post", demo.warmup))
    if a and b and a[1] and b[1]:
        r = rate_diff(a[0], a[1], b[0], b[1])
        text += (f" Post-LN's share on the plateau without minus with warm-up: {_iv(r)} (exact interval). "
                 "The verdict weighs every seed's loss, so it does not rest on which seeds stall.")
    return text


def _rule_note(ce: DataCE) -> str:
    return (f"How the verdict is read: 95% Welch intervals over seeds of the best validation loss (a diverged seed "
            f"counts at ln V = {num(ce.uniform, 4)}) and of the validation loss at the early step; an interval "
            f"that contains 0 is within seed noise; fewer than {MIN_SEEDS} seeds in an arm are not weighed "
            "(normlab.report.demo_answer).")


__all__ = ["PLACEMENT_OUTCOMES", "WARMUP_OUTCOMES", "Demo", "Seed", "answer", "collect",
           "placement_verdict", "plateau", "warmup_verdict"]
