"""Random change batches on a small star schema laid out by mto (hypothesis):
whatever is inserted, deleted or updated, in the dimension or the fact table,
every query returns through the router what it returns on the changed raw
tables, and no unchanged fact row moves to another leaf of the tree."""

from __future__ import annotations

import datetime as dt
import itertools

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout_core.base.schema import schema_from_dict
from layout_core.catalog import Catalog
from layout_core.flows.changes.apply import apply_changes_in_process
from layout_core.flows.nightly import steps
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import RoutingIndex, route_query

pytestmark = pytest.mark.slow

SCHEMA = schema_from_dict({"name": "shop", "tables": {
    "product": {"columns": {"pr_id": "bigint", "pr_category": "string"}, "primary_key": ["pr_id"]},
    "sales": {"columns": {"sa_id": "bigint", "sa_product": "bigint", "sa_day": "date", "sa_qty": "int"},
              "primary_key": ["sa_id"],
              "foreign_keys": [{"columns": ["sa_product"], "references": "product", "ref_columns": ["pr_id"]}]},
}})
CATEGORIES = ["books", "games", "music", "tools"]
LOG = [f"SELECT sum(sa_qty) FROM sales JOIN product ON sa_product = pr_id WHERE pr_category = '{c}'"
       for c in CATEGORIES[:3]] + ["SELECT count(*) FROM sales WHERE sa_qty > 8"]
QUERIES = LOG + [
    "SELECT sum(sa_qty) FROM sales JOIN product ON sa_product = pr_id WHERE pr_category = 'tools'",
    "SELECT pr_category, count(*) FROM sales JOIN product ON sa_product = pr_id "
    "WHERE pr_category IN ('books', 'music') AND sa_qty < 5 GROUP BY pr_category",
    "SELECT count(*) FROM sales LEFT JOIN product ON sa_product = pr_id WHERE pr_category IS NULL",
    "SELECT count(*) FROM product WHERE pr_category <> 'games'",
]


def base_tables() -> dict[str, pd.DataFrame]:
    product = pd.DataFrame({"pr_id": range(1, 41), "pr_category": [CATEGORIES[i % 4] for i in range(40)]})
    sales = pd.DataFrame({"sa_id": range(1, 801), "sa_product": [(i * 7) % 40 + 1 for i in range(800)],
                          "sa_day": [dt.date(2026, 3, 1) + dt.timedelta(days=i % 28) for i in range(800)],
                          "sa_qty": [i % 11 for i in range(800)]})  # int64: ingest casts to the schema's int
    return {"product": product, "sales": sales}


# A batch: (table, inserted rows, deleted keys) in pandas; updates are both.
product_batch = st.fixed_dictionaries({
    "new": st.lists(st.sampled_from(CATEGORIES), max_size=4),
    "deleted": st.sets(st.integers(1, 45), max_size=3),  # 41..45 do not exist
    "updated": st.dictionaries(st.integers(1, 40), st.sampled_from(CATEGORIES), max_size=2),
})
sales_batch = st.fixed_dictionaries({
    "new": st.lists(st.tuples(st.integers(1, 48), st.integers(0, 12)), max_size=30),  # 41..48: no product
    "deleted": st.sets(st.integers(1, 820), max_size=20),
})


@pytest.fixture(scope="module")
def log_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("log") / "queries.sql"
    path.write_text(";\n".join(LOG) + ";\n")
    return path


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(batches=st.lists(st.one_of(st.tuples(st.just("product"), product_batch),
                                  st.tuples(st.just("sales"), sales_batch)), min_size=1, max_size=3))
