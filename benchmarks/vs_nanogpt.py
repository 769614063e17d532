"""normlab against nanoGPT's model, step by step, at nanoGPT's tiny CPU shape and its baby GPT.

normlab runs at its shipped default: the bench's ``ModelConfig`` of the shape (placement pre,
``model.activation`` left at its default). The other side is nanoGPT's ``model.GPT`` from a
checkout of github.com/karpathy/nanoGPT (``--nanogpt DIR``), built as its train.py builds it at
that shape, with normlab's ``model.bias`` and dropout 0 so that both compute the same ops.
Without ``--nanogpt`` it is a stand-in: the bench's hand-written Pre-LN GPT
(``bench/handwritten.py``) with nanoGPT's exact GELU (``nn.GELU()``), and every line says so.

Steps alternate one by one (normlab, nanoGPT, nanoGPT, normlab, ...: the order flips each
round, so neither side always runs on the caches the other left), each on fixed random tokens
with its own AdamW. Per step: the forward, forward + backward, and the whole step with AdamW;
medians over ``--steps`` rounds. Speed = nanoGPT's median time / normlab's (0.92x: normlab
takes 1/0.92 of nanoGPT's time). The target (issue 42): forward + backward >= 0.97x at both
shapes. Shapes from ``normlab bench``'s sizes: tiny 4L d=128 ctx 64 batch 12 (nanoGPT's CPU
recipe), baby 6L d=384 ctx 256 batch 8 (nanoGPT's shakespeare_char at a CPU batch; its own
batch is 64: ``--batch 64``).

    python benchmarks/vs_nanogpt.py [--sizes tiny,baby] [--steps 40] [--nanogpt DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent))

from _common import json_arg, target, write_targets  # noqa: E402

GOAL = 0.97


def nanogpt_side(s: Any, bias: bool, checkout: Path | None) -> tuple[str, Any, Callable]:
    """(name, model, loss_fn) of nanoGPT's GPT at shape ``s``, or of the stand-in without a checkout."""
    import torch.nn.functional as F

    if checkout is None:
        from normlab.bench.handwritten import HandGPT

        m = HandGPT(s.vocab, s.context, s.n_layer, s.d_model, s.n_head, "gelu")
        return ("nanoGPT stand-in (bench/handwritten.py with nanoGPT's exact GELU)", m,
                lambda x, y: F.cross_entropy(m(x).flatten(0, 1), y.flatten()))
    spec = importlib.util.spec_from_file_location("nanogpt_model", checkout / "model.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"--nanogpt {checkout}: no model.py there; give a checkout of karpathy/nanoGPT")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    m = mod.GPT(mod.GPTConfig(block_size=s.context, vocab_size=s.vocab, n_layer=s.n_layer, n_head=s.n_head,
                              n_embd=s.d_model, dropout=0.0, bias=bias))
    return f"nanoGPT ({checkout / 'model.py'})", m, lambda x, y: m(x, y)[1]


class Side:
    """One model with its AdamW, timing its steps on fixed tokens."""

    def __init__(self, name: str, model: Any, loss_fn: Callable, x: Any, y: Any) -> None:
        import torch

        from normlab.bench.peers import activation_of

        self.name, self.model, self.loss_fn, self.x, self.y = name, model.train(), loss_fn, x, y
        self.activation = activation_of(model)
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
        self.times: list[tuple[float, float, float]] = []  # (forward, + backward, + AdamW) seconds

    def step(self, record: bool = True) -> None:
        t0 = time.perf_counter()
        loss = self.loss_fn(self.x, self.y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if record:
            self.times.append((t1 - t0, t2 - t0, t3 - t0))

    def median(self, part: int) -> float:
        return statistics.median(t[part] for t in self.times)


def compare(size: str, s: Any, steps: int, warmup: int, checkout: Path | None, seed: int = 0) -> list[dict]:
    """Time both sides at shape ``s``, print the table, return the target rows."""
    import torch

    from normlab.bench.peers import model_config
    from normlab.model.build import build_model

    cfg = model_config(s)
    gen = torch.Generator().manual_seed(seed)
    x, y = (torch.randint(0, s.vocab, (s.batch, s.context), generator=gen) for _ in range(2))
    torch.manual_seed(seed)
    ours = build_model(cfg)
    lab = Side("normlab (TransformerLM, the shipped ModelConfig)", ours, lambda a, b: ours(a, b)[1], x, y)
    torch.manual_seed(seed)
    other = Side(*nanogpt_side(s, cfg.bias, checkout), x, y)
    for _ in range(warmup):
        lab.step(record=False)
        other.step(record=False)
    for i in range(steps):
        for side in ((lab, other) if i % 2 == 0 else (other, lab)):
            side.step()
    print(f"\n== {size}: {s.n_layer}L d={s.d_model} heads={s.n_head} ctx={s.context} batch={s.batch}; "
          f"{steps} steps each, alternated one by one, after {warmup} warm-up steps")
    for side in (lab, other):
        print(f"  {side.name}: activation {side.activation}")
    rows = []
    for part, what in enumerate(("forward", "forward + backward", "step with AdamW")):
        a, b = lab.median(part), other.median(part)
        print(f"  {what:<20} normlab {a * 1e3:8.2f} ms  nanoGPT {b * 1e3:8.2f} ms  speed {b / a:.3f}x")
        if part == 1:
            who = "nanoGPT" if checkout is not None else "the nanoGPT stand-in"
            rows.append(target(f"{size} normlab ({lab.activation}) vs {who} ({other.activation}), forward + backward",
                               f"{b / a:.3f}x ({a * 1e3:.2f} vs {b * 1e3:.2f} ms)", f">= {GOAL}x", b / a >= GOAL))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="tiny,baby", help="comma-separated `normlab bench` sizes (default tiny,baby)")
    ap.add_argument("--steps", type=int, default=40, help="timed steps per side (default 40)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per side first (default 5)")
    ap.add_argument("--batch", type=int, help="sequences per step instead of the size's (nanoGPT's baby: 64)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    ap.add_argument("--nanogpt", type=Path, help="a checkout of karpathy/nanoGPT (its model.py is imported); "
                                                 "without it, the hand-written stand-in")
    json_arg(ap)
    a = ap.parse_args()
    import torch

    from normlab.bench.peers import SIZES

    if a.threads:
        torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    rows: list[dict] = []
    for size in a.sizes.split(","):
        s = SIZES.get(size.strip())
        rows += compare(size.strip(), replace(s, batch=a.batch) if a.batch else s, a.steps, a.warmup, a.nanogpt)
    for r in rows:
        print(f"{r['target']}: {r['measured']} (target {r['goal']}: {r['verdict']})")
    write_targets(a.json, rows)


if __name__ == "__main__":
    main()
