"""README's lists of placements and norms are the registries' (`normlab placements`,
`normlab norms`), name for name and in order: a placement added or renamed shows up here."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"


def _listed(label: str) -> list[str]:
    text = README.read_text()
    m = re.search(rf"{label} \(`normlab {label.lower()}`.*?\):\s*(.*?)\.(?:\s|$)", text, re.S)
    assert m, f"README.md: no line '{label} (`normlab {label.lower()}` ...): ...'"
    return re.findall(r"`([a-z_0-9]+)`", m.group(1))


def test_readme_lists_every_placement_and_norm() -> None:
    from normlab.model.registries import LAYOUTS, NORMS, PLACEMENTS

    # `normlab placements` lists the per-layer placements, then the layouts (mix)
    assert _listed("Placements") == list(PLACEMENTS.names()) + list(LAYOUTS.names())
    assert _listed("Norms") == list(NORMS.names())
