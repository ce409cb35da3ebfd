"""The catalog's pages: the tables with their versions, and what the routed queries skipped."""

from __future__ import annotations

from layout_core.airflow.pages.data import SkippingReport, TableOverview
from layout_core.airflow.pages.markup import escape, format_time, href, page, run_link, state_label
from layout_core.airflow.pages.reports import PLOT_TABLES, format_number, reorganized_text, version_rows

LIST_VERSIONS = 200  # versions per table listed on the tables page (the newest)
TOP_TEMPLATES = 5  # templates per table on the skipping page (those that read the most blocks)
SQL_SHOWN = 160  # characters of a query's SQL shown in a table cell


def render_tables(tables: list[TableOverview], base: str = "") -> str:
    """The tables page."""
    if not tables:
        return page("Layouts", "<div class=\"box\"><p><strong>The layout catalog is empty</strong>: no table has "
                    "been laid out yet.</p><p class=\"note\">Run the <code>layout_nightly</code> DAG (or "
                    "<code>layout run</code>) to lay out a table partition; it appears here once its first "
                    "version is built.</p></div>", base)
    parts = [f"<p class=\"note\">{len(tables)} table{'s' if len(tables) != 1 else ''} in the layout catalog. "
             "Rows of a version are those verified in its blocks when it was activated (its input "
             "fingerprint, <code>rows:checksum</code>).</p>"]
    for table in tables:
        parts.append(f"<h2 id=\"{escape('t-' + table.name)}\">Table <code>{escape(table.name)}</code></h2>")
        if table.partition_column:
            parts.append(f"<p class=\"note\">partitioned by <code>{escape(table.partition_column)}</code></p>")
        if table.active:
            parts.append("<table><tr><th>partition</th><th>active version</th><th>optimizer</th><th>blocks</th>"
                         "<th>rows</th><th>bytes</th><th>laid out</th><th>input fingerprint</th></tr>")
            for p in table.active:
                parts.append(
                    f"<tr><td>{escape(p.partition or '(unpartitioned)')}</td>"
                    f"<td class=\"n\">{p.version.version_id}</td>"
                    f"<td>{escape(p.version.optimizer)}</td><td class=\"n\">{format_number(p.blocks)}</td>"
                    f"<td class=\"n\">{format_number(p.rows)}</td><td class=\"n\">{format_number(p.bytes)}</td>"
                    f"<td>{format_time(p.version.activated_at)}</td>"
                    f"<td><code>{escape(p.version.params.get('input_fingerprint', ''))}</code></td></tr>")
            parts.append("</table>")
        else:
            parts.append("<p class=\"note\">No active layout: no version of this table has been activated.</p>")
        if table.versions:
            parts.append(f"<img class=\"plot\" alt=\"{escape('blocks and rows per version of ' + table.name)}\" "
                         f"src=\"{href(base, '/plot/table.png', name=table.name)}\" width=\"900\" height=\"300\">")
            shown = sorted(table.versions, key=lambda v: v.version_id, reverse=True)[:LIST_VERSIONS]
            if len(table.versions) > len(shown):
                parts.append(f"<p class=\"note\">The newest {len(shown)} of {len(table.versions)} versions.</p>")
            parts.append("<h3>Versions</h3><table><tr><th>version</th><th>partition</th><th>state</th>"
                         "<th>optimizer</th><th>run</th><th>parent version</th><th>blocks</th><th>rows</th>"
                         "<th>created</th><th>activated</th><th>retired / failed</th><th>reason</th></tr>")
            for v in shown:
                ended = v.failed_at if v.state == "failed" else v.retired_at
                parts.append(
                    f"<tr><td class=\"n\">{v.version_id}</td><td>{escape(v.partition)}</td>"
                    f"<td>{state_label(v.state)}</td><td>{escape(v.optimizer)}</td><td>{run_link(base, v.run_id)}</td>"
                    f"<td class=\"n\">{'' if v.replaces is None or v.activated_at is None else v.replaces}</td>"
                    f"<td class=\"n\">{format_number(v.n_blocks)}</td>"
                    f"<td class=\"n\">{format_number(version_rows(v))}</td>"
                    f"<td>{format_time(v.created_at)}</td><td>{format_time(v.activated_at)}</td>"
                    f"<td>{format_time(ended)}</td>"
                    f"<td>{escape(' — '.join(r for r in (reorganized_text(v), v.reason) if r))}</td></tr>")
            parts.append("</table>")
        else:
            parts.append("<p class=\"note\">No versions yet.</p>")
    return page("Layouts", "".join(parts), base)


