"""The pages of the runs that leave a report instead of layouts: a layout_workload_monitor
run's shift report and a layout_gc run's garbage report (both checked by `reports`)."""

from __future__ import annotations

from layout_core.airflow.pages.markup import (
    escape,
    escaped_number,
    format_bytes,
    format_time,
    more_note,
    page,
    shorten,
    yes_no,
)
from layout_core.airflow.pages.reports import GcRun, MonitorRun, format_number

GC_LISTED = 50  # kept items, purged versions and deleted folders listed on a gc run's page (the first)


def _unread_report(run, kind: str, when: str) -> str:
    """The box saying a monitor or gc run's report is not there yet (`when` says when it will
    be) or cannot be read (why); "" when it was read."""
    if not run.written:
        return (f"<div class=\"box\"><p><strong>The {kind} run has not written its report yet.</strong></p>"
                f"<p class=\"note\">{escape(when)}</p></div>")
    if run.problem is not None:
        return (f"<div class=\"box\"><p><strong>The {kind} run has not written a report this page can read."
                f"</strong></p><p class=\"note\">{escape(run.problem)}.</p></div>")
    return ""


def render_monitor(run: MonitorRun, base: str = "") -> str:
    """The page of one layout_workload_monitor run: per table its shift reward and decision, per
    partition the subtrees chosen (from the run's report)."""
    title = f"Layout run {run.dag_id} / {run.run_id}"
    head = (f"<p class=\"note\">DAG <code>{escape(run.dag_id)}</code>, run <code>{escape(run.run_id)}</code>: "
            "the workload monitor's report (measure_shift), per laid-out table the reward (q/w)·B(T) − C(T) "
            "of re-laying out qd-tree subtrees T for the recent queries.</p>")
    missing = _unread_report(run, "monitor",
                             "measure_shift writes it when it is done; emit_shift_events then reads it.")
    if missing:
        return page(title, head + missing, base)
    s = run.settings
    labels = (("q", "q ="), ("w", "w ="), ("window_hours", "window (hours):"))
    said = [f"{label} {format_number(s[key])}" for key, label in labels if s.get(key) is not None]
    parts = [head]
    if said:
        parts.append(f"<p class=\"note\">{escape(', '.join(said))} (q: queries expected before the next shift; "
                     "w: the cost of writing a block, in block reads).</p>")
    if not run.tables:
        parts.append("<div class=\"box\"><p>The report lists no table: no table had an active layout (or the "
                     "tables asked for are not in the schema).</p></div>")
    for t in run.tables:
        parts.append(f"<h2>Table <code>{escape(t['table'])}</code></h2>")
        window = ([f"The window: {t['window'][0]} to {t['window'][1]}"] if t["window"] else []) + (
            [] if t["queries"] is None else [f"{format_number(t['queries'])} queries in it" if t["window"]
                                             else f"{format_number(t['queries'])} queries in the window"])
        parts.append("<table><tr><th>references in the window</th><th>reward</th><th>reorganize</th></tr>"
                     f"<tr><td class=\"n\">{escaped_number(t['references'])}</td>"
                     f"<td class=\"n\">{escaped_number(t['reward'])}</td>"
                     f"<td>{yes_no(t['reorganize'])}</td></tr></table>"
                     + (f"<p class=\"note\">{escape('; '.join(window))}.</p>" if window else "")
                     + f"<p>{escape(t['reason'])}</p>")
        if t["notes"]:
            parts.append("<ul>" + "".join(f"<li class=\"note\">{escape(n)}</li>" for n in t["notes"]) + "</ul>")
        if not t["partitions"]:
            continue
        parts.append("<table><tr><th>partition</th><th>version</th><th>blocks</th><th>reward</th>"
                     "<th>blocks chosen</th><th>subtrees evaluated</th><th>reason</th>"
                     "<th>a full re-layout saves per query (noise floor)</th>"
                     "<th>held-out reward at the bootstrap's 5%</th></tr>")
        for p in t["partitions"]:
            parts.append(f"<tr><td>{escape(p['partition'] or '(unpartitioned)')}</td>"
                         f"<td class=\"n\">{escape(p['version'])}</td>"
                         f"<td class=\"n\">{escaped_number(p['blocks'])}</td>"
                         f"<td class=\"n\">{escaped_number(p['reward'])}</td>"
                         f"<td class=\"n\">{escaped_number(p['blocks_chosen'])}</td>"
                         f"<td class=\"n\">{escaped_number(p['subtrees_evaluated'])} of "
                         f"{escaped_number(p['subtrees_total'])}</td>"
                         f"<td>{escape(p['reason'])}</td>"
                         f"<td class=\"n\">{_gain_and_noise(p)}</td>"
                         f"<td class=\"n\">{escaped_number(p['lower_bound'])}</td></tr>")
        parts.append("</table>")
        for p in t["partitions"]:
            if not p["chosen"]:
                continue
            version = "" if p["version"] is None else f" (version {p['version']})"
            parts.append(f"<h3>Subtrees chosen in partition "
                         f"<code>{escape(p['partition'] or '(unpartitioned)')}</code>{escape(version)}: "
                         f"{len(p['chosen'])}, {escaped_number(p['subtrees_evaluated'])} evaluated of "
                         f"{escaped_number(p['subtrees_total'])}</h3>"
                         "<table><tr><th>node</th><th>blocks</th><th>leaves</th><th>benefit</th><th>reward</th></tr>")
            for c in p["chosen"]:
                parts.append(f"<tr><td class=\"n\">{escape(c['node'])}</td>"
                             f"<td class=\"n\">{escaped_number(c['blocks'])}</td>"
                             f"<td class=\"n\">{escaped_number(c['leaves'])}</td>"
                             f"<td class=\"n\">{escaped_number(c['benefit'])}</td>"
                             f"<td class=\"n\">{escaped_number(c['reward'])}</td></tr>")
            parts.append("</table>")
    return page(title, "".join(parts), base)


