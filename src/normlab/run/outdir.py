"""``OutDir``: the owner of an output folder that is not a run (``normlab.run.dir.RunDir`` owns those).

| kind | written by | files (each command's own) |
|---|---|---|
| probe | ``normlab probe`` | probe.csv, summary.json, probe_config.json, measurements.json (``--measure``) |
| inspect | ``normlab inspect MODEL`` (``inspect_subject``), and each step of a series | probe.csv, summary.json, probe_config.json, analysis/ |
| series | ``normlab inspect --series`` | series.json, series.csv, steps/, report/ |
| analysis | ``normlab analyze`` (RUN/analysis, or ``--out``) | analysis.csv, layer_pairs.csv, analysis.json |

Each is written as a run is (``RunDir.writing``): created atomically, held by an OS lock
while one process writes it (a second writer is refused in one line naming its pid), and
marked with its kind (``rundir.MARKER``), which ``normlab report`` reads instead of guessing
from the files; folders written before the marker existed are still recognised by their files.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterator

from normlab.core.dirlock import held, same_kind
from normlab.run.dir import LOCK, MARKER, REPORT, RunDir, folder_kind, writer

KINDS = ("probe", "inspect", "series", "analysis")
# Every entry of each kind of folder (a file by its name, a folder and all below it by its name
# and "/"): the writers ask ``OutDir.file`` for these paths, and a test runs each command and
# checks every file it wrote against ``owns``.
PROBE_CSV, SUMMARY, PROBE_CONFIG = "probe.csv", "summary.json", "probe_config.json"
MEASUREMENTS = "measurements.json"  # ``normlab probe --measure``: the named measurements per seed
SERIES_JSON, SERIES_CSV, STEPS = "series.json", "series.csv", "steps"
ANALYSIS_CSV, PAIRS_CSV, ANALYSIS_JSON, ANALYSIS = "analysis.csv", "layer_pairs.csv", "analysis.json", "analysis"
PAGE = REPORT  # ``normlab report``'s default page beside what it reads (RUN/report/ in a run)
ENTRIES = {
    "probe": (PROBE_CSV, SUMMARY, PROBE_CONFIG, MEASUREMENTS, f"{PAGE}/"),
    "inspect": (PROBE_CSV, SUMMARY, PROBE_CONFIG, f"{ANALYSIS}/", f"{PAGE}/"),
    "series": (SERIES_JSON, SERIES_CSV, f"{STEPS}/", f"{PAGE}/"),
    "analysis": (ANALYSIS_CSV, PAIRS_CSV, ANALYSIS_JSON),
}

__all__ = ["KINDS", "ENTRIES", "OutDir", "default_page", "folder_kind", "writer"]


def default_page(path: str | Path) -> Path:
    """Where ``normlab report PATH`` writes its page when no --out is given: PATH/report/,
    whatever PATH is (a run, a study store, a probe, an inspect folder, a series)."""
    return Path(path) / PAGE


class OutDir:
    """One output folder of ``kind`` (``KINDS``)."""

    def __init__(self, path: str | Path, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"OutDir kind {kind!r}: one of {', '.join(KINDS)}")
        self.path, self.kind = Path(path), kind

    def __repr__(self) -> str:
        return f"OutDir({str(self.path)!r}, {self.kind!r})"

    def owns(self, rel: str | Path) -> bool:
        """Whether ``rel`` (a path inside the folder) is an entry of this kind, its lock or marker."""
        parts = Path(rel).parts
        entries = (*ENTRIES[self.kind], LOCK, MARKER)
        return bool(parts) and (parts[0] in entries if len(parts) == 1 and parts[0] + "/" not in entries
                                else parts[0] + "/" in entries)

    def file(self, *names: str) -> Path:
        """The path of an entry of this kind (``file("analysis", "analysis.json")`` inside one of
        its folders); a name the kind does not own is a bug, refused here."""
        if not self.owns(Path(*names)):
            raise ValueError(f"{self!r} owns no {'/'.join(names)!r}; its entries: {', '.join(ENTRIES[self.kind])}")
        return self.path.joinpath(*names)

    def step_dir(self, step: int) -> Path:
        """A series' folder for step ``step`` (steps/step_NNNNNN, named by ``RunDir.step_name``),
        itself an ``inspect`` folder."""
        if self.kind != "series":
            raise ValueError(f"{self!r}: only a series has step folders")
        return self.file(STEPS, RunDir.step_name(step))

    def contents(self, flag: str = "--out") -> list[Path]:
        """What the folder holds besides its lock and marker (what "already holds output" means);
        a folder marked as another kind (a run, a probe) is refused first."""

        if not self.path.is_dir():
            return []
        same_kind(self.path, MARKER, self.kind, flag)
        return sorted(p for p in self.path.iterdir() if p.name not in (LOCK, MARKER))

    @contextlib.contextmanager
    def writing(self, flag: str = "--out", check: Callable[[], None] | None = None) -> Iterator[OutDir]:
        """``with OutDir(out, "probe").writing("--out", check):`` the folder is this process's for
        the block; ``check`` re-checks under the lock what the command checked before (e.g.
        "already holds a probe"), since another process may have written it in between."""

        with held(self.path, LOCK, flag=flag, kind=self.kind, marker=MARKER, check=check,
                  other=f"choose another {flag}" if flag.startswith("--") else None):
            yield self
