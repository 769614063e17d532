"""The ``packed-study`` part of ``benchmarks/gpu_check.py``: trials per hour of a study whose
trials share one GPU in packs of K (K chosen by the lab from the trials' memory cost, as the
slurm executor chooses it: ``normlab.study.packing.pack_for_all``) against one trial at a time
on the same GPU. Both through ``normlab study run`` (local executor, one worker), as a user runs
them; the one-at-a-time arm trains two trials and its rate is theirs.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # _gpu_parts imports this module for its PARTS
    from _gpu_parts import Ctx

LIMIT = 32  # at most this many trials in the pack measured (the cap, not memory, bounds it on a big GPU)


def _spec(path: Path, n: int, steps: int, dry: bool, device: str, corpus: str | None) -> Path:
    size = "n_layer = 2\nd_model = 32\nn_head = 2\ncontext = 32" if dry else \
        "n_layer = 6\nd_model = 128\nn_head = 4\ncontext = 64"
    data = f'\n[base.data]\ncorpus = "{corpus}"\n' if corpus else ""
    path.write_text(f'name = "packed"\nseeds = {list(range(n))}\n[base.model]\n{size}\ndropout = 0.0\n'
                    f'[base.train]\nsteps = {steps}\nbatch_size = 16\neval_every = {steps}\neval_batches = 2\n'
                    f'device = "{device}"\n[base.optim]\nlr = 1e-3\nwarmup_steps = 10\n{data}', encoding="utf-8")
    return path


def packed_study(ctx: Ctx) -> None:
    from normlab.run.resolve import RunConfig
    from normlab.study.packing import device_memory, pack_for_all
    from normlab.study.spec import load_spec

    steps = 4 if ctx.dry else 200
    probe = load_spec(_spec(ctx.work / "probe.toml", 2, steps, ctx.dry, ctx.device, ctx.corpus))
    cfgs = [RunConfig.from_json(t.config_json) for t in probe.trials()]
    memory = device_memory(ctx.device) or 2 * 2**30  # the dry run: a fake 2 GiB budget
    pack = pack_for_all(cfgs * LIMIT, memory)
    k = min(pack.k, LIMIT)
    rates = {}
    for arm, n, batch in (("packed", k, k), ("one at a time", 2, 1)):
        spec = _spec(ctx.work / f"{arm[:6]}.toml", n, steps, ctx.dry, ctx.device, ctx.corpus)
        t0 = time.perf_counter()
        rc = subprocess.run([sys.executable, "-m", "normlab", "study", "run", str(spec), "--store",
                             str(ctx.work / f"store-{arm[:6]}"), "--workers", "1", "--batch", str(batch),
                             "--quiet"]).returncode
        wall = time.perf_counter() - t0
        if rc != 0:
            ctx.add(f"packed study: {arm}", f"normlab study run exit {rc} after {wall:.0f} s", "completes", False)
            return
        rates[arm] = n / wall * 3600
    ratio = rates["packed"] / rates["one at a time"]
    ctx.add(f"packed study ({steps} steps a trial, K={k} of {pack.k} that fit)",
            f"{rates['packed']:,.0f} trials/h packed vs {rates['one at a time']:,.0f} one at a time: {ratio:.2f}x; "
            + pack.text(), "> 1x", ratio > 1 if not ctx.dry else None)
