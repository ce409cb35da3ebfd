"""Every statement of the bad-input corpus (tests/data/bad_queries) gets its expected outcome
from `route_query` and from the workload analysis, within a time and memory bound, with
no exception escaping and no unexpected error counted.

The outcomes were recorded by hand in the corpus. The bounds are hang and blow-up guards,
not performance targets: 20 s of this process's CPU time per statement, and no statement
may raise the process's peak resident memory by 256 MB or more. The slowest statements
here, 900 `<>` conjuncts on one column and a 1 MB select list, take 1-3 s each. CPU time,
not wall time, because CI runs three workers and Spark JVMs on two cores: a 0.55 s
statement once took 11.8 s of wall time there.
"""

from __future__ import annotations

import importlib.util
import resource
import subprocess
import sys
import time
from collections import namedtuple

import pytest

from layout_core.base.schema import load_schema
from layout_core.predicates import value_to_json
from layout_core.skipping import router
from layout_core.skipping.router import LayoutIndex, RoutingIndex, route_query
from layout_core.sql.analysis import analyze
from layout_core.workload.analyze import analyze_statements
from tests.helpers.paths import TEST_DATA

CORPUS_DIR = TEST_DATA / "bad_queries"
SCHEMA = load_schema("tpch")
CPU_SECONDS = 20.0
PEAK_GROWTH_KB = 256 * 1024  # ru_maxrss is in kilobytes on Linux
FAILURES = {"empty", "parse error", "not a query", "unknown table", "unknown column", "too complex", "not analyzed"}


def _load_corpus():
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS_DIR / "make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CORPUS = _load_corpus().corpus()
Block = namedtuple("Block", "block_id row_count stats union_bits all_bits")


def _stats(lo, hi):
    return {"min": value_to_json(lo), "max": value_to_json(hi), "null_count": 0}


def _index() -> RoutingIndex:
    """lineitem and orders laid out in two blocks each, with one cut each (so routing
    asks implies/disjoint questions of every analyzed filter); no other table has a layout."""
    quantity = analyze("SELECT * FROM lineitem WHERE l_quantity < 10", SCHEMA).filters["t0"]
    price = analyze("SELECT * FROM orders WHERE o_totalprice > 1000", SCHEMA).filters["t0"]
    lineitem = LayoutIndex.from_blocks("lineitem", [
        Block(1, 10, {"l_quantity": _stats(1, 9), "l_orderkey": _stats(1, 100)}, 1, 1),
        Block(2, 20, {"l_quantity": _stats(10, 50), "l_orderkey": _stats(50, 200)}, 0, 0)], [quantity], version_id=1)
    orders = LayoutIndex.from_blocks("orders", [
        Block(3, 5, {"o_totalprice": _stats(1, 999), "o_orderkey": _stats(1, 100)}, 0, 0),
        Block(4, 5, {"o_totalprice": _stats(1001, 9999), "o_orderkey": _stats(101, 200)}, 1, 1)], [price],
        version_id=2)
    return RoutingIndex({"lineitem": (lineitem,), "orders": (orders,)}, {})


INDEX = _index()


def test_the_corpus_holds_every_kind_of_bad_statement():
    outcomes = [expect for _, expect, _ in CORPUS]
    assert len(CORPUS) >= 200
    assert FAILURES <= set(outcomes)
    assert max(len(sql) for _, _, sql in CORPUS) >= 1_000_000
    assert sum(1 for _, _, sql in CORPUS if sql.count(",") >= 9_999) >= 5  # the 10,000-literal IN lists


def _bounded(call):
    """(call(), CPU seconds it took, kilobytes it raised the process's peak resident memory by)."""
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.process_time()
    result = call()
    seconds = time.process_time() - started
    return result, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before


@pytest.mark.parametrize("name,expect,sql", CORPUS, ids=[name for name, _, _ in CORPUS])
def test_route_reports_the_expected_outcome(name, expect, sql):
    before = router.UNEXPECTED_ERRORS.count
    route, seconds, growth = _bounded(lambda: route_query(sql, INDEX, SCHEMA))
    assert seconds < CPU_SECONDS and growth < PEAK_GROWTH_KB, (seconds, growth)
    assert router.UNEXPECTED_ERRORS.count == before, route.warnings
    if expect in FAILURES:
        assert (route.analyzed, route.failure) == (False, expect), route.warnings
        assert route.warnings[0].startswith("reading everything: ")
    else:
        assert route.analyzed and route.failure == "", route.warnings
        read_in_full = any(r.read_all for r in route.refs)
        assert read_in_full == (expect == "no layout")


@pytest.mark.parametrize("name,expect,sql", CORPUS, ids=[name for name, _, _ in CORPUS])
def test_the_workload_analysis_reports_the_expected_outcome(name, expect, sql):
    summary, seconds, growth = _bounded(lambda: analyze_statements([sql], SCHEMA))
    assert seconds < CPU_SECONDS and growth < PEAK_GROWTH_KB, (seconds, growth)
    assert summary.unexpected == 0, summary.failed
    if expect in FAILURES:
        assert summary.failure_kinds == [expect] and not summary.analyses, summary.failed
    else:
        assert len(summary.analyses) == 1 and not summary.failed


def test_an_unexpected_error_reads_everything_with_a_warning_and_is_counted(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in the analysis")

    monkeypatch.setattr(router, "route_analysis", broken)
    before = router.UNEXPECTED_ERRORS.count
    route = route_query("SELECT * FROM orders WHERE o_totalprice > 1000", INDEX, SCHEMA)
    assert (route.analyzed, route.failure, route.refs) == (False, "unexpected error", ())
    assert "ZeroDivisionError: a bug in the analysis" in route.warnings[0]
    assert router.UNEXPECTED_ERRORS.count == before + 1
    assert "routing failed unexpectedly" in caplog.text


def test_the_cli_reports_each_bad_statement_on_one_line(tmp_path):
    # the small statements as a log file, what `layout workload analyze` is given
    module = _load_corpus()
    log = tmp_path / "bad.sql"
    module.write_sql(log, [s for s in CORPUS if len(s[2]) <= 20_000])
    done = subprocess.run([sys.executable, "-m", "layout_core.cli", "workload", "analyze", str(log)],
                          capture_output=True, text=True, errors="replace", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    failed = [line for line in lines if line.startswith("  statement ")]
    # (fewer statements than the corpus: in a file an unterminated quote or comment runs on into the next ones)
    total, parsed = int(lines[0].split()[0]), int(lines[0].split(", ")[1].split()[0])
    assert "(0 unexpected errors)" in lines[0] and total == parsed + len(failed) and len(failed) >= 40
    # one line each: "statement <n>: <outcome>: <reason>"
    assert all(line.split(": ")[1] in FAILURES for line in failed), failed[:5]
    assert "Traceback" not in done.stderr


def test_layout_route_prints_one_line_for_a_statement_it_cannot_analyze(orders_catalog):
    done = subprocess.run([sys.executable, "-m", "layout_core.cli", "route", "--no-history",
                           "SELECT * FROM sales WHERE id = 1"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "read everything: unknown table: unknown table 'sales'\n"
