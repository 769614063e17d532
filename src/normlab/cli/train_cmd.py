"""``normlab train`` (one run into a run directory) and ``normlab sample`` (text from a run)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from normlab.cli.common import RUN_OPTIONS, add_config_args, add_run_options


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train one model into a run directory (resumable)",
                       description="Train one model; the run directory is printed on stdout, progress on "
                                   "stderr. Exit 0 for completed and diverged runs "
                                   "(divergence is a result), 130 when interrupted, 2 on bad input.")
    add_config_args(p)
    p.add_argument("--out", metavar="RUN", help="run directory (default: a new runs/<timestamp>, with -1, -2, "
                   "... when two runs start in one second); printed on stdout")
    p.add_argument("--resume", metavar="RUN", help="continue RUN from its latest checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_run_options(p, {"--steps": "total optimizer steps (= train.steps); with --resume, extends a finished "
                                   "run to N",
                        "--data-dir": "directory holding tinyshakespeare.txt (= data.data_dir); with --resume, "
                                      "the folder a run's corpus file was moved to"})
    p.set_defaults(func=_train)

    p = sub.add_parser("sample", help="generate text from a trained run",
                       description="Continue --prompt with text sampled from a run's checkpoint.")
    p.add_argument("run", metavar="RUN", help="run directory")
    p.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    p.add_argument("--tokens", type=int, default=200, help="tokens to generate (default 200)")
    p.add_argument("--temperature", type=float, default=0.8, help="softmax temperature, 0 = greedy (default 0.8)")
    p.add_argument("--top-k", type=int, default=200,
                   help="sample among the k most likely tokens, 0 = all (default 200)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--checkpoint", choices=("best", "latest"), default="best",
                   help="which checkpoint (default best: lowest validation loss)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    p.set_defaults(func=_sample)


def _train(args: argparse.Namespace) -> int:
    """Resolve the config, prepare (every check, no I/O), then run: see normlab.train.run."""
    from normlab.cli.common import config_from_args, run_options
    from normlab.core.errors import UserError
    from normlab.train.run import default_run_dir, execute, prepare

    if args.resume:
        flags = [("--config", args.config), ("--preset", args.preset), ("--placement", args.placement),
                 ("--set", args.overrides), ("--out", args.out)]
        used = [f for f, v in flags if v]
        given = run_options(args)  # --steps with --resume extends the run, --data-dir finds a moved corpus
        used += [flag for flag, _, field, *_ in RUN_OPTIONS if field in given and flag not in ("--steps", "--data-dir")]
        if used:
            raise UserError(f"--resume uses RUN/config.json; drop {', '.join(used)}")
        cfg, run_dir = None, args.resume
    else:
        cfg, run_dir = config_from_args(args), args.out or default_run_dir()
    plan = prepare(cfg, run_dir, resume=bool(args.resume), steps=args.steps if args.resume else None,
                   unique=not (args.out or args.resume), data_dir=args.data_dir if args.resume else None)
    if plan.done is not None:
        print(run_dir, flush=True)
        logging.getLogger(__name__).info(
            f"{run_dir}: already {plan.done['status']} at step {plan.done['steps']}; nothing to do (to train "
            f"further: normlab train --resume {run_dir} --steps N, N > {plan.cfg.train.steps})")
        return 0
    held: list[Path] = []

    def announce(path: Path) -> None:  # stdout is the run directory, one line, once it holds the run
        held.append(path)
        print(path, flush=True)

    try:
        s = execute(plan, quiet=args.quiet, on_run_dir=announce)
    except KeyboardInterrupt:  # before the loop took over Ctrl-C (loading data, building the model)
        s = {"status": "interrupted", "steps": None}
    run_dir = held[0] if held else Path(run_dir)
    if s["status"] == "interrupted":
        from normlab.cli.common import interrupted

        return interrupted("train", resume_train(Path(run_dir), s.get("steps")))
    val = "n/a" if s["final_val_loss"] is None else f"{s['final_val_loss']:.4f}"
    best = "n/a" if s["best_val_loss"] is None else f"{s['best_val_loss']:.4f}"
    extra = f" at step {s['diverged_at_step']}" if s["status"] == "diverged" else ""
    tps = f"{s['tokens_per_s']:.0f}" if s.get("tokens_per_s") else "n/a"
    print(f"{run_dir}: {s['status']}{extra}, {s['steps']} steps, val loss {val} (best {best}), "
          f"{s['wall_time_s']:.1f} s, {tps} tokens/s", file=sys.stderr)
    return 0


def resume_train(run_dir: Path, step: Any) -> str:
    """What to say after Ctrl-C: the command that resumes RUN, or that nothing was written yet."""
    import shlex

    from normlab.run.dir import RunDir

    if not RunDir(run_dir).is_run():
        return f"{run_dir} was not started yet; rerun the same command"
    at = f"at step {step}, checkpointed; " if step is not None else ""  # None: stopped before the loop
    return f"{at}resume with: normlab train --resume {shlex.quote(str(run_dir))}"


def _sample(args: argparse.Namespace) -> int:
    from normlab.train.sample import sample_run

    text = sample_run(args.run, args.prompt, args.tokens, args.temperature,
                      args.top_k or None, args.seed, args.checkpoint, args.device)
    print(text)
    return 0
