"""The query history: what was routed, when, its template, and how much it skipped.

`QueryRecorder` writes every routed query to the catalog (`layout route`,
`layout rewrite`, `layout run-workload`, the demo); a failed write is logged
and never fails the route. `parse_query_log` reads an external log for
`layout workload import`, `query_log_text` writes the history back as one
for the nightly (`layout workload export`). `summarize_history` gives the numbers behind
`layout stats` and the Airflow Skipping page.

A template fingerprint is the query with its literals abstracted: every
literal becomes `?` and an IN list of literals becomes one `?`, so q6 with
other dates and discounts, or q16 with six sizes instead of eight, share one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

from pyroaring import BitMap64
from sqlglot import exp

from layout_core.catalog import Catalog
from layout_core.catalog.records import QueryRecord, RefRead
from layout_core.sql.analysis import QueryError, parse_query
from layout_core.sql.statements import split_statements

log = logging.getLogger(__name__)

DEFAULT_RETENTION_DAYS = 30


# ---------------------------------------------------------------------------
# Templates


def query_template(sql: str) -> str:
    """The query with literals as `?` (lower case, one line); a query that does
    not parse is its own template: its whitespace-collapsed, lower-case text."""
    try:
        tree = parse_query(sql)
    except QueryError:
        return " ".join(sql.lower().split())

    def literal(node: exp.Expression) -> exp.Expression:
        return exp.Placeholder() if isinstance(node, exp.Literal) else node

    def one_item_lists(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.In) and node.expressions and all(map(_abstracted, node.expressions)):
            node = node.copy()
            node.set("expressions", [exp.Placeholder()])
        return node

    template = tree.transform(literal).transform(one_item_lists)
    return template.sql(dialect="spark").lower()


def _abstracted(item: exp.Expression) -> bool:
    """An IN-list item that is a constant: `?`, `-?`, `date ?`, `(?)`."""
    return all(isinstance(n, (exp.Placeholder, exp.Neg, exp.Cast, exp.Paren, exp.DataType))
               for n in item.walk())


def template_fingerprint(sql: str) -> str:
    """16 hex digits naming the query's template."""
    return hashlib.sha1(query_template(sql).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------
# Recording routed queries


def query_record(route, source: str, ts: dt.datetime) -> QueryRecord:
    """The history entry of one route (`skipping.router.Route`)."""
    reads = []
    for r in route.refs:
        versions = tuple(p.version_id for p in r.partitions)
        if r.read_all:
            reads.append(RefRead(r.ref_id, r.table, 0, 0, 0, 0, versions, None))
        else:
            reads.append(RefRead(r.ref_id, r.table, len(r.blocks), r.blocks_total, r.rows, r.rows_total,
                                 versions, BitMap64(r.blocks).serialize()))
    return QueryRecord(ts, route.sql, template_fingerprint(route.sql), source, route.analyzed, tuple(reads))


class QueryRecorder:
    """Records routes in the catalog's history, one transaction per route.

    Calling it never raises: when the catalog cannot be written, the route is
    still the caller's, a warning is logged and the call returns False.
    """

    def __init__(self, catalog_url: str, source: str, retention_days: int = DEFAULT_RETENTION_DAYS,
                 clock: Callable[[], dt.datetime] | None = None) -> None:
        self.catalog_url = catalog_url
        self.source = source
        self.retention = dt.timedelta(days=retention_days)
        self._clock = clock or (lambda: dt.datetime.now(dt.timezone.utc))
        self._catalog = None
        self.recorded = 0
        self.failed = 0

    def __call__(self, route) -> bool:
        try:
            if self._catalog is None:
                self._catalog = Catalog(self.catalog_url)
            self._catalog.record_queries([query_record(route, self.source, self._clock())], self.retention)
        except Exception as e:  # noqa: BLE001 - recording must never fail a route
            self.failed += 1
            log.warning("query not recorded in the history (%s: %s); the route is unaffected",
                        type(e).__name__, " ".join(str(e).split())[:300])
            return False
        self.recorded += 1
        return True

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None

    def __enter__(self) -> QueryRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------
# Importing an external log


@dataclass(frozen=True)
class BadLine:
    line: int  # 1-based line of the log where the entry starts
    reason: str


@dataclass(frozen=True)
class ParsedLog:
    queries: tuple[QueryRecord, ...]
    bad: tuple[BadLine, ...] = ()
    too_old: int = 0  # entries older than the retention period, not loaded


def parse_query_log(text: str, now: dt.datetime, retention_days: int = DEFAULT_RETENTION_DAYS) -> ParsedLog:
    """Entries of a query log: JSON lines (`{"ts": ..., "sql": ...}`, `ts` ISO 8601
    or epoch seconds, naive meaning UTC) when the first non-blank character is
    `{`, else SQL statements ending with `;`, all stamped `now`. Entries that
    are not queries, or do not parse, are reported as bad and the rest kept."""
    cutoff = now - dt.timedelta(days=retention_days)
    if text.lstrip().startswith("{"):
        entries, bad = _json_lines(text)
    else:
        entries, bad = _sql_statements(text, now)
    queries, too_old = [], 0
    for line, ts, sql in entries:
        try:
            parse_query(sql)
        except QueryError as e:
            bad.append(BadLine(line, str(e)))
            continue
        if ts < cutoff:
            too_old += 1
            continue
        queries.append(QueryRecord(ts, sql, template_fingerprint(sql), "import", True, ()))
    return ParsedLog(tuple(queries), tuple(sorted(bad, key=lambda b: b.line)), too_old)


def _json_lines(text: str) -> tuple[list, list[BadLine]]:
    entries, bad = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            bad.append(BadLine(number, f"not JSON: {e.msg}"))
            continue
        if not isinstance(item, dict) or not isinstance(item.get("sql"), str) or not item["sql"].strip():
            bad.append(BadLine(number, 'expected an object with a non-empty "sql" string'))
            continue
        try:
            ts = _timestamp(item.get("ts"))
        except ValueError as e:
            bad.append(BadLine(number, str(e)))
            continue
        entries.append((number, ts, item["sql"].strip().rstrip(";")))
    return entries, bad


def _timestamp(value) -> dt.datetime:
    if isinstance(value, bool) or value is None:
        raise ValueError(f'"ts" must be an ISO 8601 time or epoch seconds, not {value!r}')
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f'"ts" must be a finite number, not {value!r}')
        try:
            return dt.datetime.fromtimestamp(value, dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f'"ts" {value!r} is out of range') from None
    if not isinstance(value, str):
        raise ValueError(f'"ts" must be an ISO 8601 time or epoch seconds, not {value!r}')
    try:
        ts = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f'"ts" is not an ISO 8601 time: {value!r}') from None
    return ts.replace(tzinfo=dt.timezone.utc) if ts.tzinfo is None else ts.astimezone(dt.timezone.utc)


