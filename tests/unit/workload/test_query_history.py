"""The query history: routed queries recorded with what they read, imported logs, stats."""

import datetime as dt
import json
import logging

import pytest
from pyroaring import BitMap64

from layout_core.catalog import Catalog, QueryRecord, RefRead
from layout_core.cli import main
from layout_core.workload.history import (
    QueryRecorder,
    parse_query_log,
    query_template,
    summarize_history,
    template_fingerprint,
)
from layout_core.workload.tpch import generate

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


# ---------------------------------------------------------------- templates


def test_instances_of_one_tpch_template_share_a_fingerprint_and_templates_differ():
    queries = generate(3, seed=7, scale_factor=1.0)
    by_template: dict[int, set[str]] = {}
    for q in queries:
        by_template.setdefault(q.template, set()).add(template_fingerprint(q.sql))
    assert sorted(by_template) == list(range(1, 23))
    assert all(len(fps) == 1 for fps in by_template.values()), {
        t: fps for t, fps in by_template.items() if len(fps) > 1}
    assert len({fp for fps in by_template.values() for fp in fps}) == 22


def test_literals_and_in_lists_are_abstracted_but_structure_is_not():
    a = "SELECT count(*) FROM part WHERE p_size IN (1, 2, 3) AND p_brand <> 'Brand#45'"
    b = "select COUNT(*)  from part where p_size in (49, 14, 23, 45, 19, 3, 36, 9) and p_brand <> 'Brand#12'"
    c = "SELECT count(*) FROM part WHERE p_size IN (1, 2, 3) AND p_brand = 'Brand#45'"
    assert template_fingerprint(a) == template_fingerprint(b)
    assert template_fingerprint(a) != template_fingerprint(c)
    assert query_template("SELECT * FROM t WHERE d >= date '1994-01-01' + interval '3' month LIMIT 5") == (
        "select * from t where d >= cast(? as date) + interval (?) month limit ?")
    # A query that does not parse is its own template: its normalized text.
    assert query_template("SELEC  broken\n FROM") == "selec broken from"


# ------------------------------------------------------------------ catalog


def _read(ref, table, read, total, ids=None, versions=(1,)):
    return RefRead(ref, table, read, total, read * 10, total * 10, versions,
                   None if ids is None else BitMap64(ids).serialize())


def test_history_round_trip_with_time_window_table_filter_and_retention(catalog_url):
    clock = [T0]
    with Catalog(catalog_url, clock=lambda: clock[0]) as catalog:
        q1 = QueryRecord(T0 - dt.timedelta(days=40), "SELECT 1 FROM orders", "aa", "route", True,
                         (_read(0, "orders", 2, 5, [3, 4]),))
        q2 = QueryRecord(T0 - dt.timedelta(hours=2), "SELECT 1 FROM lineitem l1, lineitem l2", "bb", "run", True,
                         (_read(0, "lineitem", 1, 8, [7]), _read(1, "lineitem", 8, 8, list(range(8)))))
        q3 = QueryRecord(T0 - dt.timedelta(hours=1), "SELECT 1 FROM nation", "cc", "route", True,
                         (_read(0, "nation", 0, 0, None, ()),))
        q4 = QueryRecord(T0, "SELECT broken", "dd", "import", False, ())
        ids = catalog.record_queries([q1, q2, q3, q4])
        assert len(ids) == 4 and len(set(ids)) == 4

        everything = catalog.query_history()
        assert [q.fingerprint for q in everything] == ["aa", "bb", "cc", "dd"]
        got = everything[1]
        assert got.ts == q2.ts and got.sql == q2.sql and got.source == "run" and got.query_id == ids[1]
        assert [(r.ref, r.table, r.blocks_read, r.blocks_total) for r in got.reads] == [
            (0, "lineitem", 1, 8), (1, "lineitem", 8, 8)]
        assert list(got.reads[0].blocks()) == [7] and got.reads[0].versions == (1,)
        assert everything[2].reads[0].read_all and list(everything[2].reads[0].blocks()) == []
        assert everything[3].analyzed is False and everything[3].reads == ()

        assert [q.fingerprint for q in catalog.query_history(since=T0 - dt.timedelta(hours=3))] == ["bb", "cc", "dd"]
        assert [q.fingerprint for q in catalog.query_history(until=T0 - dt.timedelta(hours=1))] == ["aa", "bb"]
        assert [q.fingerprint for q in catalog.query_history(table="lineitem")] == ["bb"]
        assert [q.fingerprint for q in catalog.query_history(limit=2)] == ["cc", "dd"]

        # Recording with a 30-day retention drops the 40-day-old query (and its reads).
        catalog.record_queries([QueryRecord(T0, "SELECT 2", "ee", "route")], dt.timedelta(days=30))
        assert [q.fingerprint for q in catalog.query_history()] == ["bb", "cc", "dd", "ee"]
        assert catalog.prune_history(T0 - dt.timedelta(minutes=30)) == 2
        assert [q.fingerprint for q in catalog.query_history()] == ["dd", "ee"]


