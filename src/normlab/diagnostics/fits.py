"""Fits over probe rows: depth fits of the probe (docs/diagnostics.md).

``summarize(rows)`` returns the JSON summary written as ``DIR/summary.json``:

- ``w2_slope[p]``: least-squares slope of log ||dLoss/dW2_L||_F (last block's W_2) against
  log L, pooled over seeds (one point per depth x seed), with its standard error. Xiong
  et al. 2020, Thm 1: about 0 for Post-LN, about -0.5 for Pre-LN.
- ``w2_last[p][L]``: seed-mean of that gradient norm; ``ratio_to_pre[p][L]`` = w2_last[p][L]
  / w2_last["pre"][L] (Xiong et al. 2020: the Post/Pre ratio grows with L).
- ``grad_spearman[p][L]``: Spearman correlation between the layer index and the seed-mean
  gradient norm of the whole block (every parameter in it); > 0 means gradients grow toward
  the output (Xiong et al. 2020: Post-LN rises; NormFormer: Pre-LN falls).
- ``stream_fit[p][L]``: line through the seed-mean E||x_l||^2/d against l = 0..L (Xiong et al. 2020, Lemma 2:
  Pre-LN grows linearly, slope in [1/2, 3/2]; Post-LN stays flat).
- ``token_cos_last[p][L]``: seed-mean of the last stream's mean pairwise token cosine (rank collapse, Noci et al. 2022).
- ``jac_rms_first[p][L]``: seed-mean RMS singular value of d x_L / d x_0 (the identity path).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from normlab.stats.tensors import ols, spearman


def _mean(v: list[float]) -> float:
    return sum(v) / len(v) if v else float("nan")


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Depth fits of the probe rows (see the module docstring for each entry)."""
    w2: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    block: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    stream: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    tcos: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    jac: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        p, L, li, m = r["placement"], int(r["n_layer"]), int(r["layer"]), r["metric"]
        if m == "grad_norm" and r["param"] == "W_2" and li == L:
            w2[p][L].append(float(r["value"]))
        elif m == "grad_norm" and r["sublayer"] == "block":
            block[(p, L, li)].append(float(r["value"]))
        elif r["sublayer"] == "stream" and m == "mean_sq":
            stream[(p, L, li)].append(float(r["value"]))
        if r["sublayer"] == "stream" and m == "token_cos" and li == L:
            tcos[p][L].append(float(r["value"]))
        if r["sublayer"] == "stream" and m == "jac_rms_to_last" and li == 0:
            jac[p][L].append(float(r["value"]))
    out: dict[str, Any] = {"w2_slope": {}, "w2_last": {}, "ratio_to_pre": {}, "grad_spearman": {},
                           "stream_fit": {}, "token_cos_last": {}, "jac_rms_first": {}}
    for p, by_L in w2.items():
        xs = [math.log(L) for L, v in by_L.items() for _ in v]
        ys = [math.log(x) for v in by_L.values() for x in v]
        out["w2_slope"][p] = ols(xs, ys) if len(set(xs)) > 1 else None
        out["w2_last"][p] = {L: _mean(v) for L, v in sorted(by_L.items())}
    if "pre" in out["w2_last"]:
        pre = out["w2_last"]["pre"]
        out["ratio_to_pre"] = {p: {L: v / pre[L] for L, v in by.items() if L in pre}
                               for p, by in out["w2_last"].items() if p != "pre"}
    depths = sorted({(p, L) for p, L, _ in block})
    for p, L in depths:
        g = [_mean(block[(p, L, li)]) for li in range(1, L + 1)]
        out["grad_spearman"].setdefault(p, {})[L] = spearman(range(1, L + 1), g) if L > 1 else None
        m = [_mean(stream[(p, L, li)]) for li in range(L + 1)]
        out["stream_fit"].setdefault(p, {})[L] = {**ols(range(L + 1), m), "mean_sq": m}
    for key, src in (("token_cos_last", tcos), ("jac_rms_first", jac)):
        out[key] = {p: {L: _mean(v) for L, v in sorted(by.items())} for p, by in src.items()}
    return out


def format_summary(s: dict[str, Any]) -> str:
    """A few lines for the terminal: slopes, ratios, Spearman by depth."""
    lines = []
    for p, f in s["w2_slope"].items():
        slope = f"{f['slope']:+.3f} +/- {f['stderr']:.3f}" if f else "n/a (one depth)"
        w2 = " ".join(f"L{L}={v:.3g}" for L, v in s["w2_last"][p].items())
        lines.append(f"{p:<12} W2_L grad slope vs log L: {slope}   {w2}")
    for p, by in s["ratio_to_pre"].items():
        lines.append(f"{p + '/pre':<12} W2_L grad ratio: " + " ".join(f"L{L}={v:.2f}" for L, v in by.items()))
    for p, by in s["grad_spearman"].items():
        rho = " ".join(f"L{L}={v:+.2f}" for L, v in by.items() if v is not None and not math.isnan(v))
        lines.append(f"{p:<12} Spearman(layer, block grad norm): {rho}")
    return "\n".join(lines)
