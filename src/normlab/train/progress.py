"""Training progress on stderr: a tqdm bar on a terminal, plain lines everywhere else.

A ``\\r``-redrawn bar is unreadable in a log file, a CI page or ``nohup.out``, so when
stderr is not a terminal every ``every``-th logged step prints one line instead (about
twenty lines per run). Both show the validation loss once one is known.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import IO, Any

LINES_PER_RUN = 20


class Progress:
    def __init__(self, total: int, initial: int, run_dir: Path | str, log_every: int, enabled: bool,
                 stream: IO[str] | None = None) -> None:
        self.total, self.enabled = total, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        # Plain lines fall on logged steps (those have metrics), spaced for ~20 per run.
        self.every = log_every * max(1, total // (LINES_PER_RUN * log_every))
        self.val: float | None = None
        self.bar = None
        if not enabled:
            return
        start = f"resuming at step {initial}" if initial else "starting"
        print(f"normlab: training into {run_dir} ({start}, {total} steps)", file=self.stream, flush=True)
        if self.tty:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, dynamic_ncols=True, unit="step", smoothing=0.1,
                            file=self.stream)

    def step(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def logged(self, step: int, metrics: dict[str, Any]) -> None:
        """A metrics line was written at ``step``: refresh the bar or print a plain line."""
        if not self.enabled:
            return
        if metrics.get("val/loss") is not None:
            self.val = metrics["val/loss"]
        loss, tok_s = metrics.get("train/loss"), metrics.get("tokens_per_s")
        parts = {"loss": f"{loss:.4f}" if loss is not None else "n/a"}
        if self.val is not None:
            parts["val"] = f"{self.val:.4f}"
        if tok_s:
            parts["tok/s"] = f"{tok_s:,.0f}"
        if self.bar is not None:
            self.bar.set_postfix(parts)
        elif step % self.every == 0 or step == self.total:
            text = "  ".join(f"{k} {v}" for k, v in parts.items())
            print(f"step {step}/{self.total}  {text}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
