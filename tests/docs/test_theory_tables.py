"""docs/theory.md's section 3 is the catalogue's: the tables between its markers are what
``normlab.claims.tables.theory_tables()`` writes from the registered rules, so a changed rule,
quantity or regime shows up as a failing test until the page says it."""

from __future__ import annotations

from pathlib import Path

import pytest

from normlab.claims.tables import END, START, section, theory_tables

THEORY = Path(__file__).parents[2] / "docs" / "theory.md"


def test_theory_md_lists_the_catalogue_as_it_is() -> None:
    assert section(THEORY.read_text()) == theory_tables(), (
        "docs/theory.md section 3 differs from the catalogue: paste `python -m normlab.claims.tables` between "
        f"{START} and {END}")


def test_the_tables_name_every_claim_and_part_and_a_missing_marker_is_named() -> None:
    from normlab.claims.claim import CLAIMS

    text = theory_tables()
    for cid, c in CLAIMS.items():
        assert f"`{cid}`" in text
        for p in c.parts:
            assert f"{p.id}: " in text
    with pytest.raises(ValueError, match="claims-tables:end"):
        section(f"x {START} y")


def test_section_4_counts_the_seed_claims() -> None:
    """Section 4 names how many claims test a seed statement (ids starting seed0)."""
    from normlab.claims.claim import CLAIMS

    n = sum(1 for i, _ in CLAIMS.items() if i.startswith("seed0"))
    assert f"(the {n} ids starting `seed0`" in THEORY.read_text()
