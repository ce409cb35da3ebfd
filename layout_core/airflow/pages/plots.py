"""The PNG plots of the pages. matplotlib takes about a second to import, so only the plot
routes import this module (every Airflow process imports the app, few ask for a plot)."""

from __future__ import annotations

import datetime as dt
import io
import math

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, PercentFormatter

from layout_core.airflow.pages.data import RunSection, SkippingReport, TableOverview
from layout_core.airflow.pages.reports import PLOT_TABLES, block_sizes, step_seconds, version_rows

PLOT_VERSIONS = 40  # versions per table in its plot (the newest)
STATE_COLORS = {"active": "#2f9e44", "retired": "#9aa5b1", "failed": "#e03131", "building": "#f08c00",
                "purged": "#ced4da"}


def _png(figure: Figure) -> bytes:
    buf = io.BytesIO()
    figure.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _figure(width: float = 9.0, height: float = 3.0) -> Figure:
    # a bare Figure (Agg canvas), no pyplot: no global backend state in the api-server
    return Figure(figsize=(width, height), layout="constrained")


def plot_table(table: TableOverview) -> bytes:
    """Blocks (bars, by state) and rows (line) of the newest versions of one table."""
    versions = sorted(table.versions, key=lambda v: v.version_id)[-PLOT_VERSIONS:]
    active_blocks = {p.version.version_id: p.blocks for p in table.active}
    fig = _figure()
    ax = fig.subplots()
    x = list(range(len(versions)))
    blocks = [active_blocks.get(v.version_id, v.n_blocks) for v in versions]
    ax.bar(x, blocks, color=[STATE_COLORS.get(v.state, "#748ffc") for v in versions])
    ax.set_ylabel("blocks")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    labels = [f"v{v.version_id}\n{v.partition[:10]}" if v.partition else f"v{v.version_id}" for v in versions]
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_xlim(-0.6, max(len(x), 8) - 0.4)  # a lone version is not one wall-to-wall bar
    ax.set_title(f"{table.name}: blocks (bars) and rows (line) per version", fontsize=9, loc="left")
    rows = [version_rows(v) for v in versions]
    if any(r is not None for r in rows):
        ax2 = ax.twinx()
        ax2.plot(x, [math.nan if r is None else r for r in rows], "o-", color="#1c7ed6")
        ax2.set_ylabel("rows", color="#1c7ed6")
        ax2.set_ylim(bottom=0)
    present = sorted({v.state for v in versions})
    ax.legend([Patch(color=STATE_COLORS.get(s, "#748ffc")) for s in present], present, fontsize=7,
              loc="lower right", bbox_to_anchor=(1, 1), ncols=len(present), frameon=False)
    return _png(fig)


def _skipping_series(report: SkippingReport, table) -> tuple[list[dt.datetime], list[float]]:
    """Every UTC day of the window (its midnight, naive) with the table's share of blocks skipped
    that day (NaN: no scan of a layout, a gap in the line)."""
    first, last = (dt.datetime.combine(t.astimezone(dt.timezone.utc).date(), dt.time())
                   for t in (report.since, report.until))
    days = [first + dt.timedelta(days=n) for n in range((last - first).days + 1)]
    by_day = {d.date: d for d in table.daily}
    shares = []
    for day in days:
        seen = by_day.get(day.date().isoformat())
        shares.append(seen.skipped if seen is not None and seen.blocks_total else math.nan)
    return days, shares


def plot_skipping(report: SkippingReport, table: str | None = None) -> bytes | None:
    """The daily share of blocks skipped per table (one table, or the PLOT_TABLES with the most
    blocks scanned); None when no table of the window has any day to plot."""
    tables = [t for t in report.tables if t.daily and (table is None or t.table == table)]
    if not tables:
        return None
    shown = sorted(tables, key=lambda t: (-t.blocks_total, t.table))[:PLOT_TABLES]
    fig = _figure()
    ax = fig.subplots()
    for t in sorted(shown, key=lambda t: t.table):
        days, shares = _skipping_series(report, t)
        ax.plot(days, shares, "o-", markersize=4, label=t.table[:40])
    ax.set_ylim(-0.02, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("blocks skipped")
    ax.set_xlim(days[0] - dt.timedelta(hours=12), days[-1] + dt.timedelta(hours=12))
    locator = AutoDateLocator(maxticks=12)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    what = table[:60] if table is not None else (
        "per table" if len(shown) == len(tables) else f"the {len(shown)} tables with the most blocks scanned")
    ax.set_title(f"Daily share of blocks skipped by the routed queries, {what}, last {report.days} days (UTC)",
                 fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 1), ncols=min(len(shown), 5), frameon=False)
    return _png(fig)


def plot_run_seconds(section: RunSection) -> bytes:
    timed = step_seconds(section.metrics, section.steps)
    steps, seconds = [s for s, _ in timed], [t for _, t in timed]
    fig = _figure()
    ax = fig.subplots()
    ax.barh(steps[::-1], seconds[::-1], color="#1c7ed6")
    ax.set_xlabel("seconds")
    ax.set_title(f"{section.table} {section.partition}: seconds per step (inside the Spark job)", fontsize=9)
    return _png(fig)


def plot_run_blocks(section: RunSection) -> bytes:
    sizes = block_sizes(section)
    expected, real = sizes if sizes else ([], [])
    fig = _figure()
    ax = fig.subplots()
    x = list(range(len(real)))
    ax.bar(x, real, color="#9aa5b1", label="real rows")
    ax.plot(x, expected, "_", color="#e03131", markersize=10, markeredgewidth=2, label="expected rows (plan)")
    ax.set_xlabel("block (by block id)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("rows")
    ax.legend(fontsize=7)
    ax.set_title(f"{section.table} {section.partition}: expected and real rows per block", fontsize=9)
    return _png(fig)
