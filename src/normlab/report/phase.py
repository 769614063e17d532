"""The phase diagram of one placement: where in learning rate x depth (one panel per warm-up)
its seeds train, stall at the unigram loss or diverge (``normlab.study.outcome``).

Each cell is split left to right into bands whose widths are the shares of its seeds with
each outcome, in ``OUTCOMES`` order, so a cell that is all one colour had one fate for every
seed; the number in it is the mean best validation loss of the seeds that did not diverge,
and k/n counts the seeds that trained. The grid's learning rates are log-spaced, so equal
spacing of the columns is a log axis; depths are whole numbers and ticked as such.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from normlab.report.numbers import num
from normlab.report.style import figure
from normlab.study.outcome import OUTCOMES, Cell

# Paul Tol's "vibrant" teal, orange and red: distinct for colour-blind readers, and red for the
# worst outcome; an empty cell (no finished seed) is light grey.
OUTCOME_COLOURS = {"trains": "#009988", "stalls": "#EE7733", "diverged": "#CC3311"}
EMPTY = "#DDDDDD"
LABELS = {"trains": "trains", "stalls": "stalls (≈ unigram loss)", "diverged": "diverges"}


def ordered(values: Sequence[Any]) -> list[Any]:
    """Distinct values in increasing order, None (an axis nobody set) last."""
    return sorted(set(values), key=lambda v: (v is None, v if v is not None else 0))


def phase_diagram(cells: Mapping[tuple[Any, Any, Any], Cell], title: str, lrs: Sequence[Any],
                  depths: Sequence[Any], warmups: Sequence[Any]) -> Any:
    """``cells[(lr, depth, warmup)]`` of one placement; ``lrs``, ``depths`` and ``warmups`` are the
    grid every placement's figure shares (a cell missing from ``cells`` is drawn empty)."""
    from matplotlib.patches import Patch, Rectangle

    warmups = list(warmups) or [None]
    fig, axes = figure(ncols=len(warmups), width=6.4 / min(len(warmups), 2) if len(warmups) > 1 else 5.2,
                       height=1.5 + 0.85 * max(len(depths), 1))
    axes = list(axes) if len(warmups) > 1 else [axes]
    for ax, wu in zip(axes, warmups):
        for i, depth in enumerate(depths):
            for j, lr in enumerate(lrs):
                cell = cells.get((lr, depth, wu))
                x0 = j - 0.5
                if cell is None or cell.n == 0:
                    ax.add_patch(Rectangle((x0, i - 0.5), 1, 1, facecolor=EMPTY, edgecolor="none"))
                    text = "no seed" if cell is None or not cell.missing else f"{cell.missing} to run"
                else:
                    for outcome in OUTCOMES:
                        w = cell.share(outcome)
                        if w > 0:
                            ax.add_patch(Rectangle((x0, i - 0.5), w, 1, facecolor=OUTCOME_COLOURS[outcome],
                                                   edgecolor="none", label=f"_{outcome}"))
                            x0 += w
                    mean = cell.mean_best()
                    text = f"{num(mean, 3) if mean is not None else '×'}\n{cell.counts['trains']}/{cell.n} train"
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="none", edgecolor="white", linewidth=3))
                ax.text(j, i, text, ha="center", va="center", fontsize=9.5, linespacing=1.15,
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.82, "edgecolor": "none"})
        ax.set_xlim(-0.5, len(lrs) - 0.5)
        ax.set_ylim(-0.5, len(depths) - 0.5)
        ax.set_xticks(range(len(lrs)), [num(v) for v in lrs])
        ax.set_yticks(range(len(depths)), [num(v) for v in depths])
        ax.grid(False)
        ax.set(xlabel="peak learning rate (log-spaced)", title="warm-up " + ("as configured" if wu is None
                                                                           else f"{num(wu)} steps"))
        ax.set_ylabel("depth L (blocks)" if ax is axes[0] else "")
    handles = [Patch(facecolor=OUTCOME_COLOURS[o], label=LABELS[o]) for o in OUTCOMES]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), frameon=False)
    fig.suptitle(title)
    return fig


__all__ = ["EMPTY", "LABELS", "OUTCOME_COLOURS", "ordered", "phase_diagram"]
