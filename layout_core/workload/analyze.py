"""A query log -> per table: predicates, join edges and candidate cuts, with counts.

Every statement is analyzed on its own; one that cannot be parsed or names
an unknown table or column is listed under `failed` with the reason and the
rest of the log is still used.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from layout_core.predicates import JoinInduced, atoms, to_sql
from layout_core.base.schema import Schema
from layout_core.sql.analysis import (
    DEFAULT_MAX_DEPTH, QueryAnalysis, QueryError, analyze, candidate_cuts,
)
from layout_core.sql.statements import Statement, split_statements

log = logging.getLogger("layout.workload")


@dataclass
class TableWorkload:
    """What the log asks of one table. Counts are numbers of queries (a query
    that reads the table twice with the same predicate counts once)."""

    predicates: Counter = field(default_factory=Counter)  # simple cut -> count
    atoms: Counter = field(default_factory=Counter)  # atomic predicate -> count
    join_induced: Counter = field(default_factory=Counter)  # JoinInduced cut -> count
    joins: Counter = field(default_factory=Counter)  # "a.x = b.y" -> count
    queries: int = 0  # queries that read the table


@dataclass
class WorkloadSummary:
    queries: int
    analyses: list[QueryAnalysis]
    failed: list[tuple[int, str]]  # (statement index, reason)
    tables: dict[str, TableWorkload]
    # per entry of `failed`: QueryError's kind ("parse error", "unknown table", ...)
    # or "unexpected error" (a bug in the analysis, also counted in `unexpected`)
    failure_kinds: list[str] = field(default_factory=list)
    unexpected: int = 0

    def to_json(self) -> dict:
        return {
            "queries": self.queries,
            "parsed": len(self.analyses),
            "unexpected_errors": self.unexpected,
            "failed": [{"index": i, "kind": k, "error": e}
                       for (i, e), k in zip(self.failed, self.failure_kinds)],
            "tables": {name: _table_json(t) for name, t in sorted(self.tables.items())},
        }


def _by_count(counter: Counter, key=to_sql) -> list[tuple[object, int]]:
    return sorted(counter.items(), key=lambda kv: (-kv[1], key(kv[0])))


def _table_json(t: TableWorkload) -> dict:
    return {
        "queries": t.queries,
        "predicates": [{"sql": to_sql(p), "count": n} for p, n in _by_count(t.predicates)],
        "atoms": [{"sql": to_sql(p), "count": n} for p, n in _by_count(t.atoms)],
        "join_induced_cuts": [
            {"sql": to_sql(p), "path": [str(h) for h in p.hops], "count": n}
            for p, n in _by_count(t.join_induced)
        ],
        "joins": [{"sql": j, "count": n} for j, n in _by_count(t.joins, key=str)],
    }


def analyze_statements(
    statements: list[Statement] | list[str], schema: Schema, max_depth: int = DEFAULT_MAX_DEPTH
) -> WorkloadSummary:
    key_hops = schema.key_hops()
    tables: dict[str, TableWorkload] = defaultdict(TableWorkload)
    analyses, failed, failure_kinds = [], [], []
    unexpected = 0
    for index, statement in enumerate(statements):
        sql = statement.sql if isinstance(statement, Statement) else statement
        try:
            analysis = analyze(sql, schema)
            cuts = {ref.key: candidate_cuts(analysis, ref.key, key_hops, max_depth) for ref in analysis.refs}
        except QueryError as e:
            failed.append((index, str(e)))
            failure_kinds.append(e.kind)
            continue
        except Exception as e:  # noqa: BLE001 - one statement's bug must not lose the rest of the log
            unexpected += 1
            log.warning("statement %d: the analysis failed unexpectedly; statement skipped", index, exc_info=True)
            failed.append((index, f"analysis failed ({type(e).__name__}: {' '.join(str(e).split())[:200]})"))
            failure_kinds.append("unexpected error")
            continue
        analyses.append(analysis)
        seen: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))
        for ref in analysis.refs:
            simple, induced = cuts[ref.key]
            seen[ref.table]["predicates"].update(simple)
            seen[ref.table]["atoms"].update(a for p in simple for a in atoms(p))
            seen[ref.table]["join_induced"].update(induced)
        for (ta, ca), (tb, cb) in analysis.joins:
            text = f"{ta}.{ca} = {tb}.{cb}"
            seen[ta]["joins"].add(text)
            seen[tb]["joins"].add(text)
        for table, kinds in seen.items():
            t = tables[table]
            t.queries += 1
            for kind, items in kinds.items():
                getattr(t, kind).update(items)
    return WorkloadSummary(len(statements), analyses, failed, dict(tables), failure_kinds, unexpected)


def analyze_file(path: str | Path, schema: Schema, max_depth: int = DEFAULT_MAX_DEPTH) -> WorkloadSummary:
    # bytes that are not UTF-8 (a log with binary garbage) become U+FFFD: that statement fails, not the log
    return analyze_statements(split_statements(Path(path).read_text(errors="replace")), schema, max_depth)


def format_summary(summary: WorkloadSummary, top: int = 10) -> str:
    """A human-readable report (the JSON form has everything)."""
    lines = [
        f"{summary.queries} statements, {len(summary.analyses)} parsed, {len(summary.failed)} failed"
        f" ({summary.unexpected} unexpected errors)"
    ]
    for (index, error), kind in zip(summary.failed, summary.failure_kinds):
        lines.append(f"  statement {index}: {kind}: {_one_line(error)}")
    for name, t in sorted(summary.tables.items()):
        lines.append(f"\n{name}: read by {t.queries} queries")
        sections = [
            ("predicates", t.predicates, to_sql),
            ("join-induced cuts", t.join_induced, _induced_text),
            ("joins", t.joins, str),
        ]
        for title, counter, text in sections:
            if not counter:
                continue
            lines.append(f"  {title} ({len(counter)} distinct):")
            for item, n in _by_count(counter, key=text)[:top]:
                lines.append(f"    {n:5d}  {text(item)}")
            if len(counter) > top:
                lines.append(f"           ... {len(counter) - top} more")
    return "\n".join(lines)


def _one_line(text: str, width: int = 300) -> str:
    """A reason on one line of at most `width` characters (a bad statement's text may hold newlines)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _induced_text(p: JoinInduced) -> str:
    path = " -> ".join([p.hops[0].parent_table] + [h.child_table for h in p.hops])
    return f"[{path}] {to_sql(p.source)}"


__all__ = ["TableWorkload", "WorkloadSummary", "analyze_statements", "analyze_file", "format_summary"]
