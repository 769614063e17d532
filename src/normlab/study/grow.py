"""Studies that grow: a spec that adds seeds or axis values to the study a store holds keeps
every trial the store has (a trial id hashes the trial's whole config, so an old trial keeps
its id) and adds only the new ones. The long horizon of ``extend_stalled_to`` may be added or
raised too (its trials are the same; the stalled ones are resumed further), and the nested
``stages`` may be added or changed (the first stage is train.steps, which is compared: the
trials are the same, and a run read at a stage it has not reached is resumed to it). Anything
else that differs (the base configuration, the axes themselves, roles, the trial kind, the
metric...) would mix two studies in one store, so it is refused with the first field that
differs, both values shown."""

from __future__ import annotations

import json
from typing import Any

GROWS = ("seeds", "axes", "zip")  # the spec keys a study may grow by


def growth_refusal(held: dict[str, Any], new: dict[str, Any]) -> str | None:
    """None when ``new`` (a resolved spec) is ``held`` with more seeds or axis values; else
    the one line that says which field changed and how."""
    h_axes, n_axes = held.get("axes", {}), new.get("axes", {})
    if list(h_axes) != list(n_axes):  # first: a new axis changes the roles too, but this is the cause
        return f"axes: {sorted(h_axes)} in the store, {sorted(n_axes)} in the spec (add values, not axes)"
    h_zip, n_zip = held.get("zip", []), new.get("zip", [])
    if [list(g) for g in h_zip] != [list(g) for g in n_zip]:
        return f"zip: groups {[sorted(g) for g in h_zip]} in the store, {[sorted(g) for g in n_zip]} in the spec"
    ext_h, ext_n = held.get("extend_stalled_to"), new.get("extend_stalled_to")
    if ext_h is not None and (ext_n is None or ext_n < ext_h):
        return (f"extend_stalled_to: {ext_h} in the store, {_show(ext_n)} in the spec (the long horizon may be "
                "added or raised, not lowered)")
    for key in sorted(set(held) | set(new)):
        if key in GROWS or key in ("extend_stalled_to", "stages"):
            continue
        why = _first_difference(held.get(key), new.get(key), key)
        if why:
            return why
    lost = [s for s in held.get("seeds", []) if s not in new.get("seeds", [])]
    if lost:
        return f"seeds: {lost} are in the store but not in the spec (a study grows; keep every seed)"
    for k, vals in h_axes.items():
        lost = [v for v in vals if v not in n_axes[k]]
        if lost:
            return f"axes.{k}: {_show(lost)} in the store but not in the spec (add values; keep every value)"
    for i, (hg, ng) in enumerate(zip(h_zip, n_zip)):
        rows = list(zip(*ng.values()))
        lost = [r for r in zip(*hg.values()) if r not in rows]
        if lost:
            return f"zip[{i}]: rows {_show(lost)} in the store but not in the spec (add rows; keep every row)"
    return None


def _first_difference(a: Any, b: Any, path: str) -> str | None:
    """'base.train.steps: 5 in the store, 10 in the spec' for the first leaf that differs."""
    if isinstance(a, dict) or isinstance(b, dict):  # a table on one side only: its leaves, against nothing
        a, b = (x if isinstance(x, dict) else {} if x is None else {"": x} for x in (a, b))
        for k in sorted(set(a) | set(b)):
            why = _first_difference(a.get(k), b.get(k), f"{path}.{k}" if k else path)
            if why:
                return why
        return None
    if a == b:
        return None
    return f"{path}: {_show(a)} in the store, {_show(b)} in the spec"


def _show(v: Any) -> str:
    return "(not set)" if v is None else json.dumps(v, default=str)


__all__ = ["GROWS", "growth_refusal"]
