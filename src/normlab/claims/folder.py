"""The names of a claims folder's files (``normlab claims --out``), spelled here only.

``claims.output`` writes them (history.jsonl: ``claims.history``); the ledger of seen seeds,
``registered.verify`` and the CLI read them through these names. A leaf module, so that every
reader can import it without a circle.
"""

from __future__ import annotations

CLAIMS_JSON = "claims.json"   # every claim's record and the run's meta (``output.write_outputs``)
HISTORY = "history.jsonl"     # every launch, its end and its verdicts (``history``), appended
CLAIMS_MD = "claims.md"       # the table, as claims.json gives it (``output``)
INDEX = "index.html"          # the page (``output``)
FIGURES = "figures"           # the claims' figures (``figures``, ``output``)
# claims.json's meta.seeds key of the quick measurements' seeds (the probe cells and the extra
# measurements share them), beside one key per study (``publish``; read by the ledger and the priors)
PROBE = "probe"

__all__ = ["CLAIMS_JSON", "CLAIMS_MD", "FIGURES", "HISTORY", "INDEX", "PROBE"]
