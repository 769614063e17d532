"""What a page needs computed before it is drawn, computed here so that the pages only read.

The run page draws the layer figures of the registered ``analyze`` statistics from
RUN/analysis/analysis.json (``normlab analyze``). ``prepare`` writes that file before the page
is built when it is missing, older than the registry (a key missing) or of other weights than
the run's checkpoint now (the name, step and sha256 it records differ: the run was resumed
and trained on); a run that cannot be analysed (no checkpoint, no corpus) is left as it is and
its page says so, and which step its figures measured. A
read-only run (a published copy) gets its analysis beside the page instead, where the page
looks second. The pages themselves import no computing code (the `pages-read` contract in
pyproject.toml).
"""

from __future__ import annotations

import logging
from pathlib import Path

from normlab.core.errors import UserError
from normlab.core.fscheck import writable_dir
from normlab.diagnostics.analyze import analyze_run
from normlab.report.kinds import page_kind
from normlab.report.load import load_run
from normlab.report.run_page import analysis_figures, analysis_of, current, measured_at
from normlab.run.dir import RunDir
from normlab.run.outdir import ANALYSIS, default_page

log = logging.getLogger(__name__)


def prepare(path: str | Path, out: str | Path | None = None, data_dir: str | None = None) -> None:
    """Compute what the page of PATH reads and nobody has computed yet (today: a run's analysis,
    on the run's own corpus: ``data_dir`` is where it was moved)."""
    run_dir = Path(path)
    if page_kind(run_dir) != "run":
        return
    out_dir = Path(out) if out is not None else default_page(run_dir)
    load_run(run_dir)  # what the page reads first: a damaged run is its one-line error, before any analysis
    keys = [key for key, _, _ in analysis_figures()]
    res, now = analysis_of(run_dir, out_dir)
    if res is not None and all(k in res for k in keys) and current(res, now):
        return
    cache = RunDir(run_dir).analysis_dir
    try:
        writable_dir(cache, "analysis")
    except UserError:  # a read-only run (a published copy): the cache goes beside the page
        cache = out_dir / ANALYSIS
    log.info("analysing the checkpoint at %s for the layer figures (once per checkpoint; cached in %s)",
             measured_at(now), cache)
    try:
        analyze_run(run_dir, out=cache, data_dir=data_dir)
    except UserError as e:  # the page draws what an older analysis has, or says why there is none
        log.warning("layer similarity and deletion skipped: %s", e)  # e.g. the corpus moved: its sha256, --data-dir


__all__ = ["prepare"]
