"""Runtime context of a run: device choice, DDP process group, and the env.json record."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from normlab import __version__
from normlab.core.errors import ConfigError, UserError


@dataclass
class Dist:
    """This process's place in a (possibly 1-process) data-parallel job."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1


def pick_device(name: str) -> torch.device:
    """``auto`` means CUDA when present, else CPU; an explicit CUDA without one is a user error."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"train.device={name!r}: CUDA is not available here; use auto or cpu")
    return torch.device(name)


def world_size() -> int:
    """Processes in this job: torchrun's WORLD_SIZE, 1 without it (known before joining)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def init_dist(device_name: str) -> tuple[Dist, torch.device]:
    """Join the torchrun process group when WORLD_SIZE > 1 (gloo on CPU, nccl on CUDA)."""
    world = world_size()
    if world <= 1:
        return Dist(), pick_device(device_name)
    import torch.distributed as td

    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(device_name)
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not td.is_initialized():
        td.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Dist(rank, world, local), device


def close_dist(dist: Dist, finished: bool = False) -> None:
    """Leave the process group. ``finished``: every rank completed the same steps, so they can
    meet at a barrier first; tearing gloo down while a peer still writes its summary can abort
    the process ("terminate called without an active exception", seen in the DDP test). After
    a failure or an interrupt the ranks may be in different collectives: no barrier then."""
    if dist.enabled:
        import torch.distributed as td

        if td.is_initialized():
            if finished:
                td.barrier()
            td.destroy_process_group()


def git_revision() -> dict[str, Any] | None:
    """Commit and dirtiness of the working tree holding the normlab sources, if it is a git checkout."""
    src = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True, timeout=5)
        if rev.returncode != 0:
            return None
        # --no-optional-locks: status must not take index.lock, or a run killed mid-call (a
        # lost node, a SIGKILLed study) leaves the checkout's git locked.
        dirty = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"],
                               cwd=src, capture_output=True, text=True, timeout=5)
        return {"commit": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: torch.device, seed: int, dist: Dist) -> dict[str, Any]:
    """What env.json records: enough to rerun or explain a result later."""
    import numpy

    return {
        "normlab": __version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "threads": torch.get_num_threads(),
        "world_size": dist.world,
        "git": git_revision(),
        "seed": seed,
        "argv": list(sys.argv),
        "hostname": socket.gethostname(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def check_cpp_compiler() -> None:
    """torch.compile on CPU generates C++: fail before training, in one line, without one."""
    try:
        from torch._inductor.cpp_builder import get_cpp_compiler
    except ImportError:  # private API moved: let torch.compile report for itself
        return
    try:
        get_cpp_compiler()
    except Exception as e:
        raise ConfigError("train.compile", True, f"torch.compile on CPU needs a C++ compiler ({type(e).__name__}); "
                          "install g++ (or set $CXX) or set train.compile=false") from None