def _gain_and_noise(partition: dict) -> str:
    """B of the root and its noise floor, "" for a report without them."""
    if partition["root_gain"] is None:
        return ""
    return f"{escaped_number(partition['root_gain'])} ({escaped_number(partition['root_noise'])})"


def _folder_rows(folders: list[dict], with_version: bool) -> str:
    rows = []
    for f in folders[:GC_LISTED]:
        version = f"<td class=\"n\">{escape(f['version_id'])}</td>" if with_version else ""
        rows.append(f"<tr><td><code>{escape(shorten(f['path']))}</code></td>{version}"
                    f"<td class=\"n\">{escape(format_bytes(f['bytes']))}</td></tr>")
    return "".join(rows)


def render_gc(run: GcRun, base: str = "") -> str:
    """The page of one layout_gc run: what it deleted (or, in a dry run, would have), what it
    kept and why (from the run's report)."""
    title = f"Layout run {run.dag_id} / {run.run_id}"
    head = (f"<p class=\"note\">DAG <code>{escape(run.dag_id)}</code>, run <code>{escape(run.run_id)}</code>: "
            "the garbage collection's report (block folders of retired and failed versions, staging folders of "
            "runs that can no longer resume).</p>")
    missing = _unread_report(run, "gc", "collect_garbage writes it when it is done (runs of the gc from before "
                                        "the reports were written have none).")
    if missing:  # read_gc_run gives a report whenever it was written and had no problem
        return page(title, head + missing, base)
    r = run.report
    dry = r["dry_run"]
    verb = "would be deleted" if dry else "deleted"
    ids = r["purged_version_ids"]
    listed = ", ".join(str(v) for v in ids[:GC_LISTED]) + (f", … and {format_number(len(ids) - GC_LISTED)} more"
                                                          if len(ids) > GC_LISTED else "")
    block_bytes, staging_bytes = (sum(f["bytes"] for f in r[key]) for key in ("folders", "staging"))
    parts = [head]
    if dry:
        parts.append("<div class=\"box\"><p><strong>A dry run</strong>: nothing was deleted or recorded; the "
                     "numbers are what the gc would have deleted.</p></div>")
    rows = [("dry run", yes_no(dry)),
            ("cutoff (out of service before it: due)", escape(format_time(r["cutoff"]))),
            (f"versions {'that would be ' if dry else ''}purged", escaped_number(r["versions_purged"])
             + (f" (version{'s' if len(ids) != 1 else ''} {escape(listed)})" if ids else "")),
            (f"block folders {verb}",
             f"{escaped_number(r['block_folders_deleted'])}, {escape(format_bytes(block_bytes))}"),
            (f"staging folders {verb}",
             f"{escaped_number(r['staging_folders_deleted'])}, {escape(format_bytes(staging_bytes))}"),
            (f"bytes freed{' (would be)' if dry else ''}", escape(format_bytes(r["bytes_freed"]))),
            ("queries pruned from the history",
             escaped_number(r["history_pruned"]) + (" (none in a dry run)" if dry else "")),
            ]
    if r["reports_deleted"] is not None:
        rows.append(("old gc reports deleted", escaped_number(r["reports_deleted"])))
    rows.append(("kept (candidates not deleted)", escaped_number(r["kept"])))
    parts.append("<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>")
    kept = r["kept_items"]
    parts.append(f"<h2>Kept ({format_number(len(kept))})</h2>")
    if kept:
        parts.append("<table><tr><th>version or folder</th><th>why it stays</th></tr>" + "".join(
            f"<tr><td><code>{escape(shorten(k['what']))}</code></td><td>{escape(shorten(k['reason']))}</td></tr>"
            for k in kept[:GC_LISTED])
            + "</table>" + more_note(GC_LISTED, len(kept), "kept"))
    else:
        parts.append("<p class=\"note\">Nothing kept.</p>")
    for key, what, with_version in (("folders", "Block folders", True), ("staging", "Staging folders", False)):
        folders = r[key]
        if not folders:
            continue
        parts.append(f"<h2>{what} {verb} ({format_number(len(folders))})</h2><table><tr><th>folder</th>"
                     + ("<th>version</th>" if with_version else "") + "<th>size</th></tr>"
                     + _folder_rows(folders, with_version) + "</table>"
                     + more_note(GC_LISTED, len(folders), what.lower()))
    return page(title, "".join(parts), base)
