"""The bad-input corpus: statements a real query log holds, each with its expected outcome.

`corpus()` returns (name, expected outcome, SQL) triples, the same every run
(random bytes come from a seeded generator). The outcomes were written by hand
from what each statement is, against a catalog where lineitem and orders have
layouts and no other table has one (tests/unit/sql/test_bad_queries.py builds it):

    routed          analyzed; every table reference is routed through a layout
    no layout       analyzed; some table has no layout and is read in full
    empty           no SQL at all (blank, only comments or semicolons)
    parse error     not SQL sqlglot's Spark dialect parses (malformed, another dialect, garbage)
    not a query     DDL, DML and other statements that read nothing to route
    unknown table   a table the schema does not have
    unknown column  a column no table of the query has
    too complex     nested deeper, or with more column references, than the analysis takes
    not analyzed    a construct the analysis refuses (a join in parentheses inside FROM)

Every outcome but the first two means "read everything". The 1 MB
statements and the 10,000-literal IN lists are built here, not stored.

    python tests/data/bad_queries/make_corpus.py [--out FILE]

writes the corpus as one SQL file (statements end with `;`, each preceded by
`-- <name>: expect <outcome>`) for `layout workload analyze FILE`; without
--out it writes corpus.sql beside this script, leaving out the statements of
more than 20,000 characters (tests/data stays small).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

MB = 1_000_000
SMALL = 20_000  # characters; longer statements are generated, never stored

MALFORMED = [
    ("select_typo", "SELEC * FROM lineitem"),
    ("from_typo", "SELECT * FORM lineitem"),
    ("no_table", "SELECT * FROM"),
    ("dangling_where", "SELECT * FROM lineitem WHERE"),
    ("dangling_compare", "SELECT * FROM lineitem WHERE l_quantity <"),
    ("dangling_and", "SELECT * FROM lineitem WHERE l_quantity < 5 AND"),
    ("open_paren", "SELECT * FROM lineitem WHERE (l_quantity < 5"),
    ("close_paren", "SELECT * FROM lineitem WHERE l_quantity < 5)"),
    ("unterminated_string", "SELECT * FROM lineitem WHERE l_comment = 'abc"),
    ("unterminated_backtick", "SELECT * FROM `lineitem WHERE l_quantity < 5"),
    ("double_where", "SELECT * FROM lineitem WHERE l_quantity < 5 WHERE l_tax > 0"),
    ("empty_in_parens", "SELECT * FROM lineitem WHERE l_quantity IN (1,"),
    ("join_without_table", "SELECT * FROM lineitem JOIN ON l_orderkey = o_orderkey"),
    ("order_by_dangling", "SELECT * FROM lineitem ORDER BY"),
    ("case_without_end", "SELECT CASE WHEN l_quantity > 1 THEN 1 FROM lineitem"),
    ("two_operators", "SELECT * FROM lineitem WHERE l_quantity < > 5"),
    ("only_keyword", "WHERE l_quantity < 5"),
    ("words", "please give me all the line items"),
    ("number", "42"),
    ("unclosed_subquery", "SELECT * FROM lineitem WHERE l_orderkey IN (SELECT o_orderkey FROM orders"),
    ("cte_without_query", "WITH t AS (SELECT * FROM lineitem)"),
    ("log_prefix", "2026-11-25 10:00:00 INFO query: SELECT * FROM lineitem"),
    ("json_line", '{"ts": "2026-11-25T10:00:00", "sql": "SELECT * FROM lineitem"}'),
    ("xml", "<query>SELECT * FROM lineitem</query>"),
    ("two_statements", "SELECT * FROM lineitem; SELECT * FROM orders"),
]

OTHER_DIALECTS = [  # features of other engines that Spark SQL does not have
    ("tsql_top", "SELECT TOP 10 * FROM lineitem"),
    ("tsql_brackets", "SELECT [l_orderkey] FROM [lineitem]"),
    ("mysql_backslash_g", "SELECT * FROM lineitem\\G"),
    ("sqlplus_slash", "SELECT * FROM lineitem\n/"),
    ("psql_meta", "\\d lineitem"),
    ("tsql_go", "GO"),
    ("plsql_begin", "BEGIN SELECT * FROM lineitem; END"),
]

DDL_DML = [
    ("postgres_returning", "DELETE FROM orders WHERE o_orderkey = 1 RETURNING *"),
    ("tsql_declare", "DECLARE @x INT = 5"),
    ("values_statement", "VALUES (1, 2)"),  # reads no table
    ("create_table", "CREATE TABLE t (a INT, b STRING)"),
    ("create_table_as", "CREATE TABLE t AS SELECT * FROM lineitem WHERE l_quantity < 5"),
    ("create_view", "CREATE VIEW v AS SELECT * FROM orders"),
    ("create_temp_view", "CREATE OR REPLACE TEMPORARY VIEW v AS SELECT * FROM orders"),
    ("drop_table", "DROP TABLE lineitem"),
    ("drop_view", "DROP VIEW IF EXISTS v"),
    ("alter_table", "ALTER TABLE orders ADD COLUMNS (o_note STRING)"),
    ("alter_rename", "ALTER TABLE orders RENAME TO orders_old"),
    ("truncate", "TRUNCATE TABLE orders"),
    ("insert_values", "INSERT INTO orders VALUES (1, 2, 'O', 3.0, DATE '1995-01-01', '1-URGENT', 'c', 0, 'x')"),
    ("insert_select", "INSERT INTO orders SELECT * FROM orders WHERE o_orderkey < 10"),
    ("insert_overwrite", "INSERT OVERWRITE TABLE orders SELECT * FROM orders"),
    ("update", "UPDATE orders SET o_comment = 'x' WHERE o_orderkey = 1"),
    ("delete", "DELETE FROM lineitem WHERE l_shipdate < DATE '1993-01-01'"),
    ("merge", "MERGE INTO orders t USING orders s ON t.o_orderkey = s.o_orderkey "
              "WHEN MATCHED THEN UPDATE SET t.o_comment = s.o_comment"),
    ("grant", "GRANT SELECT ON TABLE orders TO analyst"),
    ("set_conf", "SET spark.sql.shuffle.partitions = 8"),
    ("use_db", "USE tpch"),
    ("show_tables", "SHOW TABLES"),
    ("describe", "DESCRIBE TABLE lineitem"),
    ("cache_table", "CACHE TABLE lineitem"),
    ("uncache_table", "UNCACHE TABLE lineitem"),
    ("refresh_table", "REFRESH TABLE lineitem"),
    ("analyze_table", "ANALYZE TABLE lineitem COMPUTE STATISTICS"),
    ("msck_repair", "MSCK REPAIR TABLE lineitem"),
    ("create_database", "CREATE DATABASE IF NOT EXISTS tpch"),
    ("drop_database", "DROP DATABASE tpch CASCADE"),
    ("create_function", "CREATE FUNCTION f AS 'com.example.F'"),
    ("add_jar", "ADD JAR /tmp/x.jar"),
    ("commit", "COMMIT"),
]

UNKNOWN_COLUMNS = [
    ("col_typo", "SELECT * FROM lineitem WHERE l_quantiy < 5"),
    ("col_of_other_table", "SELECT * FROM lineitem WHERE o_orderdate < DATE '1995-01-01'"),
    ("col_bad_alias", "SELECT * FROM lineitem l WHERE x.l_quantity < 5"),
    ("col_in_select", "SELECT l_nosuchcolumn FROM lineitem"),
    ("col_in_join", "SELECT * FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey_x"),
    ("col_in_group_by", "SELECT count(*) FROM orders GROUP BY o_nosuch"),
    ("col_in_subquery", "SELECT * FROM orders WHERE o_orderkey IN (SELECT l_nosuch FROM lineitem)"),
    ("col_upper_typo", "SELECT * FROM ORDERS WHERE O_ORDERDATEE < DATE '1995-01-01'"),
]

UNICODE_AND_QUOTED = [  # identifiers and strings a real log has
    ("backticked_table", "SELECT * FROM `lineitem` WHERE `l_quantity` < 5", "routed"),
    ("backticked_alias", "SELECT * FROM lineitem AS `l i` WHERE `l i`.l_quantity < 5", "routed"),
    ("upper_case_names", "SELECT * FROM LINEITEM WHERE L_QUANTITY < 5", "routed"),
    ("unicode_string", "SELECT * FROM lineitem WHERE l_comment = 'naïve café ☃ 数据'", "routed"),
    ("unicode_like", "SELECT * FROM orders WHERE o_comment LIKE '%żółw%'", "routed"),
    ("emoji_alias", "SELECT l_orderkey AS `🚀` FROM lineitem WHERE l_quantity < 5", "routed"),
    ("unicode_table", "SELECT * FROM `ラインアイテム`", "unknown table"),
    ("unicode_column", "SELECT * FROM lineitem WHERE `数量` < 5", "unknown column"),
    ("double_quoted_string", 'SELECT * FROM lineitem WHERE l_shipmode = "AIR"', "routed"),
    ("escaped_quote", "SELECT * FROM orders WHERE o_comment = 'it''s'", "routed"),
    ("backslash_escape", "SELECT * FROM orders WHERE o_comment = 'a\\'b'", "routed"),
    ("nul_in_string", "SELECT * FROM orders WHERE o_comment = 'a\x00b'", "routed"),
    ("tab_and_newlines", "SELECT *\r\n\tFROM orders\r\n\tWHERE o_totalprice > 1000", "routed"),
    ("zero_width_space", "SELECT * FROM orders\u200b WHERE o_totalprice > 1", "unknown table"),  # part of the name
    ("fullwidth_select", "ＳＥＬＥＣＴ * FROM orders", "parse error"),
    ("rtl_string", "SELECT * FROM orders WHERE o_comment = 'שלום עולם'", "routed"),
    ("quoted_keyword_alias", "SELECT o.`select` FROM (SELECT o_orderkey AS `select` FROM orders) o", "routed"),
    ("quoted_unknown_table", "SELECT * FROM `line item`", "unknown table"),
    ("db_qualified", "SELECT * FROM tpch.lineitem WHERE l_quantity < 5", "routed"),
]

COMMENTS_AND_HINTS = [
    ("broadcast_hint", "SELECT /*+ BROADCAST(o) */ * FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
                       "WHERE o.o_orderdate < DATE '1995-01-01'", "routed"),
    ("repartition_hint", "SELECT /*+ REPARTITION(8) */ * FROM orders WHERE o_totalprice > 1000", "routed"),
    ("bogus_hint", "SELECT /*+ NO_SUCH_HINT(x, y) */ * FROM orders", "routed"),
    ("line_comment_before", "-- the daily report\nSELECT * FROM orders WHERE o_totalprice > 1000", "routed"),
    ("line_comment_after", "SELECT * FROM orders WHERE o_totalprice > 1000 -- big orders", "routed"),
    ("block_comment_inside", "SELECT * FROM orders /* all of them */ WHERE o_totalprice > 1000", "routed"),
    ("comment_in_literal", "SELECT * FROM orders WHERE o_comment = '/* not a comment */'", "routed"),
    ("dashes_in_literal", "SELECT * FROM orders WHERE o_comment = '-- not a comment'", "routed"),
    ("unterminated_block_comment", "SELECT * FROM orders /* where did it end", "parse error"),  # Spark refuses it too
    ("comment_hides_where", "SELECT * FROM orders -- WHERE o_totalprice > 1000", "routed"),
    ("nested_block_comment", "SELECT * FROM orders /* a /* b */ c */ WHERE o_totalprice > 1", "routed"),  # Spark nests them
    ("query_id_comment", "/* queryId=8f2c user=etl */ SELECT count(*) FROM lineitem WHERE l_tax > 0.05", "routed"),
    ("hash_comment", "# mysql comment\nSELECT * FROM orders", "parse error"),
]

EMPTY = [
    ("empty", ""),
    ("space", " "),
    ("whitespace", "\n\t \r\n"),
    ("semicolon", ";"),
    ("semicolons", ";;;"),
    ("line_comment", "-- nothing here"),
    ("block_comment", "/* nothing here */"),
    ("comments", "-- a\n/* b */\n-- c"),
    ("hint_alone", "/*+ BROADCAST(o) */"),
    ("comment_semicolon", "-- x\n;"),
]

# Valid queries of the kinds a log holds, to show bad neighbours cost nothing.
GOOD = [
    ("q6", "SELECT sum(l_extendedprice * l_discount) FROM lineitem WHERE l_shipdate >= DATE '1994-01-01' "
           "AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24", "routed"),
    ("q4", "SELECT o_orderpriority, count(*) FROM orders WHERE o_orderdate >= DATE '1993-07-01' "
           "AND o_orderdate < DATE '1993-10-01' AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey "
           "AND l_commitdate < l_receiptdate) GROUP BY o_orderpriority", "routed"),
    ("q3_customer", "SELECT l_orderkey FROM customer c JOIN orders o ON c.c_custkey = o.o_custkey "
                    "JOIN lineitem l ON l.l_orderkey = o.o_orderkey WHERE c.c_mktsegment = 'BUILDING'", "no layout"),
    ("nation_only", "SELECT * FROM nation WHERE n_name = 'FRANCE'", "no layout"),
    ("no_filter", "SELECT count(*) FROM lineitem", "routed"),
    ("select_constant", "SELECT 1", "routed"),
    ("cte", "WITH big AS (SELECT * FROM orders WHERE o_totalprice > 1000) SELECT count(*) FROM big", "routed"),
    ("union", "SELECT l_orderkey FROM lineitem WHERE l_quantity < 2 UNION ALL "
              "SELECT o_orderkey FROM orders WHERE o_totalprice < 900", "routed"),
    ("lowercase_keywords", "select * from lineitem where l_returnflag = 'R'", "routed"),
    ("trailing_semicolon_inside", "SELECT * FROM orders WHERE o_orderstatus = 'F';", "routed"),
    ("join_in_parentheses", "SELECT * FROM customer c LEFT JOIN (orders o JOIN lineitem l ON "
                            "o.o_orderkey = l.l_orderkey) ON c.c_custkey = o.o_custkey", "not analyzed"),
]

# Malformed for Spark, yet sqlglot's parser is lenient and reads them as queries: routed
# as sqlglot reads them (harmless: Spark refuses to run them). Nested block comments and
# CONNECT BY are Spark SQL or sqlglot's base grammar.
LENIENT = [
    ("lenient_comma_before_from", "SELECT l_orderkey, FROM lineitem WHERE l_quantity < 5", "routed"),
    ("lenient_between_without_and", "SELECT * FROM lineitem WHERE l_quantity BETWEEN 1 5", "routed"),
    ("lenient_in_without_list", "SELECT * FROM lineitem WHERE l_quantity IN", "routed"),
    ("lenient_group_by_dangling", "SELECT l_returnflag, count(*) FROM lineitem GROUP BY", "routed"),
    ("lenient_only_select", "SELECT", "routed"),
    ("lenient_connect_by", "SELECT o_orderkey FROM orders START WITH o_orderkey = 1 "
                           "CONNECT BY PRIOR o_orderkey = o_custkey", "routed"),
    ("lenient_nbsp_whitespace", "SELECT\u00a0*\u00a0FROM orders", "routed"),
]

MADE_UP_TABLES = ["sales", "events", "users", "lineitems", "order", "tmp_1", "staging.lineitem_raw", "dual",
                  "information_schema.tables", "lineitem_2026", "customers", "parts", "supplier_v2", "x", "t"]


def _unknown_tables() -> list[tuple[str, str, str]]:
    out = []
    for i, name in enumerate(MADE_UP_TABLES):
        out.append((f"unknown_table_{i}", f"SELECT * FROM {name} WHERE id = {i}", "unknown table"))
    # a known table joined to an unknown one: the unknown one decides
    for i, name in enumerate(MADE_UP_TABLES[:5]):
        out.append((f"join_unknown_table_{i}",
                    f"SELECT * FROM lineitem l JOIN {name} s ON l.l_orderkey = s.id", "unknown table"))
    return out


def _in_lists() -> list[tuple[str, str, str]]:
    ints = ", ".join(str(i) for i in range(10_000))
    strings = ", ".join(f"'{i:08d}'" for i in range(10_000))
    dates = ", ".join(f"DATE '199{i % 8}-{i % 12 + 1:02d}-{i % 28 + 1:02d}'" for i in range(10_000))
    return [
        ("in_10k_ints", f"SELECT * FROM lineitem WHERE l_orderkey IN ({ints})", "routed"),
        ("not_in_10k_ints", f"SELECT * FROM lineitem WHERE l_orderkey NOT IN ({ints})", "routed"),
        ("in_10k_strings", f"SELECT * FROM orders WHERE o_clerk IN ({strings})", "routed"),
        ("in_10k_with_null", f"SELECT * FROM lineitem WHERE l_partkey IN ({ints}, NULL)", "routed"),
        ("in_10k_dates", f"SELECT * FROM orders WHERE o_orderdate IN ({dates})", "routed"),
        ("in_10k_unknown_column", f"SELECT * FROM orders WHERE o_nosuch IN ({ints})", "unknown column"),
        ("in_10k_join", f"SELECT * FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
                        f"WHERE o.o_custkey IN ({ints})", "routed"),
    ]


def _boolean_blowups() -> list[tuple[str, str, str]]:
    """AND of ORs and OR of ANDs (DNF/CNF of 2^n or 3^n terms), nested alternations."""
    out = []
    for n in (4, 8, 16, 32, 64, 128):
        cnf = " AND ".join(f"(l_quantity = {i} OR l_discount = 0.0{i % 10} OR l_tax < {i})" for i in range(n))
        out.append((f"and_of_ors_{n}", f"SELECT * FROM lineitem WHERE {cnf}", "routed"))
        dnf = " OR ".join(f"(l_quantity = {i} AND l_discount = 0.0{i % 10} AND l_tax < {i})" for i in range(n))
        out.append((f"or_of_ands_{n}", f"SELECT * FROM lineitem WHERE {dnf}", "routed"))
    # alternating AND/OR nesting: depth 10 and 40 are analyzed, deeper ones refused
    for depth, expect in ((10, "routed"), (40, "routed"), (150, "too complex"), (2000, "too complex")):
        expr = "l_quantity = 1"
        for i in range(depth):
            expr = f"({expr} {'AND' if i % 2 else 'OR'} (l_discount = {i % 10} OR l_tax < {i}))"
        out.append((f"alternating_depth_{depth}", f"SELECT * FROM lineitem WHERE {expr}", expect))
    for depth, expect in ((20, "routed"), (500, "too complex"), (5000, "too complex")):
        out.append((f"parentheses_{depth}", "SELECT * FROM lineitem WHERE " + "(" * depth + "l_quantity < 5"
                    + ")" * depth, expect if depth < 500 else "too complex"))
        out.append((f"not_not_{depth}", "SELECT * FROM lineitem WHERE " + "NOT (" * depth + "l_quantity < 5"
                    + ")" * depth, expect))
        out.append((f"nested_functions_{depth}", "SELECT * FROM lineitem WHERE " + "abs(" * depth + "l_quantity"
                    + ")" * depth + " < 5", expect))
    for depth, expect in ((5, "routed"), (40, "too complex")):
        sub = "SELECT o_orderkey FROM orders WHERE o_totalprice > 1000"
        for _ in range(depth):
            sub = f"SELECT l_orderkey FROM lineitem WHERE l_orderkey IN ({sub})"
        out.append((f"nested_subqueries_{depth}", sub, expect))
    # long flat chains: one level of nesting however long
    for n in (100, 900):
        chain = " OR ".join(f"l_quantity = {i}" for i in range(n))
        out.append((f"or_chain_{n}", f"SELECT * FROM lineitem WHERE {chain}", "routed"))
        chain = " AND ".join(f"l_quantity <> {i}" for i in range(n))
        out.append((f"and_chain_{n}", f"SELECT * FROM lineitem WHERE {chain}", "routed"))
    return out


def _megabyte_statements() -> list[tuple[str, str, str]]:
    pad = "x" * 20
    or_terms = " OR ".join(f"l_comment = '{i:07d}{pad}'" for i in range(MB // 45))
    in_list = ", ".join(f"'{i:07d}{pad * 4}'" for i in range(MB // 92))
    return [
        ("mb_or_chain", f"SELECT * FROM lineitem WHERE {or_terms}", "too complex"),  # ~22,000 column references
        ("mb_in_list", f"SELECT * FROM lineitem WHERE l_comment IN ({in_list})", "routed"),
        ("mb_comment", "SELECT * FROM orders /* " + "y" * MB + " */ WHERE o_totalprice > 1", "routed"),
        ("mb_string_literal", "SELECT * FROM orders WHERE o_comment = '" + "z" * MB + "'", "routed"),
        ("mb_whitespace", " " * MB, "empty"),
        ("mb_garbage_words", "SELECT * FROM orders WHERE " + "blah " * (MB // 5), "parse error"),
        ("mb_select_list", "SELECT " + ", ".join(["o_orderkey"] * (MB // 12)) + " FROM orders", "too complex"),
    ]


def _binary_garbage() -> list[tuple[str, str, str]]:
    rng = random.Random(20261125)
    out = []
    for i in range(12):
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(16, 400)))
        out.append((f"random_bytes_{i}", "\x01" + raw.decode("latin-1"), "parse error"))  # \x01: never SQL
    out.append(("png_header", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR".decode("latin-1"), "parse error"))
    out.append(("gzip_header", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03".decode("latin-1"), "parse error"))
    out.append(("utf16_select", "SELECT 1".encode("utf-16").decode("latin-1"), "parse error"))
    out.append(("bom_select", "\ufeffSELECT * FROM orders", "parse error"))
    out.append(("nul_bytes", "\x00" * 64, "parse error"))
    out.append(("lone_surrogate", "SELECT * FROM orders WHERE o_comment = '\udc80'", "routed"))
    out.append(("garbage_after_query", "SELECT * FROM orders WHERE o_totalprice > 1 \x07\x08\x1b[31m",
                "parse error"))
    return out


def corpus() -> list[tuple[str, str, str]]:
    """(name, expected outcome, SQL) of every statement, in a fixed order."""
    out: list[tuple[str, str, str]] = []
    out += [(f"malformed_{n}", "parse error", sql) for n, sql in MALFORMED]
    out += [(f"dialect_{n}", "parse error", sql) for n, sql in OTHER_DIALECTS]
    out += [(f"ddl_dml_{n}", "not a query", sql) for n, sql in DDL_DML]
    out += [(f"unknown_{n}", "unknown column", sql) for n, sql in UNKNOWN_COLUMNS]
    out += [(f"empty_{n}", "empty", sql) for n, sql in EMPTY]
    for group in (UNICODE_AND_QUOTED, COMMENTS_AND_HINTS, GOOD, LENIENT, _unknown_tables(), _in_lists(),
                  _boolean_blowups(), _megabyte_statements(), _binary_garbage()):
        out += [(name, expect, sql) for name, sql, expect in group]
    names = [name for name, _, _ in out]
    assert len(set(names)) == len(names), "statement names must be unique"
    return out


def write_sql(path: Path, statements) -> int:
    """The statements as one SQL file (a header comment each); returns how many."""
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        for name, expect, sql in statements:
            f.write(f"-- {name}: expect {expect}\n{sql};\n")
    return len(statements)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write every statement here (about 6 MB)")
    args = parser.parse_args()
    statements = corpus()
    if args.out is None:
        statements = [s for s in statements if len(s[2]) <= SMALL]
    path = args.out or Path(__file__).with_name("corpus.sql")
    print(f"wrote {write_sql(path, statements)} statements to {path}")


if __name__ == "__main__":
    main()
