"""docs/placements.md and docs/diagnostics.md name what the registries hold: a placement, a
placement's options or a statistic registered without its row in the docs fails here, as a
placement missing from README's list fails test_readme_lists.py (the walkthroughs of
docs/architecture.md count these files)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

DOCS = Path(__file__).parents[2] / "docs"


def _first_cells(page: str, header: str) -> list[str]:
    """The first cell of every row of the table of ``page`` whose header row starts with ``header``."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(header)]
    assert len(starts) == 1, f"docs/{page}: no single table whose header starts with {header!r}"
    rows = []
    for line in lines[starts[0] + 2:]:  # past the header and its |---| line
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1].strip())
    return rows


def _names(cells: list[str]) -> list[str]:
    """The backticked names of each cell (a row may name several: `act_mean`, `act_var`)."""
    return [n for cell in cells for n in re.findall(r"`([a-z_0-9]+)`", cell)]


def _has_options(cls: type) -> bool:
    options = getattr(cls, "Options", None)
    return options is not None and bool(dataclasses.fields(options))


def test_placements_md_has_a_row_for_every_placement_and_layout() -> None:
    from normlab.model.registries import LAYOUTS, PLACEMENTS

    rows = [re.match(r"`([a-z_0-9]+)`", c) for c in _first_cells("placements.md", "| name | update per sub-layer |")]
    listed = [m[1] for m in rows if m]
    assert sorted(listed) == sorted([*PLACEMENTS.names(), *LAYOUTS.names()]), \
        "docs/placements.md's table of placements differs from `normlab placements`"


def test_placements_md_lists_the_options_of_every_placement_that_has_some() -> None:
    from normlab.model.registries import LAYOUTS, PLACEMENTS

    with_options = [n for n, cls in [*PLACEMENTS.items(), *LAYOUTS.items()] if _has_options(cls)]
    assert {"admin", "keel", "mix"} <= set(with_options)  # the check sees the options the built-ins have
    listed = {c.split("`")[1] for c in _first_cells("placements.md", "| placement | option | default |")}
    assert listed == set(with_options), "docs/placements.md's table of options differs from the placements' Options"


def test_diagnostics_md_names_every_registered_statistic() -> None:
    from normlab.diagnostics.catalogue import STATISTICS

    listed = set(_names(_first_cells("diagnostics.md", "| statistic (metric) |")))
    missing = [n for n in STATISTICS.names() if n not in listed]
    assert not missing, f"docs/diagnostics.md's table of statistics names none of: {', '.join(missing)}"