def _share(read: int, total: int) -> str:
    """The share of `total` not read, as a percentage ("" when there is nothing to share)."""
    return f"{1 - read / total:.1%}" if total else ""


def _read_of(read: int, total: int, what: str) -> str:
    return f"{format_number(read)} of {format_number(total)} {what}"


def _queries(count: int) -> str:
    return f"{format_number(count)} quer{'ies' if count != 1 else 'y'}"


def _short_sql(sql: str) -> str:
    """The SQL on one line, shortened, escaped; the whole of it (up to a limit) as the title."""
    one_line = " ".join(str(sql).split())
    shown = one_line if len(one_line) <= SQL_SHOWN else one_line[:SQL_SHOWN - 1] + "…"
    return f"<code title=\"{escape(one_line[:4000])}\">{escape(shown)}</code>"


def _days_links(base: str, days: int) -> str:
    def label(n: int) -> str:
        return f"{n} day{'s' if n != 1 else ''}"

    links = [f"<strong>{label(n)}</strong>" if n == days
             else f"<a href=\"{href(base, '/skipping', days=n)}\">{label(n)}</a>" for n in sorted({1, 7, 30, days})]
    return f"<p class=\"note\">Window: {' · '.join(links)} (or <code>?days=N</code>).</p>"


def _reads(query) -> str:
    """Per table reference of a query: blocks read of those there, or why it read them all."""
    if not query.reads:
        return "<span class=\"note\">not routed here (imported)</span>" if query.source == "import" \
            else "<span class=\"note\">no table read</span>"
    cells = []
    for r in query.reads:
        if r.read_all or not query.analyzed:
            cells.append(f"<code>{escape(r.table)}</code> read in full")
        else:
            cells.append(f"<code>{escape(r.table)}</code> "
                         f"{format_number(r.blocks_read)}/{format_number(r.blocks_total)}")
    return "<br>".join(cells)


