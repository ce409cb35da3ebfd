"""Every TPC-H table laid out by the nightly steps, for the Spark golden tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.flows.nightly import steps
from layout_core.skipping.router import RoutingIndex
from layout_core.workload.tpch import generate, write_sql_file
from tests.conftest import TPCH_TABLES

SCHEMA = load_schema("tpch")
# parents before children; blocks of about 1/15 of each table at SF 0.01 (the shared layout's sizes)
BLOCK_ROWS = {"region": 2, "nation": 5, "supplier": 10, "part": 150, "customer": 100,
              "partsupp": 600, "orders": 1000, "lineitem": 4000}


def lay_out_tpch(spark, tpch: Path, home: Path, optimizer: str, block_rows: dict[str, int]) -> dict:
    """Lay out the tables of `block_rows` in its order (parents first) with `optimizer`,
    trained on 2 instances of every template; the routing index, the raw tables,
    the tables read from their block folders, and the catalog snapshot."""
    log = home / "train.sql"
    write_sql_file(generate(2, seed=1, scale_factor=0.01), log)
    with Catalog(f"sqlite:///{home / 'catalog.db'}") as catalog:
        for table, rows in block_rows.items():
            steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(home / "wh", table, "", "night-1"),
                                 str(tpch / f"{table}.parquet"), optimizer, {"block_rows": rows}, str(log))
    return laid_out_tpch(spark, tpch, home)


def laid_out_tpch(spark, tpch: Path, home: Path) -> dict:
    """What `lay_out_tpch` returns, for layouts already in `home`'s catalog."""
    from layout_core.spark.views import layout_frame

    with Catalog(f"sqlite:///{home / 'catalog.db'}") as catalog:
        snapshot = catalog.snapshot()
    raw = {t: spark.read.parquet(str(tpch / f"{t}.parquet")) for t in TPCH_TABLES}
    blocks = {t: layout_frame(spark, snapshot, SCHEMA.table(t)) for t in TPCH_TABLES}
    return {"index": RoutingIndex.from_snapshot(snapshot), "raw": raw, "blocks": blocks, "snapshot": snapshot}


def shared_home(tmp_path_factory, name: str, make) -> Path:
    """A folder made once per test run by `make(folder)`, for modules that only read it: the
    pytest-xdist workers of a run share it (the first makes it while holding a lock, the
    others then find it made)."""
    import fcntl
    import os

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    home = root / f"shared_{name}"
    with open(root / f"shared_{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = home / "made"
        if not done.exists():
            shutil.rmtree(home, ignore_errors=True)  # a half-made folder of a crashed worker
            home.mkdir()
            make(home)
            done.write_text("")
    return home


def copied_home(shared: Path, home: Path) -> Path:
    """`shared`'s warehouse and SQLite catalog (`catalog.db`) copied to `home`, for a module
    that changes its layout: copying takes a second where laying tables out again takes
    minutes. The copy's catalog names the copy's folders (every path in it rewritten), so
    nothing the module writes or replaces reaches the shared folder that other modules read."""
    import sqlite3

    shutil.copytree(shared, home, dirs_exist_ok=True)
    with sqlite3.connect(home / "catalog.db") as db:
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            for column in db.execute(f"PRAGMA table_info({table})").fetchall():
                if column[2].upper() == "TEXT":
                    db.execute(f"UPDATE {table} SET {column[1]} = replace({column[1]}, ?, ?)",
                               (str(shared), str(home)))
    return home


def shared_tpch_layout(spark, tpch: Path, tmp_path_factory, optimizer: str, block_rows: dict[str, int]
                       ) -> tuple[dict, Path]:
    """`lay_out_tpch` once per test run (`shared_home`), for modules that only read the
    layout. Returns (what lay_out_tpch returns, home)."""
    import hashlib

    key = hashlib.sha1(repr((optimizer, sorted(block_rows.items()))).encode()).hexdigest()[:12]
    home = shared_home(tmp_path_factory, f"tpch_{optimizer}_{key}",
                       lambda folder: lay_out_tpch(spark, tpch, folder, optimizer, block_rows))
    return laid_out_tpch(spark, tpch, home), home


def copied_tpch_layout(spark, tpch: Path, tmp_path_factory, optimizer: str, block_rows: dict[str, int],
                       home: Path) -> dict:
    """`shared_tpch_layout` copied to `home` (`copied_home`), for a module that changes it."""
    _, shared = shared_tpch_layout(spark, tpch, tmp_path_factory, optimizer, block_rows)
    return laid_out_tpch(spark, tpch, copied_home(shared, home))


def use(frames: dict) -> None:
    """Make `frames` the tables Spark SQL reads by name."""
    for t, frame in frames.items():
        frame.createOrReplaceTempView(t)


def lineitem_1995_conf(tpch: Path, folder: Path, optimizer: str = "qdtree", instances: int = 4) -> dict:
    """layout_nightly's params for lineitem's 1995 rows, trained on a small log written to `folder`."""
    log = folder / "queries.sql"
    write_sql_file(generate(instances, seed=2, templates=[1, 6, 12, 14, 19]), log)
    return {
        "table": "lineitem", "partition": "1995", "source": str(tpch / "lineitem.parquet"),
        "date_column": "l_shipdate", "start": "1995-01-01", "end": "1996-01-01",
        "optimizer": optimizer, "block_rows": 1000, "query_log": str(log), "settings": {},
    }


def lineitem_trained_on_1_to_11(spark, tpch: Path, tmp_path_factory, home: Path) -> str:
    """lineitem (`tpch`'s scale) laid out by qdtree in 1,000-row blocks for 8 instances of each
    of templates 1-11, by the nightly steps, warehouse `home`/wh; returns the catalog URL.
    Laid out once per test run and copied to `home` (`shared_home`, `copied_home`)."""

    def lay_out(folder: Path) -> None:
        log = folder / "train.sql"
        write_sql_file(generate(8, seed=1, templates=range(1, 12), scale_factor=0.01), log)
        with Catalog(f"sqlite:///{folder / 'catalog.db'}") as catalog:
            steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(folder / "wh", "lineitem", "", "night-1"),
                                 str(tpch / "lineitem.parquet"), "qdtree", {"block_rows": 1000}, str(log))

    copied_home(shared_home(tmp_path_factory, "lineitem_1_to_11", lay_out), home)
    return f"sqlite:///{home / 'catalog.db'}"


def query_history(templates, ts, seed: int = 5, per_template: int = 8) -> list:
    """Query history entries (source "import") of TPC-H instances, all at time `ts`."""
    from layout_core.catalog import QueryRecord
    from layout_core.workload.history import template_fingerprint

    return [QueryRecord(ts, q.sql, template_fingerprint(q.sql), "import")
            for q in generate(per_template, seed=seed, templates=templates, scale_factor=0.01)]


def write_landing_day(tpch: Path, landing: Path, day: str, year: str, drop_every: int = 0) -> int:
    """lineitem rows shipped in `year` as the landing folder dt=<day>; returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = pq.read_table(tpch / "lineitem.parquet").to_pandas()
    frame = frame[frame["l_shipdate"].astype(str).str[:4] == year].reset_index(drop=True)
    if drop_every:
        frame = frame[frame.index % drop_every != 0]
    folder = landing / f"dt={day}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), folder / "part-0.parquet")
    return len(frame)
