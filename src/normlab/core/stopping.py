"""Stop signals: SIGINT (Ctrl-C) and SIGTERM (``kill``, a scheduler, a container stop) both ask
a command to stop at a safe point and leave something resumable.

The first one a process gets is remembered, so that a command exits 128 + its number (130,
143) and a study worker claims nothing after it; later ones are only noted, so that a second
signal (Ctrl-C to a process group reaches a worker directly *and* through its study process)
cannot interrupt the bookkeeping of the first. Python runs signal handlers in the main thread
only: elsewhere nothing is installed.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_received: list[int] = []  # the first stop signal since the outermost handling began
_depth = [0]


def received() -> int | None:
    """The first stop signal this process got (while a handler of this module was installed)."""
    return _received[0] if _received else None


def forget() -> None:
    """Start afresh (a command starting in a process that has run others, as tests do)."""
    _received.clear()


def exit_status() -> int:
    """128 + the stop signal received (130 for Ctrl-C, 143 for SIGTERM); 130 when a
    KeyboardInterrupt came without one (raised by the code itself)."""
    return 128 + int(received() or signal.SIGINT)


def interrupt(signum: int) -> None:
    """A handler for code that has nothing to save between steps: stop as Ctrl-C does by
    default, by raising KeyboardInterrupt where the main thread is."""
    raise KeyboardInterrupt


@contextlib.contextmanager
def handling(handler: Callable[[int], None]) -> Iterator[None]:
    """While inside, ``handler(signum)`` runs on the first SIGINT or SIGTERM (it may raise to
    stop what the main thread runs); the previous handlers come back on exit. The outermost
    ``handling`` starts with nothing received; nested ones (a training inside a study worker)
    keep what the outer one saw."""

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:
        if _received:
            return
        _received.append(signum)
        handler(signum)

    if _depth[0] == 0:
        forget()
    old = {sig: signal.signal(sig, on_signal) for sig in SIGNALS}
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1
        for sig, previous in old.items():
            signal.signal(sig, previous)
