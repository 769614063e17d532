"""The answer of an inspected checkpoint's page (``normlab inspect``): one trained model, one
text, so no depth fits and nothing at initialisation; what each block does, with the numbers.

It reads the rows ``normlab inspect`` writes (probe.csv, one seed, one depth) and its
summary.json (model, family, placement, norm, loss, tokens, text).
"""

from __future__ import annotations

import math
from typing import Any

from normlab.report.load import ProbeData
from normlab.report.numbers import num, signed


def _per_layer(rows: list[dict[str, Any]], metric: str, sublayer: str) -> dict[int, float]:
    return {r["layer"]: r["value"] for r in rows if r["metric"] == metric and (r.get("sublayer") or "") == sublayer
            and math.isfinite(r["value"])}


def describe(probe: ProbeData) -> str:
    """'family GPT-2, placement pre, layernorm; 12 blocks, d=768, 124M parameters'."""
    s = probe.summary
    bits = [f"family {s.get('family')}", f"placement {s.get('placement')}", str(s.get("norm") or "")]
    size = [f"{num(s['n_layer'])} blocks" if s.get("n_layer") else "", f"d={num(s['d_model'])}" if s.get("d_model") else "",
            f"{num(s['params'], compact=True)} parameters" if s.get("params") else ""]
    return ", ".join(b for b in bits if b) + "; " + ", ".join(b for b in size if b)


def text_of(probe: ProbeData) -> str:
    s = probe.summary
    return f"{num(s['tokens'])} tokens of {s.get('text')}" if s.get("tokens") else str(s.get("text") or "its text")


def answer(probe: ProbeData) -> tuple[str, list[str]]:
    """The loss, the blocks whose removal costs most and least, and the stream's growth."""
    s, rows, notes = probe.summary, probe.rows, []
    parts = []
    if s.get("loss") is not None:
        parts.append(f"its loss is {num(s['loss'])} nats/token" + (" (masked-LM)" if s.get("causal") is False else ""))
    delta = _per_layer(rows, "deletion_delta", "block")
    if delta:
        order = sorted(delta, key=lambda b: delta[b], reverse=True)
        parts.append(f"skipping block {order[0]} costs most ({signed(delta[order[0]])} nats/token), block "
                     f"{order[-1]} least ({signed(delta[order[-1]])})")
    rms = _per_layer(rows, "rms", "stream")
    if len(rms) > 1:
        lo, hi = min(rms), max(rms)
        parts.append(f"the stream's RMS goes from {num(rms[lo], 3)} at x_{lo} to {num(rms[hi], 3)} at x_{hi}")
    ans = ("On " + text_of(probe) + ": " + "; ".join(parts) + ".") if parts else \
        "inspect wrote no loss, deletion or stream rows: see the table."
    angle = _per_layer(rows, "angular_distance", "block")
    if angle:
        top = max(angle, key=lambda b: angle[b])
        low = min(angle, key=lambda b: angle[b])
        notes.append(f"Angular distance between a block's input and output, arccos(cos)/π: largest at block {top} "
                     f"({num(angle[top], 3)}), smallest at block {low} ({num(angle[low], 3)}); a block that "
                     "barely turns the stream is a candidate for removal (Gromov et al. 2024).")
    logit = _per_layer(rows, "max_logit", "attn")
    if logit:
        top = max(logit, key=lambda b: logit[b])
        notes.append(f"Largest attention logit {num(logit[top], 3)} at block {top} (Dehghani et al. 2023 watch for "
                     "its growth).")
    if s.get("notes"):
        notes.append(f"The family: {s['notes']}.")
    return ans, notes


__all__ = ["answer", "describe", "text_of"]
