"""Measure and decide the chosen quick claims, one at a time, through the cache.

Each claim measures only its declared :class:`~normlab.claims.measure.Needs`: the probe cells
(from ``OUT/cache/probe`` when there) and the extra measurements, shared with the claims
decided before it in this run; its record goes to ``OUT/cache/claims`` at once. So
``--only ID`` measures ID's part of the grid, and an interrupted run keeps every claim (and
every probe cell) it finished.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from normlab.claims.cache import Cache, key
from normlab.claims.measure import empty, probe_cell
from normlab.diagnostics import measurements
from normlab.diagnostics.probe import COLUMNS


class QuickRun:
    def __init__(self, seeds: int, depths: list[int] | None, d_model: int, cache: Cache, display: Any,
                 first_seed: int = 0) -> None:
        self.q = empty(seeds, depths, d_model, first_seed)
        self.cache, self.display = cache, display
        self._cells: set[tuple[str, int]] = set()
        self._extras: set[str] = set()
        self._records: dict[str, dict[str, Any]] = {}

    # -- keys ------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        return {**self.q.probe, "transformers": importlib.util.find_spec("transformers") is not None}

    def claim_key(self, c: Any) -> str:
        return key(claim=c.id, rule=c.rule_hash(None), code=c.code_hash(), settings=self._settings())

    def cell_key(self, p: str, L: int) -> str:
        return key(cell=[p, L], settings=self.q.probe)

    def _cells_of(self, needs: Any) -> list[tuple[str, int]]:
        return needs.cells(self.q.depths, self.q.ref_depth())

    # -- plan ------------------------------------------------------------------------
    def plan(self, claims: list[Any], extra_needs: list[Any]) -> None:
        """Look every claim up in the cache; put what is left to measure on the display."""

        todo = []
        for c in claims:
            got = self.cache.get("claims", c.id, self.claim_key(c))
            if got is not None:
                self._records[c.id] = got
            else:
                todo.append(c)
        needs = [c.needs for c in todo] + extra_needs
        cells = list(dict.fromkeys(x for n in needs for x in self._cells_of(n)))
        fresh = [x for x in cells if not self._cached_cell(*x)]
        extras = list(dict.fromkeys(e for n in needs for e in n.extra))
        models = len(fresh) * self.q.seeds + sum(measurements.extra_size(e, self.q.seeds, self.q.depths) for e in extras)
        self.display.add("model", models)
        reused = len(claims) - len(todo)
        what = (f"{len(fresh)} probe cells to measure ({len(cells) - len(fresh)} cached), {len(extras)} extra "
                f"measurement{'s' if len(extras) != 1 else ''}: {models} models") if models else "nothing to measure"
        self.display.note(f"quick claims: {reused}/{len(claims)} found in {self.cache.root or 'no cache'}; {what}")

    def _cached_cell(self, p: str, L: int) -> bool:
        if (p, L) in self._cells:
            return True
        got = self.cache.get("probe", f"{p}-L{L}", self.cell_key(p, L))
        if got is None:
            return False
        cols = got["columns"]
        self.q.rows += [dict(zip(cols, r)) for r in got["rows"]]
        self._cells.add((p, L))
        return True

    # -- measure ---------------------------------------------------------------------
    def ensure(self, needs: Any) -> None:
        """Measure what of ``needs`` this run does not hold yet."""

        self.display.start("model")
        tick = lambda: self.display.advance("model")  # noqa: E731
        for p, L in self._cells_of(needs):
            if self._cached_cell(p, L):
                continue
            self.display.item(f"probe {p} L={L} ({self.q.seeds} seeds)")
            rows = probe_cell(self.q, p, L, tick)
            back = self.cache.put("probe", f"{p}-L{L}", self.cell_key(p, L),
                                  {"columns": list(COLUMNS), "rows": [[r[k] for k in COLUMNS] for r in rows]})
            self.q.rows += [dict(zip(back["columns"], r)) for r in back["rows"]]
            self._cells.add((p, L))
        for e in needs.extra:
            if e in self._extras:
                continue
            self.display.item(f"extra measurement {e}")
            measurements.measure_extra(e, self.q.extra, self.q.seeds, self.q.depths, self.q.ref_depth(), tick, self.q.first_seed)
            self._extras.add(e)

    def record(self, c: Any) -> dict[str, Any]:
        """The claim's record: from the cache, else measured, decided and cached now."""
        if c.id not in self._records:
            self.ensure(c.needs)
            self.display.item(f"deciding {c.id}")
            self._records[c.id] = self.cache.put("claims", c.id, self.claim_key(c), c.decide(self.q))
        return self._records[c.id]