def render_skipping(report: SkippingReport, base: str = "") -> str:
    """The skipping page: per table what the routed queries of the window read, its top
    templates, the daily share skipped (a plot) and the most recent queries."""
    window = (f"the last {report.days} day{'s' if report.days != 1 else ''} "
              f"({format_time(report.since)} to {format_time(report.until)})")
    head = _days_links(base, report.days)
    if not report.tables:
        imported = (f"<p class=\"note\">{_queries(report.queries)} of "
                    "the window were imported (<code>layout workload import</code>) rather than routed here: "
                    "they have no blocks read to count.</p>") if report.queries else ""
        body = (f"{head}<div class=\"box\"><p><strong>No queries were routed in {escape(window)}</strong>; "
                "<code>layout route</code>, <code>layout rewrite</code> and <code>layout run-workload</code> "
                f"record them.</p>{imported}<p class=\"note\">Nothing is estimated in their place.</p></div>")
        return page("Skipping", body + _recent(report, base), base)
    parts = [head, f"<p class=\"note\">{_queries(report.queries)} in "
             f"{escape(window)}, from the catalog's query history. A scan is one table reference of a query; "
             "blocks and rows are those of the table's active layouts when the query was routed, and "
             "<em>skipped</em> is the share of those blocks the scans did not read. Scans read in full "
             "(no active layout, or a query that could not be analyzed) are counted apart.</p>"]
    parts.append("<table><tr><th>table</th><th>queries</th><th>scans</th><th>blocks read</th><th>skipped</th>"
                 "<th>rows read</th><th>scans read in full</th></tr>")
    for t in report.tables:
        parts.append(f"<tr><td><a href=\"#{escape('s-' + t.table)}\"><code>{escape(t.table)}</code></a></td>"
                     f"<td class=\"n\">{format_number(t.queries)}</td><td class=\"n\">{format_number(t.scans)}</td>"
                     f"<td class=\"n\">{_read_of(t.blocks_read, t.blocks_total, 'blocks')}</td>"
                     f"<td class=\"n\">{_share(t.blocks_read, t.blocks_total)}</td>"
                     f"<td class=\"n\">{_read_of(t.rows_read, t.rows_total, 'rows')}</td>"
                     f"<td class=\"n\">{format_number(t.read_in_full)}</td></tr>")
    parts.append("</table>")
    if any(t.daily for t in report.tables):
        parts.append(f"<img class=\"plot\" alt=\"daily share of blocks skipped per table\" width=\"900\" "
                     f"height=\"300\" src=\"{href(base, '/plot/skipping.png', days=report.days)}\">")
        plotted = sum(1 for t in report.tables if t.daily)
        if plotted > PLOT_TABLES:
            parts.append(f"<p class=\"note\">The plot shows the {PLOT_TABLES} tables with the most blocks "
                         f"scanned, of {plotted}; each table's own plot is linked below.</p>")
    for t in report.tables:
        parts.append(f"<h2 id=\"{escape('s-' + t.table)}\">Table <code>{escape(t.table)}</code></h2>")
        if not t.templates:
            parts.append("<p class=\"note\">Every scan of this table read it in full: no layout was routed.</p>")
            continue
        if t.daily:
            plot = href(base, '/plot/skipping.png', days=report.days, table=t.table)
            parts.append(f"<p class=\"note\"><a href=\"{plot}\">Daily share of blocks skipped (plot)</a></p>")
            parts.append(_days_table(t.daily))
        shown = t.templates[:TOP_TEMPLATES]
        parts.append(f"<h3>{'The template' if len(shown) == 1 else f'The {len(shown)} templates'} that read the "
                     f"most blocks{'' if len(t.templates) == len(shown) else f', of {len(t.templates)}'}</h3>"
                     "<table><tr><th>template</th><th>queries</th><th>blocks read</th><th>skipped</th>"
                     "<th>example (the most recent)</th></tr>")
        for tpl in shown:
            parts.append(f"<tr><td><code>{escape(tpl.fingerprint)}</code></td>"
                         f"<td class=\"n\">{format_number(tpl.queries)}</td>"
                         f"<td class=\"n\">{_read_of(tpl.blocks_read, tpl.blocks_total, 'blocks')}</td>"
                         f"<td class=\"n\">{_share(tpl.blocks_read, tpl.blocks_total)}</td>"
                         f"<td>{_short_sql(tpl.example)}</td></tr>")
        parts.append("</table>")
    return page("Skipping", "".join(parts) + _recent(report, base), base)


def _days_table(daily) -> str:
    """Per UTC day, newest first: its routed scans and the blocks an average one read (a
    re-layout shows as the figure falling from one day to the next)."""
    rows = "".join(f"<tr><td>{escape(d.date)}</td><td class=\"n\">{format_number(d.scans)}</td>"
                   f"<td class=\"n\">{d.per_scan:.1f}</td><td class=\"n\">{_share(d.blocks_read, d.blocks_total)}</td>"
                   "</tr>" for d in reversed(daily))
    return ("<table class=\"days\"><tr><th>day (UTC)</th><th>scans</th><th>blocks read per scan</th>"
            f"<th>skipped</th></tr>{rows}</table>")


def _recent(report: SkippingReport, base: str) -> str:
    if not report.recent:
        return ""
    parts = [f"<h2>The most recent {'query' if len(report.recent) == 1 else f'{len(report.recent)} queries'}</h2>"
             "<table><tr><th>time</th><th>source</th><th>template</th><th>blocks read per table</th>"
             "<th>SQL</th></tr>"]
    for q in report.recent:
        parts.append(f"<tr><td>{format_time(q.ts)}</td><td>{escape(q.source)}</td>"
                     f"<td><code>{escape(q.fingerprint)}</code></td>"
                     f"<td>{_reads(q)}</td><td>{_short_sql(q.sql)}</td></tr>")
    parts.append("</table>")
    return "".join(parts)
