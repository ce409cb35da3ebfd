"""diPs never lose a row: random tables cut into random blocks with random
range sets, every query shape of `test_analysis_soundness` and a few more
(derived tables and CTEs, UNION ALL, LEFT and RIGHT JOINs both ways, joins
on two columns, semi and anti joins through IN / EXISTS / NOT EXISTS), routed
with diPs; each reference,
or a drawn subset of them, then reads only its routed blocks and SQLite's
answer must not change. NULL, duplicate and orphan join keys come from the
shared strategies; blocks that hold only NULLs, and empty tables, too.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter, namedtuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.predicates import value_to_json
from layout_core.skipping.router import LayoutIndex, RoutingIndex, route_query
from tests.unit.sql.test_analysis_soundness import QUERIES, SCHEMA, STATUS, customer_rows, lineitem_rows, orders_rows

Block = namedtuple("Block", "block_id row_count stats union_bits all_bits")

MORE_QUERIES = {
    "star: lineitem joins orders and customer, filters on the dimensions only": """
        SELECT l1.l_linenumber, o.o_orderkey FROM lineitem l1, orders o, customer c
        WHERE l1.l_orderkey = o.o_orderkey AND o.o_custkey = c.c_custkey AND c.c_mktsegment = '{seg}'""",
    "LEFT JOIN from the filtered side: lineitem rows are NULL-supplied": """
        SELECT o.o_orderkey, l1.l_quantity FROM orders o
        LEFT JOIN lineitem l1 ON o.o_orderkey = l1.l_orderkey
        WHERE o.o_orderstatus {s}""",
    "LEFT JOIN from the unfiltered side: orders never shrink lineitem": """
        SELECT l1.l_linenumber, o.o_orderstatus FROM lineitem l1
        LEFT JOIN orders o ON o.o_orderkey = l1.l_orderkey AND o.o_orderstatus {s}""",
    "RIGHT JOIN from the filtered side: lineitem rows are NULL-supplied": """
        SELECT o.o_orderkey, l1.l_quantity FROM lineitem l1
        RIGHT JOIN orders o ON o.o_orderkey = l1.l_orderkey AND l1.l_quantity > {q}
        WHERE o.o_orderstatus {s}""",
    "RIGHT JOIN after an inner join, filtered on both sides": """
        SELECT c.c_custkey, o.o_orderkey, l1.l_linenumber FROM lineitem l1
        JOIN orders o ON o.o_orderkey = l1.l_orderkey AND o.o_totalprice = {p}
        RIGHT JOIN customer c ON o.o_custkey = c.c_custkey
        WHERE c.c_mktsegment = '{seg}' AND (l1.l_quantity > {q} OR l1.l_quantity IS NULL)""",
    "self join on two columns": """
        SELECT l1.l_linenumber, l2.l_linenumber FROM lineitem l1, lineitem l2
        WHERE l1.l_orderkey = l2.l_orderkey AND l2.l_suppkey = l1.l_suppkey AND l2.l_quantity = {q}""",
    "join on two columns, the orders side filtered": """
        SELECT o.o_orderkey, l1.l_linenumber FROM orders o
        JOIN lineitem l1 ON o.o_orderkey = l1.l_orderkey AND o.o_custkey = l1.l_suppkey
        WHERE o.o_orderstatus {s}""",
    "LEFT JOIN on two columns, the NULL-supplying side filtered": """
        SELECT l1.l_linenumber, o.o_orderstatus FROM lineitem l1
        LEFT JOIN orders o ON o.o_orderkey = l1.l_orderkey AND o.o_custkey = l1.l_suppkey AND o.o_totalprice = {p}
        WHERE l1.l_quantity > {q}""",
    "EXISTS and NOT EXISTS on two columns": """
        SELECT o.o_orderkey FROM orders o
        WHERE EXISTS (SELECT * FROM lineitem l1 WHERE l1.l_orderkey = o.o_orderkey AND l1.l_suppkey = o.o_custkey
                      AND l1.l_quantity > {q})
          AND NOT EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = o.o_orderkey
                          AND l2.l_suppkey = o.o_custkey AND l2.l_quantity = {p})""",
    "CTE read once, filtered outside": """
        WITH big AS (SELECT o.o_orderkey AS k, o.o_custkey AS who FROM orders o WHERE o.o_totalprice > {p})
        SELECT l1.l_linenumber, big.who FROM lineitem l1 JOIN big ON big.k = l1.l_orderkey
        WHERE big.who = {k} AND l1.l_quantity < {q}""",
    "CTE read twice, the second time summed over all its rows": """
        WITH per_order AS (SELECT l1.l_orderkey AS k, count(*) AS n FROM lineitem l1 WHERE l1.l_quantity > {q}
                           GROUP BY l1.l_orderkey)
        SELECT o.o_orderkey, p.n, (SELECT sum(n) FROM per_order) AS total FROM orders o, per_order p
        WHERE p.k = o.o_orderkey AND o.o_orderstatus {s}""",
    "derived table with a LIMIT": """
        SELECT o.o_orderkey FROM orders o,
               (SELECT l1.l_orderkey FROM lineitem l1 ORDER BY l1.l_linenumber LIMIT 3) t
        WHERE t.l_orderkey = o.o_orderkey AND o.o_orderstatus {s}""",
    "derived table with a LEFT JOIN inside, its NULL-supplying key joined outside": """
        SELECT l1.l_linenumber FROM lineitem l1,
               (SELECT o.o_orderkey AS k FROM customer c LEFT JOIN orders o ON o.o_custkey = c.c_custkey
                WHERE c.c_mktsegment = '{seg}') t
        WHERE t.k = l1.l_orderkey AND l1.l_quantity > {q}""",
    "derived table with a LEFT JOIN inside, the rows without a match outside": """
        SELECT t.ck FROM (SELECT c.c_custkey AS ck, o.o_orderkey AS k FROM customer c
                          LEFT JOIN orders o ON o.o_custkey = c.c_custkey AND o.o_orderstatus {s}) t
        WHERE t.k IS NULL OR t.k = {k}""",
    "derived table grouped by two columns, one of them filtered outside": """
        SELECT o.o_orderkey, t.n FROM orders o,
               (SELECT l1.l_orderkey, l1.l_suppkey, count(*) AS n FROM lineitem l1
                GROUP BY l1.l_orderkey, l1.l_suppkey) t
        WHERE t.l_orderkey = o.o_orderkey AND t.l_suppkey = {k} AND o.o_orderstatus {s}""",
    "derived table on the NULL-supplying side, IS NULL outside": """
        SELECT o.o_orderkey FROM orders o
        LEFT JOIN (SELECT l1.l_orderkey, l1.l_quantity FROM lineitem l1) t
            ON t.l_orderkey = o.o_orderkey AND t.l_quantity > {q}
        WHERE t.l_orderkey IS NULL AND o.o_orderstatus {s}""",
    "NOT EXISTS over a CTE's column, filtered inside the subquery": """
        WITH big AS (SELECT o.o_orderkey AS k, o.o_custkey AS who FROM orders o)
        SELECT big.k FROM big
        WHERE NOT EXISTS (SELECT 1 FROM lineitem l1 WHERE l1.l_orderkey = big.k AND big.who = {k})""",
    "a CTE over a CTE, the inner one read twice": """
        WITH a AS (SELECT o.o_orderkey AS k, o.o_orderstatus AS st FROM orders o WHERE o.o_totalprice > {p}),
             b AS (SELECT a.k FROM a WHERE a.st {s})
        SELECT l1.l_linenumber, (SELECT count(*) FROM a) AS n FROM lineitem l1 JOIN b ON b.k = l1.l_orderkey
        WHERE l1.l_quantity < {q}""",
    "two derived tables joined to each other": """
        SELECT x.k, y.n FROM (SELECT o.o_orderkey AS k FROM orders o WHERE o.o_orderstatus {s}) x
        JOIN (SELECT l1.l_orderkey, count(*) AS n FROM lineitem l1 WHERE l1.l_quantity > {q}
              GROUP BY l1.l_orderkey HAVING count(*) > 1) y ON x.k = y.l_orderkey""",
    "derived table with GROUP BY on the join key": """
        SELECT o.o_orderkey, t.n FROM orders o,
               (SELECT l_orderkey, count(*) AS n FROM lineitem l1 WHERE l1.l_quantity > {q}
                GROUP BY l_orderkey) t
        WHERE t.l_orderkey = o.o_orderkey AND o.o_orderstatus {s}""",
    "UNION ALL of two joins": """
        SELECT o.o_orderkey FROM orders o, lineitem l1 WHERE o.o_orderkey = l1.l_orderkey AND l1.l_quantity = {q}
        UNION ALL
        SELECT o2.o_orderkey FROM orders o2, customer c WHERE o2.o_custkey = c.c_custkey AND c.c_mktsegment = '{seg}'""",
    "UNION ALL of two tables' keys joined to a filtered dimension, filtered on its column": """
        SELECT u.k, c.c_mktsegment
        FROM (SELECT o.o_custkey AS k FROM orders o WHERE o.o_orderstatus {s}
              UNION ALL SELECT l1.l_suppkey AS k FROM lineitem l1 WHERE l1.l_quantity > {q}) u
        JOIN customer c ON c.c_custkey = u.k WHERE c.c_mktsegment = '{seg}' AND u.k <> {k}""",
    "UNION CTE, one branch grouped by the column": """
        WITH u AS (SELECT o.o_orderkey AS k FROM orders o WHERE o.o_totalprice > {p}
                   UNION SELECT l1.l_orderkey FROM lineitem l1 WHERE l1.l_quantity < {q} GROUP BY l1.l_orderkey)
        SELECT count(*), sum(o2.o_totalprice) FROM u JOIN orders o2 ON o2.o_orderkey = u.k
        WHERE o2.o_orderstatus {s}""",
    "a union's keys joined to an unfiltered dimension (the union's diP is all it gets)": """
        SELECT c.c_custkey, c.c_mktsegment FROM customer c
        JOIN (SELECT o.o_custkey AS k FROM orders o WHERE o.o_totalprice > {p}
              UNION ALL SELECT l1.l_suppkey FROM lineitem l1 WHERE l1.l_quantity = {q}) u ON c.c_custkey = u.k""",
    "two unions joined to each other": """
        SELECT x.k FROM (SELECT o.o_custkey AS k FROM orders o WHERE o.o_orderstatus {s}
                         UNION ALL SELECT l1.l_suppkey FROM lineitem l1 WHERE l1.l_quantity > {q}) x
        JOIN (SELECT c.c_custkey AS k FROM customer c WHERE c.c_mktsegment = '{seg}'
              UNION ALL SELECT o2.o_orderkey FROM orders o2 WHERE o2.o_totalprice > {p}) y ON x.k = y.k""",
    "a union on the preserved side of a RIGHT JOIN sends its keys to the other side": """
        SELECT c.c_mktsegment, u.k FROM customer c
        RIGHT JOIN (SELECT o.o_custkey AS k FROM orders o WHERE o.o_orderstatus {s}
                    UNION ALL SELECT l1.l_suppkey FROM lineitem l1 WHERE l1.l_quantity > {q}) u ON c.c_custkey = u.k""",
    "a union on the NULL-supplying side of a LEFT JOIN": """
        SELECT c.c_custkey, u.k FROM customer c
        LEFT JOIN (SELECT o.o_custkey AS k FROM orders o UNION ALL SELECT l1.l_suppkey FROM lineitem l1) u
          ON u.k = c.c_custkey AND u.k > {k}
        WHERE c.c_mktsegment = '{seg}'""",
    "a union whose branch aggregates the column (passes nothing)": """
        SELECT u.k FROM (SELECT max(o.o_custkey) AS k FROM orders o GROUP BY o.o_orderstatus
                         UNION ALL SELECT l1.l_suppkey FROM lineitem l1 WHERE l1.l_quantity > {q}) u
        JOIN customer c ON c.c_custkey = u.k WHERE c.c_mktsegment = '{seg}'""",
    "a union whose branch counts its rows with a window (passes nothing)": """
        SELECT u.k, u.n
        FROM (SELECT l1.l_orderkey AS k, count(*) OVER () AS n FROM lineitem l1 WHERE l1.l_quantity > {q}
              UNION ALL SELECT o.o_orderkey, 0 FROM orders o) u
        JOIN orders o2 ON o2.o_orderkey = u.k WHERE o2.o_orderstatus {s}""",
    "a union with a LIMIT of its own, and a CTE union read twice (pass nothing)": """
        WITH w AS (SELECT o.o_custkey AS k FROM orders o UNION ALL SELECT l1.l_suppkey FROM lineitem l1)
        SELECT u.k, (SELECT count(*) FROM w WHERE w.k > {k}) AS n
        FROM (SELECT o3.o_custkey AS k FROM orders o3 UNION ALL SELECT l3.l_suppkey FROM lineitem l3
              ORDER BY k LIMIT 3) u
        JOIN customer c ON c.c_custkey = u.k JOIN w ON w.k = c.c_custkey WHERE c.c_mktsegment = '{seg}'""",
    "semi join by IN on a dimension filter": """
        SELECT l1.l_linenumber FROM lineitem l1
        WHERE l1.l_orderkey IN (SELECT o.o_orderkey FROM orders o WHERE o.o_totalprice = {p})""",
    "anti join by NOT EXISTS, the inner side filtered": """
        SELECT o.o_orderkey FROM orders o
        WHERE NOT EXISTS (SELECT * FROM lineitem l1 WHERE l1.l_orderkey = o.o_orderkey AND l1.l_quantity > {q})""",
    "self join on a non-key column": """
        SELECT l1.l_linenumber, l2.l_linenumber FROM lineitem l1, lineitem l2
        WHERE l1.l_suppkey = l2.l_suppkey AND l2.l_quantity = {q}""",
}

ALL_QUERIES = {**QUERIES, **MORE_QUERIES}

COLUMNS = {
    "customer": ("c_custkey", "c_mktsegment"),
    "orders": ("o_orderkey", "o_custkey", "o_orderstatus", "o_totalprice"),
    "lineitem": ("l_orderkey", "l_suppkey", "l_quantity", "l_linenumber"),
}


def _rows(orders, lineitem, customer) -> dict[str, list[tuple]]:
    return {
        "customer": sorted(customer.items()),
        "orders": [(k, *v) for k, v in sorted(orders.items())],
        "lineitem": [(*row, n) for n, row in enumerate(lineitem)],
    }


def _column_stats(values: list, cuts: int) -> dict:
    """Min, max, NULL count and a range set cutting the sorted distinct values at
    the gaps chosen by the bits of `cuts` (any covering set is sound)."""
    present = sorted({v for v in values if v is not None})
    stats = {"min": value_to_json(present[0] if present else None),
             "max": value_to_json(present[-1] if present else None),
             "null_count": len(values) - len([v for v in values if v is not None])}
    ranges, start = [], 0
    for i in range(1, len(present)):
        if cuts >> i & 1:
            ranges.append((present[start], present[i - 1]))
            start = i
    if len(ranges) and present:
        ranges.append((present[start], present[-1]))
        stats["ranges"] = [[value_to_json(a), value_to_json(b)] for a, b in ranges]
    return stats


def _layout(table: str, rows: list[tuple], blocks: list[int], cuts: int) -> LayoutIndex:
    by_block: dict[int, list[tuple]] = {}
    for row, block in zip(rows, blocks):
        by_block.setdefault(block, []).append(row)
    records = []
    for block, members in sorted(by_block.items()):
        stats = {c: _column_stats([r[i] for r in members], cuts >> (3 * i)) for i, c in enumerate(COLUMNS[table])}
        records.append(Block(block, len(members), stats, 0, 0))
    return LayoutIndex.from_blocks(table, records, [], version_id=1)


def _database(rows: dict[str, list[tuple]], blocks: dict[str, list[int]]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    for table, columns in COLUMNS.items():
        db.execute(f"CREATE TABLE {table} ({', '.join(columns)}, block_id INTEGER)")
        db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * (len(columns) + 1))})",
                       [(*row, b) for row, b in zip(rows[table], blocks[table])])
    return db


def _read_routed(sql: str, route, which: int) -> str:
    """Each reference (in `which`) reads only its routed blocks."""
    for i, ref in enumerate(route.refs):
        if not which >> i & 1:
            continue
        listed = ", ".join(map(str, ref.blocks)) or "NULL"
        view = f"(SELECT * FROM {ref.table} WHERE block_id IN ({listed}))"
        sql, n = re.subn(rf"\b{ref.table} {ref.alias}\b", f"{view} {ref.alias}", sql)
        assert n == 1, f"{ref.table} {ref.alias} is not in the query once"
    return sql


blocks_of = st.lists(st.integers(0, 3), min_size=20, max_size=20)


@pytest.mark.parametrize("template", sorted(ALL_QUERIES))
@settings(max_examples=120, deadline=None)
@given(status=st.sampled_from(STATUS),
       q=st.integers(0, 9), p=st.integers(0, 9), k=st.integers(0, 3), seg=st.sampled_from(["A", "B"]),
       orders=orders_rows, lineitem=lineitem_rows, customer=customer_rows,
       blocks=st.fixed_dictionaries({t: blocks_of for t in COLUMNS}),
       cuts=st.integers(0, 2 ** 24), which=st.one_of(st.just(-1), st.integers(0, 15)),
       clustered=st.booleans())
def test_reading_only_the_blocks_diPs_leave_keeps_the_answer(template, status, q, p, k, seg, orders, lineitem,
                                                              customer, blocks, cuts, which, clustered):
    sql = ALL_QUERIES[template].format(s=status, q=q, p=p, k=k, seg=seg)
    rows = _rows(orders, lineitem, customer)
    if clustered:  # blocks by the first column, as a layout makes them: narrow ranges, where diPs skip most
        blocks = {t: [3 if r[0] is None else r[0] // 2 for r in rows[t]] for t in COLUMNS}
    else:
        blocks = {t: blocks[t][:len(rows[t])] for t in COLUMNS}
    index = RoutingIndex({t: (_layout(t, rows[t], blocks[t], cuts),) for t in COLUMNS}, {})
    route = route_query(sql, index, SCHEMA)
    assert route.analyzed, route.warnings
    db = _database(rows, blocks)
    expected = Counter(db.execute(sql).fetchall())
    restricted = _read_routed(sql, route, which)
    assert Counter(db.execute(restricted).fetchall()) == expected, f"{template}\n{restricted}\n{route.dips}"


def test_the_property_is_not_vacuous_diPs_remove_blocks_in_it():
    import random

    rnd = random.Random(3)
    removing = 0
    for _ in range(100):
        customer = {k: rnd.choice(["A", "B"]) for k in rnd.sample(range(7), 5)}
        orders = {k: (rnd.randint(0, 6), "F", rnd.randint(0, 9)) for k in rnd.sample(range(7), 6)}
        lineitem = [(rnd.randint(0, 7), rnd.randint(0, 7), rnd.randint(0, 9)) for _ in range(20)]
        rows = _rows(orders, lineitem, customer)
        # blocks by key, as a layout would make them: diPs need narrow key ranges
        blocks = {"customer": [r[0] // 2 for r in rows["customer"]], "orders": [r[1] // 2 for r in rows["orders"]],
                  "lineitem": [r[0] // 2 for r in rows["lineitem"]]}
        index = RoutingIndex({t: (_layout(t, rows[t], blocks[t], 0),) for t in COLUMNS}, {})
        sql = MORE_QUERIES["star: lineitem joins orders and customer, filters on the dimensions only"].format(seg="A")
        removing += bool(route_query(sql, index, SCHEMA).dips)
    assert removing >= 30


def test_the_pair_diP_removes_blocks_in_it_too():
    import random

    rnd = random.Random(5)
    removing = 0
    for _ in range(100):
        orders = {k: (rnd.randint(0, 6), "F", rnd.randint(0, 9)) for k in rnd.sample(range(7), 6)}
        lineitem = [(rnd.randint(0, 7), rnd.randint(0, 7), rnd.randint(0, 9)) for _ in range(20)]
        rows = _rows(orders, lineitem, {})
        blocks = {t: [r[0] // 2 for r in rows[t]] for t in COLUMNS}
        index = RoutingIndex({t: (_layout(t, rows[t], blocks[t], 0),) for t in COLUMNS}, {})
        sql = MORE_QUERIES["self join on two columns"].format(q=rnd.randint(0, 9))
        removing += any(d.edge.from_column.startswith("(") for d in route_query(sql, index, SCHEMA).dips)
    assert removing >= 30
