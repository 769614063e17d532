"""Status messages go through :mod:`logging`; a command's own output goes to stdout.

Every module logs to a child of the ``normlab`` logger (``log = logging.getLogger(__name__)``).
Used as a library, normlab configures nothing: Python's default shows warnings and errors
on stderr and drops the progress chatter, and an application attaches its own handlers.
The CLI calls :func:`setup` once, which shows ``INFO`` and above on stderr as
``normlab <command>: <message>`` lines (``warning:`` in front of warnings), so piped stdout
holds only what the command was asked to print (a table, a path, JSON).
"""

from __future__ import annotations

import logging
import sys

ROOT = "normlab"


class _Stderr(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is at the time of the record, so that
    redirections made after setup (pytest's capture, a caller's contextlib.redirect_stderr)
    still see the lines."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # noqa: ANN201 - the attribute logging.StreamHandler reads
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


class _Format(logging.Formatter):
    def __init__(self, command: str) -> None:
        super().__init__()
        self.prefix = f"normlab {command}: " if command else "normlab: "

    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        return f"{self.prefix}{level}{record.getMessage()}"


def setup(command: str = "", *, quiet: bool = False) -> None:
    """Show normlab's status messages on stderr (the CLI's choice; idempotent).

    ``quiet``: warnings and errors only.
    """
    logger = logging.getLogger(ROOT)
    for h in list(logger.handlers):
        if isinstance(h, _Stderr):
            logger.removeHandler(h)
    handler = _Stderr()
    handler.setFormatter(_Format(command))
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING if quiet else logging.INFO)
    # Records still propagate: the CLI configures no root handler (so nothing prints twice),
    # and an embedding application or pytest's caplog still sees them.


__all__ = ["ROOT", "setup"]
