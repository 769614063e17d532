"""``normlab study run|status|export|presets``: grids of runs in a resumable store (docs/studies.md)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    from normlab.study.frame import FORMATS, TABLES  # no torch: --help stays fast

    p = sub.add_parser("study", help="run a grid of trainings into a resumable store; show its results")
    ssub = p.add_subparsers(dest="study_command", metavar="ACTION", parser_class=type(p))
    r = ssub.add_parser("run", help="run (or resume) every unfinished trial of a study")
    r.add_argument("spec", nargs="?", metavar="SPEC_OR_PRESET",
                   help="a study TOML file or a preset (see `normlab study presets`); omit to resume --store")
    r.add_argument("--store", required=True, metavar="DIR", help="the study's directory (created if missing)")
    r.add_argument("--scale", default="cpu", help="preset size: smoke, cpu (default), gpu; pre-vs-post also seed; "
                                                   "stability-frontier also quick (one placement's critical lr in minutes)")
    r.add_argument("--placements", default=None, metavar="A,B",
                   help="the placements of a preset that takes them (stability-frontier), comma-separated")
    r.add_argument("--executor", default="local", help="local (worker processes, default), ray or slurm")
    r.add_argument("--workers", type=int, default=None, metavar="N",
                   help="parallel trials (default: one per core / threads-per-run)")
    r.add_argument("--threads-per-run", type=int, default=1, metavar="T",
                   help="torch threads per trial (default 1: fastest for small models, see docs)")
    r.add_argument("--batch", type=int, default=None, metavar="K",
                   help="train up to K compatible trials as one batched computation (default: 8 on a "
                        "GPU, 1 on CPU where it does not pay; see docs/performance.md; slurm with GPUs: "
                        "as many as fit in one GPU's memory)")
    r.add_argument("--ray-address", default=None, metavar="ADDR", help="existing Ray cluster (default: a local one)")
    r.add_argument("--slurm", dest="slurm", action="append", default=[], metavar="KEY=VALUE",
                   help="a [slurm] option for --executor slurm, e.g. --slurm partition=gpu --slurm time=240 "
                        "(repeatable; `normlab config --explain slurm` lists them)")
    r.add_argument("--slurm-config", default=None, metavar="FILE",
                   help="a TOML file whose [slurm] table gives the slurm executor's options (--slurm wins)")
    r.add_argument("--lease", type=float, default=60.0, metavar="S",
                   help="seconds without heartbeat before a running trial is presumed dead and reclaimed")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a base run option, e.g. --set train.device=cuda (repeatable)")
    r.add_argument("--dry-run", action="store_true", help="validate and list the trials (with --executor slurm: "
                                                          "the packing, the job array and its sbatch script); "
                                                          "run nothing")
    r.add_argument("--retry-failed", action="store_true",
                   help="run the store's failed trials again (after fixing their cause; `study status` shows it)")
    r.add_argument("--quiet", action="store_true", help="no progress on stderr (a bar on a terminal, else lines)")
    r.set_defaults(func=_run)
    s = ssub.add_parser("status", help="counts by status and the results table of a store")
    s.add_argument("store", metavar="DIR", help="the study store directory (--store of study run)")
    s.set_defaults(func=_status)
    e = ssub.add_parser("export", help="a store's trials, logged steps and per-layer diagnostics as tables",
                        description="Write OUT/trials.FMT (one row per trial: axes, seed, outcome, losses, steps, "
                                    "wall time), OUT/steps.FMT (one row per logged step) and, with --what layers, "
                                    "OUT/layers.FMT (one row per step, statistic and layer of the in-training "
                                    "diagnostics). CSV needs nothing more than normlab; Parquet needs pandas and "
                                    "pyarrow (pip install 'normlab[parquet]').")
    e.add_argument("store", metavar="STORE", help="the study store directory (--store of study run)")
    e.add_argument("--format", dest="fmt", choices=FORMATS, default="csv", help="file format (default csv)")
    e.add_argument("--what", default="trials,steps", metavar="TABLES",
                   help=f"comma-separated tables to write, of {', '.join(TABLES)} (default trials,steps)")
    e.add_argument("--out", metavar="DIR", default=None, help="where the files go (default: STORE/export)")
    e.set_defaults(func=_export)
    ps = ssub.add_parser("presets", help="list study presets")
    ps.set_defaults(func=_presets)
    p.set_defaults(func=lambda args: (p.print_help(), 0)[1])


def _load(args: argparse.Namespace):  # -> StudySpec | None
    from normlab.core.errors import UserError
    from normlab.core.schema import apply_overrides
    from normlab.study.presets import STUDY_PRESETS, study_preset
    from normlab.study.spec import load_spec

    placements = None if args.placements is None else [p.strip() for p in args.placements.split(",") if p.strip()]
    if args.spec is None:
        for flag, given in (("--set", args.overrides), ("--placements", placements is not None)):
            if given:
                raise UserError(f"{flag} needs a study file or preset (a store keeps the settings it started with)")
        return None
    path = Path(args.spec)
    preset = not (path.suffix == ".toml" or path.exists())
    if not preset:
        if placements is not None:
            raise UserError(f"--placements chooses a preset's placements; in {args.spec} write the "
                            "model.placement axis under [axes]")
        spec = load_spec(path)
    elif args.spec in STUDY_PRESETS:
        spec = study_preset(args.spec, args.scale, placements)
    else:
        from normlab.core.errors import unknown_name

        e = unknown_name("study", args.spec, STUDY_PRESETS.names())
        raise UserError(f"{e} (or give a path to a study .toml file)")
    if args.overrides:
        import dataclasses

        from normlab.run.resolve import RunConfig

        _refuse_axis_overrides(spec, args.overrides, args.spec if preset else None)
        spec = dataclasses.replace(spec, base=apply_overrides(RunConfig, spec.base, args.overrides))
    return spec


def _refuse_axis_overrides(spec, overrides: list[str], preset: str | None) -> None:  # spec: StudySpec
    """A ``--set`` on a key each trial sets itself (an axis, a zip key, the seed) would be
    overwritten in every trial: refused, naming how to change that axis instead."""
    from normlab.core.errors import ConfigError

    for item in overrides:
        key = item.split("=", 1)[0].strip()
        for axis in [*spec.axis_keys(), "seed"]:
            if key == axis or key.startswith(axis + ".") or axis.startswith(key + "."):
                break
        else:
            continue
        if axis == "seed":
            fix = "the seeds are the study's own (seeds = [...] in a study TOML)"
        elif preset is None:
            fix = f"change the axis {axis!r} in the study file ([axes] or [[zip]])"
        elif axis == "model.placement" and "placements" in _preset_options(preset):
            fix = f"choose the placements with --placements instead, e.g. `normlab study run {preset} --placements keel,pre`"
        else:
            fix = f"preset {preset!r} fixes it; write a study TOML with the {axis!r} axis you want (docs/studies.md)"
        raise ConfigError("--set", item, f"{axis} is an axis of study {spec.name!r}, set by every trial, so --set "
                                         f"would be ignored; {fix}")


def _preset_options(name: str) -> list[str]:
    from normlab.study.presets import STUDY_PRESETS, takes_placements

    return ["placements"] if takes_placements(STUDY_PRESETS.get(name, "study")) else []


def _run(args: argparse.Namespace) -> int:
    from normlab.core.fscheck import writable_dir
    from normlab.study.runner import run_study, status_text

    writable_dir(args.store, "--store", "choose another --store (a store is written as it runs)")
    spec = _load(args)
    options = _executor_options(args)
    if args.dry_run:
        return _dry_run(args, spec, options)
    from normlab.cli.common import interrupted

    try:
        store = run_study(spec, args.store, executor=args.executor, workers=args.workers,
                          threads=args.threads_per_run, address=args.ray_address, lease_s=args.lease,
                          batch=args.batch, progress=not args.quiet, retry_failed=args.retry_failed,
                          options=options)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the trials stopped at their checkpoints
        return interrupted("study", resume_study(args))
    if store.counts().get("interrupted"):  # a worker alone was signalled; its trial checkpointed
        return interrupted("study", resume_study(args))
    print(status_text(store))
    # 1: some trial failed, or workers died and left trials unfinished (rerun to resume them)
    return 1 if store.counts().get("failed") or store.unfinished() else 0


def _executor_options(args: argparse.Namespace):  # -> SlurmConfig | None
    """The executor's own section: ``--slurm-config FILE`` and ``--slurm KEY=VALUE`` (slurm only)."""
    from normlab.core.errors import UserError

    given = bool(args.slurm) or args.slurm_config is not None
    if args.executor != "slurm":
        if given:
            raise UserError(f"--slurm and --slurm-config set the slurm executor's options; add --executor slurm "
                            f"(this run uses --executor {args.executor})")
        return None
    from normlab.study.slurm_config import load_slurm

    return load_slurm(args.slurm_config, args.slurm)


