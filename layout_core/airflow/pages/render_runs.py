"""The page of a DAG run that built layouts: each step's numbers from its metrics file, the
nightly's rows in and out and verification, or a partial reorganization's plan and result."""

from __future__ import annotations

from layout_core.airflow.pages.data import ReorgPlanned, RunReport
from layout_core.airflow.pages.markup import escape, escaped_number, href, page, state_label
from layout_core.airflow.pages.reports import (
    block_sizes,
    finite_number,
    format_number,
    metric_keys,
    reorg_summary,
    reorganized_text,
    step_numbers,
    step_seconds,
)
from layout_core.flows.names import REORG_STEPS


def _reorg_summary(metrics: dict) -> str:
    """A reorganization run in words, from the numbers its steps recorded (escaped HTML):
    "rewrote 32 of 50 blocks into 25 new ones; 18 shared with version 1; reward 29.1"."""
    s = reorg_summary(metrics)
    clauses = []
    if s.rewritten is not None:
        blocks = (f"{format_number(s.rewritten)} of {format_number(s.total)} blocks" if s.total is not None
                  else f"{format_number(s.rewritten)} blocks")
        into = "" if s.new is None else f" into {format_number(s.new)} new ones"
        clauses.append(f"rewrote {blocks}{into}" if s.activated or s.already_active
                       else f"plans to rewrite {blocks}{into}")
    if s.shared is not None:
        clauses.append(f"{format_number(s.shared)} shared with "
                       + ("the base version" if s.base is None else f"version {s.base}"))
    elif s.base is not None:
        clauses.append(f"base version {s.base}")
    if s.reward is not None:
        clauses.append(f"reward {format_number(s.reward)}")
    parts = []
    if clauses:
        parts.append(f"<p>Reorganization: {escape('; '.join(clauses))}.</p>")
    if s.already_active:
        parts.append("<p class=\"note\">activate_reorg found the new version already active (a retried task).</p>")
    elif not s.activated and s.planned:
        parts.append("<p class=\"note\">Not activated yet: until activate_reorg switches to the new version, "
                     "queries are routed to the base version.</p>")
    if s.subtrees is not None:
        of = "" if s.evaluated is None else (f", {format_number(s.evaluated)} evaluated" + (
            "" if s.considered is None else f" of {format_number(s.considered)}"))
        parts.append(f"<p class=\"note\">Subtrees rewritten: {escaped_number(s.subtrees)}{escape(of)}.</p>")
    return "".join(parts)


def _reorg_verification(metrics: dict) -> str:
    verify, written = step_numbers(metrics, "verify_reorg"), step_numbers(metrics, "write_reorg")
    if not isinstance(metrics.get("verify_reorg"), dict):
        return ("<span class=\"error\">not verified</span>: verify_reorg has not run, or it failed (a failed "
                "verification marks the new version failed; see the task log)")
    rows, moved = verify.get("rows"), written.get("rows")
    same = "" if moved is None else (
        f", the {escaped_number(moved)} rows of the blocks they replace" if moved == rows else
        f" <span class=\"error\">but write_reorg read {escaped_number(moved)} from the blocks they replace</span>")
    return (f"<span class=\"state-active\">passed</span>: the new blocks hold {escaped_number(rows)} rows{same}, "
            "with the same checksum")


def _reorg_plan(planned: ReorgPlanned) -> str:
    """What plan_reorg decided for a table (its reorg_planned.json)."""
    numbers = planned.numbers
    partitions = numbers.get("partitions")
    partitions = [p for p in partitions if isinstance(p, str)] if isinstance(partitions, list) else None
    reward, reason = finite_number(numbers.get("reward")), numbers.get("reason")
    head = f"<h2>Reorganization plan of table <code>{escape(planned.table)}</code></h2>"
    if partitions is None:
        return head + "<p class=\"note\">plan_reorg's record of this table cannot be read.</p>"
    which = (", ".join(p or "(unpartitioned)" for p in partitions) if partitions
             else "none: nothing is rewritten")
    return (head + f"<p>Partitions with subtrees to rewrite: {escape(which)}"
            f"{'' if reward is None else f'; reward {escaped_number(reward)}'}.</p>"
            + (f"<p class=\"note\">{escape(reason)}</p>" if isinstance(reason, str) and reason else ""))


