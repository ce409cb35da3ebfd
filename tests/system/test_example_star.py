"""The README's "Lay out your own tables", run as a new user runs it: a three-table
star schema of one's own, `layout dag-test layout_star_nightly`, then routing; and its
"Query your layout from Spark" snippet, run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.helpers.paths import PROJECT

# make test runs the star DAG's steps (test_nightly_dag.py) and DAGs under `airflow dags test`
# (test_nightly_schedule.py, test_changes_dag.py); the README's example end to end: make test-full.
pytestmark = [pytest.mark.slow, pytest.mark.extended]
EXAMPLE = PROJECT / "examples" / "star"


def test_a_star_schema_of_ones_own_is_laid_out_and_routed_and_takes_a_change_batch(tmp_path):
    # the README's folders: $PWD holds examples/ (here a link to the project's) and data/shop
    work = tmp_path / "work"
    data = work / "data" / "shop"
    work.mkdir()
    (work / "examples").symlink_to(PROJECT / "examples")
    subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), str(data)], check=True, capture_output=True)
    env = {**os.environ, "LAYOUT_SCHEMA": str(EXAMPLE / "schema.yaml"), "LAYOUT_STAR_TABLES": "store,product,sales",
           "LAYOUT_CATALOG_URL": f"sqlite:///{data / 'catalog.db'}", "LAYOUT_WAREHOUSE": str(data / "warehouse"),
           "SPARK_LOCAL_IP": "127.0.0.1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    conf = {"source_dir": str(data), "partition": "2026-03", "date_column": "sa_day", "start": "2026-03-01",
            "end": "2026-04-01", "block_rows": 2000, "dimension_block_rows": 200,
            "query_log": str(EXAMPLE / "queries.sql")}

    def layout(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "layout_core.cli", *args], env=env, cwd=work,
                              capture_output=True, text=True, timeout=1200)

    done = layout("dag-test", "layout_star_nightly", "--conf", json.dumps(conf),
                  "--airflow-home", str(tmp_path / "airflow"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    shown = layout("catalog", "show").stdout
    assert shown.count(" active ") == 3 and "partition=2026-03 active   optimizer=mto" in shown
    # a category no logged query used: the fact table still skips through join-induced range cuts
    sql = ("SELECT count(*) FROM sales sa JOIN product pr ON sa.sa_product = pr.pr_id "
           "WHERE pr.pr_category = 'music'")
    route = json.loads(layout("route", sql, "--json").stdout)
    (sales,) = [r for r in route["refs"] if r["table"] == "sales"]
    assert 0 < len(sales["blocks"]) < sales["blocks_total"]

    # "Query your layout from Spark": the README's snippet as written, its count against the raw files
    readme = (PROJECT / "README.md").read_text()
    snippet = readme.split("## Query your layout from Spark", 1)[1].split("```", 2)[1]
    ran = subprocess.run([sys.executable, "-c", snippet], env=env, cwd=work, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    shown = int(re.findall(r"^\|\s*(\d+)\|$", ran.stdout, re.MULTILINE)[0])
    products = pd.read_parquet(data / "product.parquet")
    music = set(products.loc[products["pr_category"] == "music", "pr_id"])
    sales = pd.read_parquet(data / "sales.parquet")
    march = (pd.to_datetime(sales["sa_day"]) >= "2026-03-01") & (pd.to_datetime(sales["sa_day"]) < "2026-04-01")
    assert shown == int((sales["sa_product"].isin(music) & march).sum()) > 0  # the one partition laid out

    # docs/change-batches.md: its commands as written, in the README's folder
    from layout_core.catalog import Catalog
    from layout_core.skipping.router import RoutingIndex

    with Catalog(env["LAYOUT_CATALOG_URL"]) as catalog:
        before = {t: catalog.active_layout(t, p) for t, p in (("product", ""), ("sales", "2026-03"))}
    page = (PROJECT / "docs" / "change-batches.md").read_text()
    for block in re.findall(r"^```\n(.*?)^```", page, re.MULTILINE | re.DOTALL):
        ran = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, cwd=work, capture_output=True,
                             text=True, timeout=1200)
        assert ran.returncode == 0, block + ran.stdout[-2000:] + ran.stderr[-3000:]
    with Catalog(env["LAYOUT_CATALOG_URL"]) as catalog:
        after = {t: catalog.active_layout(t, p) for t, p in (("product", ""), ("sales", "2026-03"))}
        index = RoutingIndex.from_snapshot(catalog.snapshot())
    rows = {t: (sum(b.row_count for b in before[t].blocks), sum(b.row_count for b in after[t].blocks)) for t in after}
    assert rows["product"] == (2000, 2050) and rows["sales"][1] == rows["sales"][0] + 100
    assert all(after[t].version.version_id != before[t].version.version_id for t in after)
    assert index.stale_cuts == 0  # products first: every late sale found its parent row
    route = json.loads(layout("route", sql, "--json").stdout)
    (sales,) = [r for r in route["refs"] if r["table"] == "sales"]
    assert 0 < len(sales["blocks"]) < sales["blocks_total"]  # the repaired cuts still skip
