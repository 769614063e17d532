"""A run across its starts, mixed into ``RunDir``: holding RUN for its one writer (``writing``),
whether a run has anything left to do (``finished``), and its logs back to a step, in place on a
resume (``truncate_logs``) or copied into a run read at a horizon (``write_cut``).

These are what a start decides and does with RUN's files (``train/plan.py``, ``train/run.py``,
``normlab.study.at_horizon``), not where the files are: every name they use (the lock, the
marker, config.json, the step logs, what a cut copies) is ``normlab.run.dir``'s, given to this
class by ``RunDir``'s class attributes, so a new run file is still one edit there and this
module spells none.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, ClassVar, Iterator, Sequence, TypeVar

from normlab.core.dirlock import held
from normlab.core.errors import UserError
from normlab.core.fsutil import atomic_write_text, read_jsonl, write_jsonl

R = TypeVar("R", bound="RunResume")


class RunResume:
    """``RunDir``'s methods across starts; ``path``, the names and the reads below are RunDir's."""

    path: Path
    # RunDir sets these to dir.py's names: this module cannot import them, dir.py imports it
    _LOCK: ClassVar[str]
    _MARKER: ClassVar[str]
    _CONFIG: ClassVar[str]
    _STEP_LOGS: ClassVar[tuple[str, ...]]
    _CUT_COPIES: ClassVar[tuple[str, ...]]

    def is_run(self) -> bool:
        raise NotImplementedError  # RunDir's

    def holds_run(self) -> bool:
        raise NotImplementedError  # RunDir's

    def summary(self) -> dict[str, Any] | None:
        raise NotImplementedError  # RunDir's

    def _table(self, name: str) -> dict[str, Any] | None:
        raise NotImplementedError  # RunDir's

    def write_summary(self, summary: dict[str, Any]) -> None:
        raise NotImplementedError  # RunDir's

    # ------------------------------------------------------------------ holding it (writers)
    @contextlib.contextmanager
    def writing(self: R, flag: str, *, fresh: bool = False, created: Sequence[Path] = (), command: str | None = None,
                other: str | None = None) -> Iterator[R]:
        """``with run.writing("--out", fresh=True):`` RUN is this process's alone for the block.

        RUN is made if missing, and held by an OS lock that the kernel drops when the process
        ends; another writer is refused in one line naming its pid (and ``other``, the way
        around it). ``fresh``: a run found in
        RUN once the lock is held (another process got there first) is refused too; else RUN
        must hold a run (config.json), which the block continues or adds to. A failed
        block leaves no empty folder it made (``normlab.core.dirlock.held``).
        """
        def check() -> None:
            if fresh and self.holds_run():
                raise UserError(f"{flag} {self.path}: already holds a run; use --resume {self.path} "
                                f"or another {flag}")
            if not fresh and not self.is_run():  # a run is what is continued or added to
                raise UserError(f"{flag} {self.path}: no config.json there; is it a normlab run directory "
                                "(`normlab train --out DIR` makes one)?")

        other = other or (f"choose another {flag}" if fresh else None)
        with held(self.path, self._LOCK, flag=flag, kind="run", marker=self._MARKER, created=created, command=command,
                  check=check, other=other):
            yield self

    # ------------------------------------------------------------------ whether it is done
    def finished(self) -> dict[str, Any] | None:
        """The summary of a run that has nothing left to do (completed or diverged), else None.

        A completed summary short of config.json's train.steps is an extension killed part-way
        (it raises the config when it starts, rewrites the summary when it ends): not finished,
        so a resume goes on from its checkpoint instead of returning the old total's summary."""
        done = self.summary()
        if not done or done.get("status") not in ("completed", "diverged"):
            return None
        steps = ((self._table(self._CONFIG) or {}).get("train") or {}).get("steps")
        if done.get("status") == "completed" and isinstance(steps, int) and int(done.get("steps") or 0) < steps:
            return None
        return done

    # ------------------------------------------------------------------ back to a step
    def truncate_logs(self, upto: int) -> None:
        """Drop log lines after the checkpoint step (resume rewrites them) and any torn last line."""
        for name in self._STEP_LOGS:
            p = self.path / name
            if p.exists():
                write_jsonl(p, [r for r in read_jsonl(p) if r.get("step", 0) <= upto])

    def write_cut(self, src: RunResume, upto: int, summary: dict[str, Any]) -> None:
        """Make RUN the run ``src`` as it stood at step ``upto``: its config.json and data.json,
        its logs without the lines after ``upto``, and ``summary`` (a run read at a horizon,
        ``normlab.study.at_horizon``). No checkpoints: a run keeps its last step's only."""
        self.path.mkdir(parents=True, exist_ok=True)
        for name in self._CUT_COPIES:
            if (src.path / name).is_file():
                atomic_write_text(self.path / name, (src.path / name).read_text(encoding="utf-8"))
        for name in self._STEP_LOGS:
            write_jsonl(self.path / name, [r for r in read_jsonl(src.path / name) if r.get("step", 0) <= upto])
        self.write_summary(summary)