def render_run(report: RunReport, base: str = "") -> str:
    """The page of one DAG run: every step's numbers from its metrics.json (the nightly's steps or
    a partial reorganization's)."""
    title = f"Layout run {report.dag_id} / {report.run_id}"
    head = (f"<p class=\"note\">DAG <code>{escape(report.dag_id)}</code>, run <code>{escape(report.run_id)}</code>; "
            f"the steps ran as <code>{escape(report.staged_run_id)}</code>.</p>")
    if not report.sections and not report.planned:
        return page(title, head + "<div class=\"box\"><p><strong>No layout staging folder for this run.</strong> "
                    "Either the run is not a layout run, its first step (ingest) has not written anything yet, "
                    "or garbage collection has removed its staging folder.</p></div>", base)
    parts = [head] + [_reorg_plan(p) for p in report.planned]
    for index, section in enumerate(report.sections):
        m, steps = section.metrics, section.steps
        reorg = steps == REORG_STEPS
        parts.append(f"<h2>Table <code>{escape(section.table)}</code>, partition "
                     f"<code>{escape(section.partition or '(unpartitioned)')}</code></h2>")
        v = section.version
        if v is not None:
            reorganized = reorganized_text(v)
            parts.append(f"<p>Catalog version {v.version_id}: {state_label(v.state)}, optimizer {escape(v.optimizer)}"
                         f"{'' if v.replaces is None or v.activated_at is None else f', replaced version {v.replaces}'}"
                         f"{'' if not reorganized else ', ' + escape(reorganized)}"
                         f"{'' if not v.reason else ' — ' + escape(v.reason)}.</p>")
        else:
            parts.append(f"<p class=\"note\">No catalog version for this run yet "
                         f"({'write_reorg' if reorg else 'write_blocks'} creates it).</p>")
        if reorg:
            parts.append(_reorg_summary(m))
        parts.append("<table><tr><th>step</th><th>rows</th><th>seconds</th><th>blocks</th><th>other numbers</th></tr>")
        for step in metric_keys(m, steps):
            numbers = m[step] if isinstance(m[step], dict) else {"value": m[step]}
            other = ", ".join(f"{escape(k)}={escaped_number(val)}" for k, val in numbers.items()
                              if k not in ("rows", "seconds", "blocks"))
            parts.append(f"<tr><td>{escape(step)}</td><td class=\"n\">{escaped_number(numbers.get('rows'))}</td>"
                         f"<td class=\"n\">{escaped_number(numbers.get('seconds'))}</td>"
                         f"<td class=\"n\">{escaped_number(numbers.get('blocks'))}</td><td>{other}</td></tr>")
        missing = [s for s in steps if s not in m]
        parts.append("</table>")
        if missing:
            parts.append(f"<p class=\"note\">Steps without numbers yet: {escape(', '.join(missing))}.</p>")
        if reorg:
            parts.append(f"<h3>Verification</h3><p>{_reorg_verification(m)}</p>")
        else:
            parts.append(_nightly_summary(m) + _trees_chosen(m))
        plot_query = {"dag_id": report.dag_id, "run_id": report.run_id, "section": index}
        sizes = block_sizes(section)
        if sizes:
            expected, real = sizes
            parts.append(f"<p class=\"note\">Per {'new ' if reorg else ''}block (the version is active): expected rows "
                         f"{format_number(round(min(expected)))}–{format_number(round(max(expected)))}, real rows "
                         f"{format_number(min(real))}–{format_number(max(real))} over {len(real)} blocks.</p>"
                         f"<img class=\"plot\" alt=\"expected and real rows per block\" width=\"900\" height=\"300\" "
                         f"src=\"{href(base, '/plot/run-blocks.png', **plot_query)}\">")
        elif v is not None and v.state != "active":
            parts.append("<p class=\"note\">Per-block sizes are shown while the version is active.</p>")
        if step_seconds(m, steps):
            parts.append(f"<h3>Seconds per step</h3><img class=\"plot\" alt=\"seconds per step\" width=\"900\" "
                         f"height=\"300\" src=\"{href(base, '/plot/run-seconds.png', **plot_query)}\">")
    return page(title, "".join(parts), base)


def _nightly_summary(m: dict) -> str:
    """Rows in and out, the verification and the planned and written blocks of a nightly run."""
    ingest, optimize, written, done = (step_numbers(m, step)
                                       for step in ("ingest", "optimize", "write_blocks", "update_catalog"))
    return ("<h3>Rows in and out</h3><p>"
            f"in (ingest): {escaped_number(ingest.get('rows')) or 'not recorded'}; out (blocks in the catalog, "
            f"update_catalog): {escaped_number(done.get('rows')) or 'not recorded'}</p>"
            f"<h3>Verification</h3><p>{_nightly_verification(m)}</p>"
            "<h3>Expected and real block sizes</h3><table><tr><th>blocks planned (optimize)</th>"
            "<th>blocks written (write_blocks)</th><th>blocks in the catalog</th>"
            "<th>largest relative error of a block's rows against the plan</th></tr>"
            f"<tr><td class=\"n\">{escaped_number(optimize.get('blocks'))}</td>"
            f"<td class=\"n\">{escaped_number(written.get('blocks'))}</td>"
            f"<td class=\"n\">{escaped_number(done.get('blocks'))}</td>"
            f"<td class=\"n\">{escaped_number(done.get('block_rows_error_max'))}</td></tr></table>")


def _trees_chosen(m: dict) -> str:
    """pando's trees=auto: the estimate of every k it compared and the k it kept ("" for other plans)."""
    choices = step_numbers(m, "optimize").get("choices")
    figures = choices.get("trees_evaluated") if isinstance(choices, dict) else None
    if not isinstance(figures, list):
        return ""
    rows = []
    for figure in figures:
        k, share = figure if isinstance(figure, list) and len(figure) == 2 else (figure, "not recorded")
        shown = ("skipped: over the k-tuple bound with leaves of one block" if share is None
                 else escaped_number(share))
        rows.append(f"<tr><td class=\"n\">{escaped_number(k)}</td><td>{shown}</td></tr>")
    return (f"<h3>Number of trees (pando, trees=auto)</h3><p>Kept k = {escaped_number(choices.get('trees'))}, "
            f"the smallest k within 2% of the best estimate; estimated share of rows read, measured on "
            f"{escaped_number(choices.get('trees_evaluated_on'))}:</p>"
            f"<table><tr><th>k</th><th>share of rows read</th></tr>{''.join(rows)}</table>")


def _nightly_verification(metrics: dict) -> str:
    verify, ingest = metrics.get("verify"), metrics.get("ingest")
    if not isinstance(verify, dict):
        return ("<span class=\"error\">not verified</span>: the verify step has not run, or it failed (a failed "
                "verification marks the version failed; see the task log)")
    rows = verify.get("rows")
    ingested = ingest.get("rows") if isinstance(ingest, dict) else None
    same = "" if ingested is None else (
        f", the {escaped_number(ingested)} rows ingested" if ingested == rows else
        f" <span class=\"error\">but ingest counted {escaped_number(ingested)}</span>")
    return (f"<span class=\"state-active\">passed</span>: the written blocks hold {escaped_number(rows)} rows"
            f"{same}, with the same checksum")
