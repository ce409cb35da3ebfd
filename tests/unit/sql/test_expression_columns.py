"""Arithmetic over one table's columns compared with a constant is an atom on a
virtual column (`Column.reads`): cuts, implication and disjointness work on it
as on a stored column, and it is never mistaken for one of the columns it reads."""

from decimal import Decimal

from layout_core.base.schema import load_schema
from layout_core.predicates import TRUE, Between, Column, Compare, InList, Opaque, atoms, disjoint, implies, to_sql
from layout_core.predicates.reasoning import ColumnStats
from layout_core.predicates.serde import from_json, to_json
from layout_core.skipping.zonemaps import ZoneMaps, might_match_blocks
from layout_core.sql.analysis import analyze, candidate_cuts

SCHEMA = load_schema("tpch")
REVENUE = Column("`l_extendedprice` * (1 - `l_discount`)", "decimal", ("l_discount", "l_extendedprice"))


def _filter(sql: str, alias: str = "lineitem"):
    a = analyze(sql, SCHEMA)
    (ref,) = [r for r in a.refs if (r.alias or r.table) == alias]
    return a.filter(ref.key)


def test_revenue_above_a_constant_is_a_range_on_the_expression():
    p = _filter("SELECT * FROM lineitem WHERE l_extendedprice * (1 - l_discount) > 1000")
    assert p == Compare(REVENUE, ">", Decimal(1000))
    assert p.columns() == {"l_discount", "l_extendedprice"}  # what featurize must read
    assert to_sql(p) == "(`l_extendedprice` * (1 - `l_discount`)) > 1000"


def test_one_expression_is_one_column_however_its_names_are_spelled():
    assert _filter("SELECT * FROM lineitem x WHERE X.L_EXTENDEDPRICE * (1 - x.l_Discount) > 1000", "x") == \
        Compare(REVENUE, ">", Decimal(1000))


def test_the_expression_may_stand_on_either_side_and_in_between_or_in():
    assert _filter("SELECT * FROM lineitem WHERE 1000 < l_extendedprice * (1 - l_discount)") == \
        Compare(REVENUE, ">", Decimal(1000))
    assert _filter("SELECT * FROM lineitem WHERE l_extendedprice * (1 - l_discount) BETWEEN 10 AND 20") == \
        Between(REVENUE, Decimal(10), Decimal(20))
    assert _filter("SELECT * FROM lineitem WHERE l_extendedprice * (1 - l_discount) IN (5, 7.5)") == \
        InList(REVENUE, frozenset({Decimal(5), Decimal("7.5")}))


def test_division_is_written_try_divide_and_integer_division_gives_a_double():
    # Spark's `/` of two integers is a double; try_divide's NULL for a zero divisor is
    # what legacy mode gives and what ANSI mode would have failed the query on
    p = _filter("SELECT * FROM lineitem WHERE l_linenumber / l_partkey > 0.5")
    assert p == Compare(Column("TRY_DIVIDE(`l_linenumber`, `l_partkey`)", "float", ("l_linenumber", "l_partkey")),
                        ">", 0.5)


def test_what_may_overflow_or_is_not_arithmetic_stays_opaque():
    for where in ("l_linenumber + l_partkey > 5",       # integer addition: legacy mode wraps around
                  "-l_linenumber > 5",                  # an integer's negation too
                  "l_tax * 2.0 < l_discount",           # a column on the other side
                  "length(l_comment) > 5",              # a function the model does not know
                  "l_extendedprice * (1 - l_discount) > l_tax * 2"):
        (atom,) = atoms(_filter(f"SELECT * FROM lineitem WHERE {where}"))
        assert isinstance(atom, Opaque), where


def test_an_expression_over_two_tables_is_not_a_column_of_either():
    sql = ("SELECT * FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
           "WHERE l_extendedprice - o_totalprice > 10.0")
    assert _filter(sql) == TRUE
    assert _filter(sql, "orders") == TRUE


def test_the_same_expression_on_two_references_of_a_self_join_stays_apart():
    # one atom name per reference: were they one, `> 7` and `< 5` would contradict
    sql = ("SELECT * FROM lineitem l1 JOIN lineitem l2 ON l1.l_orderkey = l2.l_orderkey "
           "WHERE l1.l_extendedprice * 2.0 < 5 AND l2.l_extendedprice * 2.0 > 7")
    doubled = Column("`l_extendedprice` * 2.0", "decimal", ("l_extendedprice",))
    assert _filter(sql, "l1") == Compare(doubled, "<", Decimal(5))
    assert _filter(sql, "l2") == Compare(doubled, ">", Decimal(7))


def test_a_union_does_not_hand_an_expression_on_its_output_to_the_branch_column():
    # were `x * 2.0 > 0.1` given to the branches as `l_tax > 0.1`, rows with
    # l_tax = 0.06 (doubled: 0.12) would be skipped
    sql = ("SELECT * FROM (SELECT l_tax AS x FROM lineitem UNION ALL SELECT l_discount AS x FROM lineitem) u "
           "WHERE x * 2.0 > 0.1")
    a = analyze(sql, SCHEMA)
    for ref in a.refs:
        assert all(not isinstance(atom, Compare) for atom in atoms(a.filter(ref.key))), a.filter(ref.key)


def test_reasoning_on_the_expression_is_reasoning_on_its_values():
    query = Between(REVENUE, Decimal(100), Decimal(200))
    assert implies(query, Compare(REVENUE, "<", Decimal(500)))
    assert disjoint(query, Compare(REVENUE, ">=", Decimal(300)))
    # a range on a column the expression reads says nothing of the expression
    price = Column("l_extendedprice", "decimal")
    assert not implies(query, Compare(price, "<", Decimal(500)))
    assert not disjoint(query, Compare(price, ">=", Decimal(300)))
    assert not disjoint(Compare(price, "<", Decimal(1)), Compare(REVENUE, ">", Decimal(1000)))


def test_expression_cuts_are_candidate_cuts_and_keep_their_inputs_through_json():
    a = analyze("SELECT * FROM lineitem WHERE l_extendedprice * (1 - l_discount) BETWEEN 10 AND 20", SCHEMA)
    simple, _ = candidate_cuts(a, a.refs[0].key, SCHEMA.key_hops())
    assert simple == [Between(REVENUE, Decimal(10), Decimal(20))]
    again = from_json(to_json(simple[0]))
    assert again == simple[0] and again.column.reads == REVENUE.reads
    # a stored column's JSON is as before: [name, kind]
    assert to_json(Compare(Column("l_tax", "decimal"), "<", Decimal(1)))["cmp"] == ["l_tax", "decimal"]


def test_zone_maps_of_the_columns_read_do_not_rule_on_the_expression():
    # both blocks hold only l_extendedprice in [1, 2]: a stored range says nothing of
    # `l_extendedprice * (1 - l_discount)`, and no statistics exist for the expression
    stats = [{"l_extendedprice": ColumnStats(Decimal(1), Decimal(2), 0, 10)}] * 2
    zm = ZoneMaps.of(stats, [10, 10])
    assert might_match_blocks(Compare(REVENUE, ">", Decimal(1000)), zm).tolist() == [True, True]
    assert might_match_blocks(Compare(Column("l_extendedprice", "decimal"), ">", Decimal(1000)), zm).tolist() \
        == [False, False]
