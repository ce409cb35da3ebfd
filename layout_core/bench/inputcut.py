"""INPUTCUT, the diPs paper's per-query metric (§7, Figs. 12-14): the input a query reads
on a layout without diPs over the input it reads on the same layout with them.

Input is counted in blocks. A query that reads no block either way cuts nothing (1.0); a
query that reads blocks without diPs and none with them has an infinite cut (diPs proved
it empty). The benchmarks report, per layout routed with diPs, the share of test queries
whose cut is at least 1.5 and at least 2, the cut per template (its queries' blocks
summed, then divided), and the cumulative distribution as a chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

THRESHOLDS = (1.5, 2.0)


def input_cuts(without: Sequence[int], with_dips: Sequence[int]) -> np.ndarray:
    """Per query: blocks read without diPs / blocks read with them (inf when only diPs read none)."""
    a = np.asarray(without, dtype=float)
    b = np.asarray(with_dips, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"{a.size} queries without diPs but {b.size} with them")
    cuts = np.ones_like(a)
    reads = b > 0
    cuts[reads] = a[reads] / b[reads]
    cuts[~reads & (a > 0)] = np.inf
    return cuts


def summary(without: Sequence[int], with_dips: Sequence[int], templates: Sequence) -> dict:
    """The report's INPUTCUT fields of one layout: shares over the queries, per template."""
    cuts = input_cuts(without, with_dips)
    n = max(1, cuts.size)
    sums: dict[str, list[int]] = {}
    for t, a, b in zip(templates, without, with_dips):
        pair = sums.setdefault(str(t), [0, 0])
        pair[0], pair[1] = pair[0] + int(a), pair[1] + int(b)
    # a template's cut: its queries' blocks summed, then divided by the same rule as a query's
    template_cuts = input_cuts([a for a, _ in sums.values()], [b for _, b in sums.values()])
    per_template = {t: _ratio_value(float(c)) for t, c in zip(sums, template_cuts)}
    finite = cuts[np.isfinite(cuts)]
    return {
        "queries": int(cuts.size),
        "share_at_least_1_5": round(float(np.sum(cuts >= 1.5)) / n, 3),
        "share_at_least_2": round(float(np.sum(cuts >= 2.0)) / n, 3),
        "median": _ratio_value(float(np.median(cuts))) if cuts.size else 1.0,
        "max_finite": round(float(finite.max()), 3) if finite.size else None,
        "per_template": per_template,
        "per_query": [_ratio_value(float(c)) for c in cuts],
    }


def _ratio_value(x: float):
    return "inf" if np.isinf(x) else round(x, 3)


def cdf_chart(path: Path, cuts_by_layout: dict[str, Sequence], title: str) -> None:
    """Cumulative share of queries (y) with INPUTCUT at most x, one line per layout (log x)."""
    # matplotlib only when the chart is drawn
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use('Agg')

    curves = {name: np.sort([np.inf if v == "inf" else float(v) for v in values])
              for name, values in cuts_by_layout.items()}
    finite = [c[np.isfinite(c)] for c in curves.values()]
    top = max([2.0, *(float(f.max()) for f in finite if f.size)])
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, cuts in curves.items():
        shown = np.minimum(cuts, top * 1.5)  # infinite cuts (proved empty) at the right edge
        ax.step(shown, np.arange(1, cuts.size + 1) / max(1, cuts.size), where="post", label=name)
    for x in THRESHOLDS:
        ax.axvline(x, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xscale("log")
    ax.set_xlabel("INPUTCUT: blocks read without diPs / with diPs (log; right edge: proved empty)")
    ax.set_ylabel("share of test queries")
    ax.set_title(f"{title}: INPUTCUT per query")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