def _sql_statements(text: str, now: dt.datetime) -> tuple[list, list[BadLine]]:
    entries, line = [], 1
    statements = split_statements(text)
    # A statement's line: where its text starts, searched from the previous one.
    position = 0
    for statement in statements:
        found = text.find(statement.sql, position)
        if found >= 0:
            line = text.count("\n", 0, found) + 1
            position = found + len(statement.sql)
        entries.append((line, now, statement.sql))
    return entries, []


def query_log_text(queries: Iterable[QueryRecord]) -> tuple[str, int]:
    """The queries as a SQL query log, oldest first: what the nightly's `query_log` and
    `layout workload import` read. Per query a header `-- history <ts> <source> <template>`
    and the statement ending in `;` (a repeated query stays repeated: the optimizers weigh
    queries by how often they ran). A query that does not parse, or whose text would not read
    back as itself (an open quote or comment would swallow the queries after it), is left
    out; returns (text, left out)."""
    chunks, left_out = [], 0
    for q in sorted(queries, key=lambda q: q.ts):
        sql = q.sql.strip().rstrip(";").rstrip()
        # a `--` comment on the last line would swallow a `;` written after it
        chunk = f"-- history {q.ts.isoformat()} {q.source} {q.fingerprint}\n{sql}\n;\n\n"
        try:
            parse_query(sql)
        except QueryError:
            left_out += 1
            continue
        if [s.sql for s in split_statements(chunk)] != [sql]:
            left_out += 1
            continue
        chunks.append(chunk)
    return "".join(chunks), left_out


# ---------------------------------------------------------------------------
# Summaries


def skipped_share(read: int, total: int) -> float:
    """The share of `total` blocks not read (0 when there were none)."""
    return 1 - read / total if total else 0.0