def test_a_record_needs_a_known_source_and_an_aware_time():
    with pytest.raises(ValueError, match="source"):
        QueryRecord(T0, "SELECT 1", "aa", "somewhere")
    with pytest.raises(ValueError, match="timezone"):
        QueryRecord(T0.replace(tzinfo=None), "SELECT 1", "aa", "route")


# ----------------------------------------------------------------- recorder


def test_route_and_rewrite_record_what_they_read(orders_catalog, capsys):
    url, version, b1, b2 = orders_catalog
    cheap = "SELECT count(*) FROM orders o WHERE o.o_totalprice > 150"
    assert main(["route", cheap]) == 0
    assert main(["rewrite", "SELECT count(*) FROM orders o WHERE o.o_totalprice > 120"]) == 0
    assert main(["route", "SELECT count(*) FROM orders"]) == 0
    assert main(["route", "SELECT count(*) FROM orders WHERE o_totalprice < 0", "--no-history"]) == 0
    assert main(["route", "SELEC nonsense"]) == 0  # read in full, and recorded as not analyzed
    capsys.readouterr()
    with Catalog(url) as catalog:
        history = catalog.query_history()
    assert [(q.source, q.analyzed) for q in history] == [
        ("route", True), ("rewrite", True), ("route", True), ("route", False)]
    first = history[0]
    assert first.sql == cheap and first.fingerprint == history[1].fingerprint != history[2].fingerprint
    (read,) = first.reads
    assert (read.table, read.blocks_read, read.blocks_total, read.rows_read, read.rows_total) == (
        "orders", 1, 2, 30, 40)
    assert list(read.blocks()) == [b2] and read.versions == (version,)
    assert history[2].reads[0].blocks_read == 2 and history[3].reads == ()

    assert main(["stats", "--json"]) == 0
    (orders,) = json.loads(capsys.readouterr().out)
    # 3 routed scans of a 2-block table: 1 + 1 + 2 blocks read of 6.
    assert (orders["queries"], orders["scans"], orders["blocks_read"], orders["blocks_total"]) == (3, 3, 4, 6)
    assert orders["skipped"] == pytest.approx(1 / 3, abs=1e-4)
    assert [(t["queries"], t["blocks_read"]) for t in orders["templates"]] == [(2, 2), (1, 2)] or \
        [(t["queries"], t["blocks_read"]) for t in orders["templates"]] == [(1, 2), (2, 2)]
    assert main(["stats"]) == 0
    assert "orders: 3 queries, 3 scans, read 4 of 6 blocks (33.3% skipped)" in capsys.readouterr().out
    assert main(["stats", "--since", "1h", "--table", "orders", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["blocks_read"] == 4
    assert main(["stats", "--since", "yesterday"]) == 1  # a bad duration is one clear line
    capsys.readouterr()
    assert main(["workload", "history", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "orders 2/2" in out and "selec nonsense" in out.lower() and "2 queries" in out


def test_a_catalog_that_cannot_be_written_never_fails_the_route(tmp_path, caplog):
    from layout_core.skipping.router import Route

    route = Route("SELECT 1", ())
    recorder = QueryRecorder(f"sqlite:///{tmp_path / 'missing-folder' / 'catalog.db'}", "route")
    with caplog.at_level(logging.WARNING):
        assert recorder(route) is False
    assert recorder.failed == 1 and "not recorded in the history" in caplog.text


def test_a_broken_history_write_leaves_the_cli_route_intact(orders_catalog, monkeypatch, capsys, caplog):
    def refuse(self, *a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Catalog, "record_queries", refuse)
    with caplog.at_level(logging.WARNING):
        assert main(["route", "SELECT count(*) FROM orders WHERE o_totalprice > 150", "--json"]) == 0
    (ref,) = json.loads(capsys.readouterr().out)["refs"]
    assert len(ref["blocks"]) == 1 and "disk full" in caplog.text


# ------------------------------------------------------------------- import


def test_json_lines_log_loads_good_lines_and_reports_bad_ones():
    now = dt.datetime(2026, 11, 25, tzinfo=UTC)
    text = "\n".join([
        json.dumps({"ts": "2026-11-24T10:00:00Z", "sql": "SELECT count(*) FROM orders"}),
        "{not json",
        json.dumps({"ts": "2026-11-24T11:00:00", "sql": "SELECT o_orderkey FROM orders WHERE o_totalprice > 5"}),
        json.dumps({"ts": 1795000000, "sql": "SELECT 1 FROM nation;"}),
        json.dumps({"ts": "yesterday", "sql": "SELECT 1"}),
        json.dumps({"sql": "SELECT 1"}),
        json.dumps({"ts": "2026-11-24T10:00:00Z"}),
        json.dumps({"ts": "2026-11-24T10:00:00Z", "sql": "DROP TABLE orders"}),
        json.dumps({"ts": "2026-11-24T10:00:00Z", "sql": "SELECT FROM WHERE ((("}),
        json.dumps({"ts": "2025-01-01T00:00:00Z", "sql": "SELECT 2"}),
        "",
        json.dumps(["a list"]),
    ])
    parsed = parse_query_log(text, now, retention_days=30)
    assert [q.sql for q in parsed.queries] == [
        "SELECT count(*) FROM orders", "SELECT o_orderkey FROM orders WHERE o_totalprice > 5", "SELECT 1 FROM nation"]
    assert parsed.queries[1].ts == dt.datetime(2026, 11, 24, 11, tzinfo=UTC)  # naive means UTC
    assert parsed.queries[2].ts == dt.datetime.fromtimestamp(1795000000, UTC)
    assert all(q.source == "import" and q.reads == () for q in parsed.queries)
    assert [b.line for b in parsed.bad] == [2, 5, 6, 7, 8, 9, 12]
    reasons = {b.line: b.reason for b in parsed.bad}
    assert "not JSON" in reasons[2] and "ISO 8601" in reasons[5] and "DROP" in reasons[8]
    assert "cannot parse" in reasons[9]
    assert parsed.too_old == 1


def test_sql_log_statements_get_the_import_time_and_their_line(tmp_path, monkeypatch, capsys):
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("LAYOUT_CATALOG_URL", url)
    log_file = tmp_path / "log.sql"
    log_file.write_text("-- q1\nSELECT count(*) FROM orders;\n\nSELECT broken FROM (;\n"
                        "SELECT o_orderkey\nFROM orders WHERE o_orderdate < date '1995-01-01';\n")
    assert main(["workload", "import", str(log_file)]) == 0
    captured = capsys.readouterr()
    assert "loaded 2 queries into the history; 1 bad entries skipped" in captured.out
    assert f"{log_file}:4: skipped: cannot parse SQL" in captured.err
    with Catalog(url) as catalog:
        history = catalog.query_history()
    assert [q.sql.split()[1] for q in history] == ["count(*)", "o_orderkey"]
    assert all(abs((q.ts - dt.datetime.now(UTC)).total_seconds()) < 120 for q in history)


# -------------------------------------------------------------------- stats


def test_summary_counts_scans_templates_and_days():
    day1, day2 = T0, T0 + dt.timedelta(days=1)
    queries = [
        QueryRecord(day1, "q a 1", "a", "route", True, (_read(0, "lineitem", 2, 10, [1, 2]),
                                                         _read(1, "orders", 1, 4, [0]))),
        QueryRecord(day2, "q a 2", "a", "route", True, (_read(0, "lineitem", 4, 10, [1, 2, 3, 4]),)),
        QueryRecord(day2, "q b", "b", "run", True, (_read(0, "lineitem", 10, 10, list(range(10))),
                                                     _read(1, "lineitem", 0, 0, None, ()))),
        QueryRecord(day2, "broken", "c", "import", False, ()),
    ]
    lineitem, orders = summarize_history(queries)
    assert (lineitem.table, lineitem.queries, lineitem.scans, lineitem.read_in_full) == ("lineitem", 3, 4, 1)
    assert (lineitem.blocks_read, lineitem.blocks_total) == (16, 30)
    assert lineitem.skipped == pytest.approx(14 / 30)
    assert [(t.fingerprint, t.queries, t.blocks_read, t.example) for t in lineitem.templates] == [
        ("b", 1, 10, "q b"), ("a", 2, 6, "q a 2")]
    # per day its routed scans (the scan read in full is not one): 2 blocks of 10 in one scan, then
    # 4 and 10 of 10 each in two
    assert [(d.date, d.scans, d.blocks_read, d.blocks_total) for d in lineitem.daily] == [
        ("2026-11-01", 1, 2, 10), ("2026-11-02", 2, 14, 20)]
    assert (lineitem.daily[0].per_scan, lineitem.daily[1].per_scan) == (2.0, 7.0)
    assert lineitem.daily[1].skipped == pytest.approx(0.3)
    assert (orders.queries, orders.blocks_read, orders.blocks_total) == (1, 1, 4)
    assert summarize_history([]) == []


def test_the_history_exports_as_a_query_log_that_reads_back_query_for_query(tmp_path, monkeypatch, capsys):
    from layout_core.sql.statements import split_statements

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("LAYOUT_CATALOG_URL", url)
    now = dt.datetime.now(UTC)
    semicolon = "SELECT count(*) FROM orders WHERE o_comment = 'a;b' -- ends in a comment"
    q6 = "SELECT sum(l_extendedprice) FROM lineitem WHERE l_discount > 0.05"
    with Catalog(url) as catalog:
        catalog.record_queries([
            QueryRecord(now - dt.timedelta(days=10), "SELECT 1 FROM nation", "t0", "import"),  # before --since
            QueryRecord(now - dt.timedelta(hours=3), q6 + ";", "t1", "import"),
            QueryRecord(now - dt.timedelta(hours=2), semicolon, "t2", "import"),
            QueryRecord(now - dt.timedelta(hours=1), "SELECT broken FROM (", "t3", "api", analyzed=False),
            QueryRecord(now - dt.timedelta(minutes=5), q6, "t1", "import"),  # ran twice: exported twice
        ])
    out = tmp_path / "logs" / "week.sql"
    assert main(["workload", "export", "--since", "7d", "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 3 queries of the last 7d to {out}; 1 that do not parse left out"
    assert [s.sql for s in split_statements(out.read_text())] == [q6, semicolon, q6]
    assert not list(out.parent.glob("*.partial"))

    # the log loads as the queries it came from (the nightly's query_log reads the same statements)
    monkeypatch.setenv("LAYOUT_CATALOG_URL", f"sqlite:///{tmp_path / 'other.db'}")
    assert main(["workload", "import", str(out)]) == 0
    assert "loaded 3 queries into the history; 0 bad entries skipped" in capsys.readouterr().out
