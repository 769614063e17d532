"""``normlab bench``: train-step throughput of normlab against peers at identical shapes."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="throughput vs a hand-written GPT, x-transformers, HF GPT-2 (tokens/s, MFU)",
                       description="Train-step throughput (median of timed windows after warm-up, "
                                   "min-max spread) of normlab vs peers at identical shapes, "
                                   "printed as ratios vs the fastest peer. See docs/performance.md.")
    p.add_argument("--sizes", "--size", default="tiny,baby,deep", help="comma list of tiny, baby, deep, or all")
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda is skipped when no GPU is present)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                   help="parameter and activation dtype (default float32)")
    p.add_argument("--peers", default="normlab,hand,xtransformers,hf-gpt2",
                   help="comma list: normlab, hand (a hand-written Pre-LN GPT), xtransformers, hf-gpt2 (or "
                        "variants normlab-fused, hand-pre, xt-pre, xt-sandwich)")
    p.add_argument("--repeats", type=int, default=5, help="timed windows (median reported)")
    p.add_argument("--window-steps", type=int, default=10, help="train steps per timed window")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before the windows")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = torch default)")
    p.add_argument("--out", type=Path, help="also write the results as JSON here")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from normlab.core.errors import UserError

    if args.repeats < 1 or args.window_steps < 1 or args.warmup < 0:
        raise UserError("--repeats and --window-steps must be >= 1, --warmup >= 0")
    if args.device not in ("cpu",) and not args.device.startswith("cuda"):
        raise UserError(f"--device {args.device!r}: use cpu or cuda")
    if args.out is not None:
        from normlab.core.fscheck import writable_file

        writable_file(args.out, "--out")  # before minutes of timing, not after
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        logging.getLogger(__name__).warning("no CUDA device here; --device cuda skipped")
        return 0
    from normlab.bench.peers import SIZES
    from normlab.bench.suite import run_suite

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    sizes = SIZES.names() if args.sizes == "all" else [s.strip() for s in args.sizes.split(",") if s.strip()]
    peers = [s.strip() for s in args.peers.split(",") if s.strip()]
    run_suite(sizes, peers, args.device, args.dtype, args.repeats, args.window_steps, args.warmup, args.out)
    return 0