@dataclass(frozen=True)
class TemplateSkipping:
    fingerprint: str
    example: str  # the most recent SQL of the template
    queries: int
    blocks_read: int
    blocks_total: int

    @property
    def skipped(self) -> float:
        return skipped_share(self.blocks_read, self.blocks_total)


@dataclass(frozen=True)
class DaySkipping:
    """One UTC day of a table's routed scans (scans read in full are not among them)."""

    date: str  # ISO date
    scans: int
    blocks_read: int
    blocks_total: int

    @property
    def per_scan(self) -> float:
        """Blocks an average scan read that day."""
        return self.blocks_read / self.scans if self.scans else 0.0

    @property
    def skipped(self) -> float:
        return skipped_share(self.blocks_read, self.blocks_total)


@dataclass(frozen=True)
class TableSkipping:
    """How the queries of a period read one table: scans of its layout (one per
    table reference), blocks read against blocks there, and per template."""

    table: str
    queries: int
    scans: int
    read_in_full: int  # scans with no layout to route, or of a query that was not analyzed
    blocks_read: int
    blocks_total: int
    rows_read: int
    rows_total: int
    templates: tuple[TemplateSkipping, ...] = ()
    daily: tuple[DaySkipping, ...] = ()  # oldest first

    @property
    def skipped(self) -> float:
        """The share of the layout's blocks the scans did not read."""
        return skipped_share(self.blocks_read, self.blocks_total)

    def to_json(self) -> dict:
        return {"table": self.table, "queries": self.queries, "scans": self.scans,
                "read_in_full": self.read_in_full, "blocks_read": self.blocks_read,
                "blocks_total": self.blocks_total, "rows_read": self.rows_read,
                "rows_total": self.rows_total, "skipped": round(self.skipped, 4),
                "templates": [{"fingerprint": t.fingerprint, "example": t.example, "queries": t.queries,
                               "blocks_read": t.blocks_read, "blocks_total": t.blocks_total,
                               "skipped": round(t.skipped, 4)} for t in self.templates],
                "daily": [{"date": d.date, "scans": d.scans, "blocks_read": d.blocks_read,
                           "blocks_total": d.blocks_total} for d in self.daily]}


@dataclass
class _Tally:
    queries: set = field(default_factory=set)
    scans: int = 0
    read_in_full: int = 0
    blocks_read: int = 0
    blocks_total: int = 0
    rows_read: int = 0
    rows_total: int = 0
    templates: dict = field(default_factory=dict)  # fingerprint -> [example, query ids, read, total]
    daily: dict = field(default_factory=dict)  # date -> [scans, read, total]


def summarize_history(queries: Iterable[QueryRecord]) -> list[TableSkipping]:
    """Per table read by some query, sorted by name; templates by blocks read, most first."""
    tallies: dict[str, _Tally] = {}
    for n, query in enumerate(queries):
        key = query.query_id if query.query_id is not None else -1 - n
        for read in query.reads:
            t = tallies.setdefault(read.table, _Tally())
            t.queries.add(key)
            t.scans += 1
            if read.read_all or not query.analyzed:
                t.read_in_full += 1
                continue
            t.blocks_read += read.blocks_read
            t.blocks_total += read.blocks_total
            t.rows_read += read.rows_read
            t.rows_total += read.rows_total
            template = t.templates.setdefault(query.fingerprint, [query.sql, set(), 0, 0])
            template[0] = query.sql
            template[1].add(key)
            template[2] += read.blocks_read
            template[3] += read.blocks_total
            day = t.daily.setdefault(query.ts.astimezone(dt.timezone.utc).date().isoformat(), [0, 0, 0])
            day[0] += 1
            day[1] += read.blocks_read
            day[2] += read.blocks_total
    out = []
    for table in sorted(tallies):
        t = tallies[table]
        templates = sorted((TemplateSkipping(fp, ex, len(ids), r, n) for fp, (ex, ids, r, n) in t.templates.items()),
                           key=lambda s: (-s.blocks_read, s.fingerprint))
        out.append(TableSkipping(table, len(t.queries), t.scans, t.read_in_full, t.blocks_read, t.blocks_total,
                                 t.rows_read, t.rows_total, tuple(templates),
                                 tuple(DaySkipping(d, *numbers) for d, numbers in sorted(t.daily.items()))))
    return out