def _dry_run(args: argparse.Namespace, spec, options) -> int:  # spec: StudySpec | None
    from normlab.study.spec import spec_from_dict
    from normlab.study.store import Store

    if spec is None:
        spec = spec_from_dict(Store(args.store).spec)
    trials = spec.trials()
    print(f"study {spec.name!r}: {len(trials)} trials (scientific: {', '.join(spec.scientific) or '-'}; "
          f"nuisance: {', '.join(spec.nuisance) or '-'}; seeds {spec.seeds})")
    for t in trials:
        print(f"  {t.id}  " + "  ".join(f"{k}={v}" for k, v in t.params.items()))
    if options is not None:
        from normlab.study.slurm_script import plan_text

        print()
        print(plan_text(spec, trials, args.store, options, threads=args.threads_per_run, batch=args.batch))
    return 0


def resume_study(args: argparse.Namespace) -> str:
    """The command that resumes an interrupted ``study run`` with the same executor settings."""
    import shlex

    cmd = ["normlab", "study", "run", "--store", args.store]
    for flag, value, default in (("--executor", args.executor, "local"), ("--workers", args.workers, None),
                                 ("--threads-per-run", args.threads_per_run, 1), ("--batch", args.batch, None),
                                 ("--ray-address", args.ray_address, None), ("--lease", args.lease, 60.0),
                                 ("--slurm-config", args.slurm_config, None)):
        if value != default:
            cmd += [flag, str(value)]
    for item in args.slurm:
        cmd += ["--slurm", item]
    return f"finished trials are kept; resume with: {shlex.join(cmd)}"


def _status(args: argparse.Namespace) -> int:
    from normlab.study.runner import status_text
    from normlab.study.store import Store

    print(status_text(Store(args.store)))
    return 0


def _export(args: argparse.Namespace) -> int:
    from normlab.study.frame import load

    tables = load(args.store)
    what = [w.strip() for w in args.what.split(",") if w.strip()]
    for path in tables.export(args.out or Path(args.store) / "export", args.fmt, what):
        print(path)
    return 0


def _presets(args: argparse.Namespace) -> int:
    from normlab.study.presets import STUDY_PRESETS

    for name, fn in STUDY_PRESETS.items():
        first = " ".join((fn.__doc__ or "").split())
        print(f"{name:<16} {first}")
    return 0