def test_random_batches_never_change_an_answer_or_move_an_unchanged_row(spark, tmp_path_factory, log_file,
                                                                        batches):
    home = tmp_path_factory.mktemp("star")
    raw = base_tables()
    url = f"sqlite:///{home / 'catalog.db'}"
    for table, frame in raw.items():
        frame.to_parquet(home / f"{table}.parquet")
    with Catalog(url) as catalog:
        for table, rows in (("product", 10), ("sales", 100)):
            steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(home / "wh", table, "", "night"),
                                 str(home / f"{table}.parquet"), "mto", {"block_rows": rows}, str(log_file))
    before = leaves_of_rows(spark, url)
    touched: set[int] = set()
    ids = itertools.count(10_000)
    for n, (table, batch) in enumerate(batches):
        inserted, deleted = to_frames(table, batch, ids)
        if table == "sales":
            touched |= set(deleted["sa_id"]) | set(inserted["sa_id"])
        folder = home / f"batch{n}"
        folder.mkdir()
        write_parquet(inserted, folder / "inserted.parquet")
        write_parquet(deleted, folder / "deleted.parquet")
        with Catalog(url) as catalog:
            apply_changes_in_process(spark, catalog, SCHEMA, steps.RunPaths(home / "wh", table, "", f"batch{n}"),
                                     str(folder / "inserted.parquet"), str(folder / "deleted.parquet"))
        key = SCHEMA.table(table).primary_key[0]
        raw[table] = pd.concat([raw[table][~raw[table][key].isin(deleted[key])], inserted], ignore_index=True)
        assert_same_answers(spark, url, raw)
    after = leaves_of_rows(spark, url)
    unchanged = {k: leaf for k, leaf in before.items() if k not in touched}
    assert {k: after[k] for k in unchanged} == unchanged


def to_frames(table: str, batch: dict, ids) -> tuple[pd.DataFrame, pd.DataFrame]:
    if table == "product":
        new = [(next(ids), c) for c in batch["new"]] + list(batch["updated"].items())
        inserted = pd.DataFrame(new, columns=["pr_id", "pr_category"]).astype({"pr_id": "int64"})
        gone = sorted(set(batch["deleted"]) | set(batch["updated"]))  # absent keys: counted, ignored
        return inserted, pd.DataFrame({"pr_id": pd.Series(gone, dtype="int64")})
    inserted = pd.DataFrame([(next(ids), product, dt.date(2026, 3, 1 + qty), qty) for product, qty in batch["new"]],
                            columns=["sa_id", "sa_product", "sa_day", "sa_qty"])
    inserted = inserted.astype({"sa_id": "int64", "sa_product": "int64", "sa_qty": "int32"})
    return inserted, pd.DataFrame({"sa_id": pd.Series(sorted(batch["deleted"]), dtype="int64")})


ARROW_TYPES = {"bigint": "int64", "int": "int32", "date": "date32", "string": "string"}


def write_parquet(frame: pd.DataFrame, path) -> None:
    """With the schema's types also when empty (pandas alone would write an empty date column as NULL type)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kinds = {name: kind for t in SCHEMA.tables.values() for name, kind in t.columns}
    schema = pa.schema([(c, getattr(pa, ARROW_TYPES[kinds[c]])()) for c in frame.columns])
    pq.write_table(pa.Table.from_pandas(frame, schema=schema, preserve_index=False), path)


def assert_same_answers(spark, url: str, raw: dict) -> None:
    from layout_core.spark.compare import same_rows
    from layout_core.spark.views import register_layout_views

    for table, frame in raw.items():
        spark.createDataFrame(frame, _ddl(table)).createOrReplaceTempView(table)
    expected = {sql: spark.sql(sql).collect() for sql in QUERIES}
    with Catalog(url) as catalog:
        snapshot = catalog.snapshot()
    index = RoutingIndex.from_snapshot(snapshot)
    register_layout_views(spark, snapshot, [SCHEMA.table(t) for t in raw])
    for sql in QUERIES:
        rewritten = rewrite_sql(route_query(sql, index, SCHEMA), index)
        equal, why = same_rows(expected[sql], spark.sql(rewritten).collect())
        assert equal, f"{why}\n{rewritten}"


def _ddl(table: str) -> str:
    return ", ".join(f"{name} {kind}" for name, kind in SCHEMA.table(table).columns)


def leaves_of_rows(spark, url: str) -> dict[int, tuple]:
    """sa_id -> the leaves (lineage) of the block that holds it."""
    from layout_core.spark.views import layout_frame

    with Catalog(url) as catalog:
        snapshot = catalog.snapshot()
    (layout,) = snapshot.layouts_of("sales")
    lineage = {b.block_id: b.leaves for b in layout.blocks}
    rows = layout_frame(spark, snapshot, SCHEMA.table("sales")).select("sa_id", "block_id").collect()
    return {int(r["sa_id"]): lineage[int(r["block_id"])] for r in rows}
