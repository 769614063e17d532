"""``Metrics``: where a run's metrics lines go, its loggers (RUN/metrics.jsonl first), with the
tokens each line counts; the solo and the batched loop log through it."""

from __future__ import annotations

from typing import Any

from normlab.train.loggers import Logger


class Metrics:
    """One metrics line per logged step to every logger; ``finish`` hands them the summary and
    ``close`` releases them (a W&B run, an open file). Empty on a rank that does not log."""

    def __init__(self, loggers: list[Logger], tokens_per_step: int) -> None:
        self.loggers, self.tokens_per_step = loggers, tokens_per_step

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """``tokens`` first (tokens seen by step ``step``), then ``metrics``."""
        row = {"tokens": step * self.tokens_per_step, **metrics}
        for lg in self.loggers:
            lg.log(row, step)

    def finish(self, summary: dict[str, Any]) -> None:
        for lg in self.loggers:
            lg.finish(summary)

    def close(self) -> None:
        for lg in self.loggers:
            lg.close()
