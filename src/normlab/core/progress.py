"""Progress of long work on stderr: finished/total, the current item, elapsed time and an ETA.

One :class:`Progress` serves every long command (``study run``, ``claims``, ``demo``,
``probe``): on a terminal it draws a tqdm bar; anywhere else (a pipe, a log file, CI) it
prints plain lines, because a ``\\r``-redrawn bar is unreadable there. A plain line is
printed when an item finishes (at most one per ``gap_s``, so fast items do not flood the
log), when nothing was printed for ``every_s`` while work goes on (a long item is not
silence), for each :meth:`note`, and at the end.

Work is counted per *kind* (``trial``, ``model``): a claims run mixes quick models that take
a second with trainings that take minutes, so one rate over both would give a useless ETA.
Each kind's rate is measured from its own start, counting only what finished in this
session (a resumed store's finished trials say nothing about speed); a kind with nothing
finished yet is named as not timed yet rather than guessed.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Callable


@dataclass
class _Kind:
    total: int = 0
    done: int = 0
    before: int = 0               # already finished when the work was planned (resumed)
    started: float | None = None  # when this session began working on this kind


def duration(s: float) -> str:
    """'42 s', '3m05s', '1h02m'."""
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


class Progress:
    """A progress display; thread-safe (a store poller and the main thread may both feed it).

    ``stream`` defaults to stderr; ``tty`` defaults to whether the stream is a terminal (a
    test passes a StringIO and reads the plain lines). ``enabled=False`` prints nothing.
    """

    def __init__(self, label: str, *, stream: IO[str] | None = None, tty: bool | None = None,
                 enabled: bool = True, every_s: float = 30.0, gap_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic, ticker: bool = True) -> None:
        self.label, self.enabled, self.every_s, self.gap_s, self.clock = label, enabled, every_s, gap_s, clock
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.kinds: dict[str, _Kind] = {}
        self.current = ""
        self.t0 = clock()
        self._last_line = self.t0
        self._said_done: tuple[int, int] | None = None  # the counts of the last 'done' line printed
        self._lock = threading.RLock()
        self._bar: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        if enabled and ticker:
            # Keeps a terminal bar's clock moving and prints the heartbeat line of a long item.
            self._thread = threading.Thread(target=self._tick_loop, daemon=True, name="normlab-progress")
            self._thread.start()

    # -- feeding -------------------------------------------------------------------
    def add(self, kind: str, total: int, done: int = 0) -> None:
        """Plan ``total`` more items of ``kind``, ``done`` of them already finished (resumed)."""
        with self._lock:
            k = self.kinds.setdefault(kind, _Kind())
            k.total += total
            k.done += done
            k.before += done
            self._sync_bar()

    def start(self, kind: str) -> None:
        """Work on ``kind`` begins now (its rate is measured from here); idempotent."""
        with self._lock:
            k = self.kinds.setdefault(kind, _Kind())
            if k.started is None:
                k.started = self.clock()

    def item(self, text: str) -> None:
        """What is being worked on now (shown on the bar and in the next line)."""
        with self._lock:
            self.current = text
            self._sync_bar()

    def advance(self, kind: str, n: int = 1) -> None:
        """``n`` items of ``kind`` finished."""
        if n <= 0:
            return
        with self._lock:
            self.start(kind)
            k = self.kinds[kind]
            k.done += n
            k.total = max(k.total, k.done)
            if self._bar is not None:
                self._sync_bar()
            elif self.enabled and (self.clock() - self._last_line >= self.gap_s or self.finished()):
                self._line(self.status())

    def note(self, text: str) -> None:
        """A line of its own, now (above the bar on a terminal)."""
        with self._lock:
            if not self.enabled:
                return
            if self._bar is not None:
                self._bar.write(f"{self.label}: {text}", file=self.stream)
            else:
                self._line(text)

    # -- reading -------------------------------------------------------------------
    def finished(self) -> bool:
        return all(k.done >= k.total for k in self.kinds.values())

    def counts(self) -> tuple[int, int]:
        return sum(k.done for k in self.kinds.values()), sum(k.total for k in self.kinds.values())

    def eta(self) -> str:
        """'ETA 3m05s', 'ETA 40 s + 64 trials not timed yet', or 'ETA ?'."""
        now, secs, untimed = self.clock(), 0.0, []
        for name, k in self.kinds.items():
            left = k.total - k.done
            if left <= 0:
                continue
            ran = k.done - k.before
            if k.started is None or ran <= 0 or now <= k.started:
                untimed.append(f"{left} {name}{'s' if left != 1 else ''}")
            else:
                secs += left * (now - k.started) / ran
        if untimed and not secs:
            return "ETA ?"
        return f"ETA {duration(secs)}" + (f" + {', '.join(untimed)} not timed yet" if untimed else "")

    def status(self) -> str:
        """The one-line status: done/total (per kind when there are several), now, times."""
        done, total = self.counts()
        kinds = [(n, k) for n, k in self.kinds.items() if k.total]
        if len(kinds) == 1:
            what = f"{done}/{total} {kinds[0][0]}s"
        else:
            what = f"{done}/{total} (" + ", ".join(f"{n}s {k.done}/{k.total}" for n, k in kinds) + ")"
        elapsed = duration(self.clock() - self.t0)
        if self.finished():
            return f"done {what} in {elapsed}"
        now = f", now {self.current}" if self.current else ""
        return f"{what}{now}; {elapsed} elapsed, {self.eta()}"

    # -- output --------------------------------------------------------------------
    def _line(self, text: str) -> None:
        self._last_line = self.clock()
        self._said_done = self.counts() if self.kinds and self.finished() else None
        print(f"{self.label}: {text}", file=self.stream, flush=True)

    def _sync_bar(self) -> None:
        if not (self.enabled and self.tty) or self._closed:
            return
        done, total = self.counts()
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=done, desc=self.label, file=self.stream, dynamic_ncols=True,
                             bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{postfix}")
        self._bar.total = total
        self._bar.n = done
        tail = [self.current] if self.current and not self.finished() else []
        self._bar.set_postfix_str(", ".join(tail + [f"{duration(self.clock() - self.t0)} elapsed", self.eta()]),
                                  refresh=True)

    def tick(self) -> None:
        """The periodic check: redraw the bar, or print the status if silent for ``every_s``."""
        with self._lock:
            if not self.enabled or self._closed or not self.kinds:
                return
            if self._bar is not None:
                self._sync_bar()
            elif not self.finished() and self.clock() - self._last_line >= self.every_s:
                self._line(self.status())

    def _tick_loop(self) -> None:
        while not self._stop.wait(1.0):
            self.tick()

    def close(self) -> None:
        """Stop the ticker; print the final status (once) when anything was planned."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with self._lock:
            if self._closed:
                return
            if self._bar is not None:
                self._sync_bar()
                self._bar.close()
                self._bar = None
            if self.enabled and self.counts()[1] and self._said_done != self.counts():
                self._line(self.status())
            self._closed = True

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def plain(label: str, stream: IO[str], **kw: Any) -> Progress:
    """A plain-lines display into ``stream`` without its ticker thread (for tests and nesting)."""
    return Progress(label, stream=stream, tty=False, ticker=False, **kw)


__all__ = ["Progress", "duration", "plain"]
