"""The schema file format: shipped TPC-H, user files, and clear errors."""

import json

import pytest

from layout_core.base.schema import SchemaError, kind_of, load_schema
from layout_core.predicates import Column, Hop


def test_tpch_schema_has_eight_tables_with_keys():
    schema = load_schema("tpch")
    assert sorted(schema.tables) == sorted(
        ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
    )
    assert schema.table("lineitem").primary_key == ("l_orderkey", "l_linenumber")
    assert schema.table("ORDERS").column("o_orderdate") == Column("o_orderdate", "date")
    assert schema.table("lineitem").column("l_quantity").kind == "decimal"


def test_key_hops_are_single_column_fk_to_whole_pk():
    hops = set(load_schema("tpch").key_hops())
    assert Hop("region", "r_regionkey", "nation", "n_regionkey") in hops
    assert Hop("orders", "o_orderkey", "lineitem", "l_orderkey") in hops
    assert Hop("customer", "c_custkey", "orders", "o_custkey") in hops
    # partsupp has a two-column key: the composite FK from lineitem is not a hop
    assert not any(h.parent_table == "partsupp" for h in hops)
    assert len(hops) == 9


@pytest.mark.parametrize(
    "spark_type,kind",
    [("bigint", "int"), ("decimal(15,2)", "decimal"), ("string", "string"), ("date", "date"),
     ("double", "float"), ("timestamp", "timestamp"), ("array<int>", "other")],
)
def test_kind_of(spark_type, kind):
    assert kind_of(spark_type) == kind


def test_user_json_schema(tmp_path):
    path = tmp_path / "shop.json"
    path.write_text(json.dumps({
        "name": "shop",
        "tables": {
            "stores": {"columns": {"store_id": "bigint", "city": "string"}, "primary_key": ["store_id"]},
            "sales": {"columns": {"sale_id": "bigint", "store_id": "bigint", "day": "date"},
                      "primary_key": ["sale_id"], "partition_column": "day",
                      "foreign_keys": [{"columns": ["store_id"], "references": "stores",
                                        "ref_columns": ["store_id"]}]},
        },
    }))
    schema = load_schema(path)
    assert schema.table("sales").partition_column == "day"
    assert schema.key_hops() == (Hop("stores", "store_id", "sales", "store_id"),)


@pytest.mark.parametrize(
    "text,message",
    [
        ("tables: 3", "'tables' mapping"),
        ("tables: {t: {columns: {}}}", "'columns'"),
        ("tables: {t: {columns: {a: int}, primary_key: [b]}}", "'b' is not a column"),
        ("tables: {t: {columns: {a: int}, foreign_keys: [{columns: [a], references: u, ref_columns: [x]}]}}",
         "unknown table 'u'"),
        ("tables: [", "cannot read schema"),
    ],
)
def test_bad_schema_files_give_clear_errors(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SchemaError, match=message):
        load_schema(path)


def test_missing_schema_file(tmp_path):
    with pytest.raises(SchemaError, match="no schema file"):
        load_schema(tmp_path / "nope.yaml")
