"""The checkpoints of a run directory, mixed into ``RunDir`` (``normlab.run.dir`` names the
folders; ``normlab.run.checkpoint`` checks and loads them): which checkpoint a reader gets, what
is wrong with a damaged one, the kept step checkpoints, its identity without hashing, the model
it holds, and saving one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from normlab.core.errors import UserError

if TYPE_CHECKING:
    from normlab.run.config import RunConfig


class RunCheckpoints:
    """``RunDir``'s checkpoint methods; ``path``, ``checkpoint_dir``, ``config``, ``step_name`` and
    ``_kept_steps`` are RunDir's."""

    path: Path

    def checkpoint_dir(self, name: str) -> Path:
        raise NotImplementedError  # RunDir's

    def config(self, label: str = "RUN") -> RunConfig:
        raise NotImplementedError  # RunDir's

    @staticmethod
    def step_name(step: int) -> str:
        raise NotImplementedError  # RunDir's

    def _kept_steps(self) -> list[int]:
        raise NotImplementedError  # RunDir's

    def find_checkpoint(self, name: str) -> Path | None:
        """The intact checkpoint ``name`` (or its twin after an interrupted swap), else None."""
        from normlab.run import checkpoint

        return checkpoint.find(self.checkpoint_dir(name))

    def checkpoint_problem(self, name: str) -> str | None:
        from normlab.run import checkpoint

        return checkpoint.problem(self.checkpoint_dir(name))

    def step_checkpoints(self) -> list[tuple[int, Path]]:
        """(step, folder) of every kept step checkpoint, in step order; an interrupted swap's
        twin stands in for its folder. A damaged one is an error naming it, never skipped (a
        series with a hole would read as a smooth curve)."""
        from normlab.run import checkpoint

        out = []
        for s in self._kept_steps():
            folder = self.checkpoint_dir(self.step_name(s))
            found = checkpoint.find(folder)
            if found is None:
                raise UserError(f"checkpoint {folder} is damaged ({checkpoint.problem(folder)}); "
                                "delete it to leave that step out, or retrain the run")
            out.append((s, found))
        return out

    def pick_checkpoint(self, which: str = "best") -> Path:
        """The intact checkpoint ``which`` (best or latest), for readers.

        A run that never evaluated has no ``best``: ``latest`` is used, as documented. A damaged
        checkpoint is never passed over for another one: it is an error naming it, and the
        other checkpoint when that one is intact (``--checkpoint NAME``).
        """
        from normlab.run import checkpoint

        other = "latest" if which == "best" else "best"
        for name in (which, other):
            folder = self.checkpoint_dir(name)
            if folder.exists():
                bad = checkpoint.problem(folder)
                if bad is None:
                    return folder
                alt_name = other if name == which else which
                fix = (f"use --checkpoint {alt_name}" if self.find_checkpoint(alt_name) is not None
                       else "no intact checkpoint is left: retrain the run or restore the folder from a backup")
                raise UserError(f"checkpoint {folder} is damaged ({bad}); {fix}")
            found = checkpoint.find(folder)  # the twin an interrupted swap leaves
            if found is not None:
                return found
        raise UserError(f"{self.path}: no checkpoint under checkpoints/ (best or latest); train it first")

    def checkpoint_identity(self, which: str = "best") -> dict[str, Any] | None:
        """``checkpoint.identity`` of the folder ``pick_checkpoint(which)`` chooses (same order:
        ``which``, its interrupted swap's twin, then the other one), read from its manifest
        without hashing, so a reader can ask it on every page; None without a checkpoint."""
        from normlab.run import checkpoint

        try:
            for name in (which, "latest" if which == "best" else "best"):
                folder = self.checkpoint_dir(name)
                for cand in checkpoint.candidates(folder):
                    if cand.is_dir():
                        return checkpoint.identity(cand)
        except OSError:  # an unreadable checkpoints/: loading it says why, in its own words
            return None
        return None

    def load_model(self, which: str = "best", label: str = "RUN", device: Any = "cpu") -> tuple[Any, RunConfig, dict]:
        """(model in eval mode, RunConfig, the checkpoint's state.json) from checkpoint ``which``
        (hash-checked before any tensor is read)."""
        from normlab.model.build import build_model
        from normlab.model.io import is_model_dir, load_config
        from normlab.run import checkpoint

        cfg = self.config(label)
        folder = self.pick_checkpoint(which)
        model_cfg = cfg.model
        if is_model_dir(folder):  # the model the checkpoint holds, as saved
            model_cfg = load_config(folder)
        model = build_model(model_cfg).to(device)
        state = checkpoint.load(folder, model, restore_rng=False)
        return model.eval(), cfg, state

    def save_checkpoint(self, name: str, model: Any, state: dict[str, Any], optimizer: Any = None) -> None:
        from normlab.run import checkpoint

        checkpoint.save(self.checkpoint_dir(name), model, state, optimizer)
