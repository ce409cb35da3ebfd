"""The Layouts pages of the Airflow plugin (layout_core.airflow.pages), against small SQLite
catalogs filled through the Catalog API, with starlette's TestClient. Airflow's own
authentication is overridden for the authenticated cases (the real api-server is in
test_airflow_deployment.py)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import re
import socket
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from layout_core.airflow.pages.app import create_app
from layout_core.airflow.pages.auth import require_run_reader, require_user
from layout_core.catalog import BlockRecord, Catalog, QueryRecord, RefRead
from layout_core.flows.nightly.steps import RunPaths
from tests.helpers.paths import PROJECT

AIRFLOW_RUN = "manual__2026-01-02T03:04:05.678+00:00"
STAGED = f"layout_nightly__{AIRFLOW_RUN}"
HOSTILE = "we\"ird'/../<script>alert(1)</script>&x"
PNG = b"\x89PNG\r\n\x1a\n"


class Clock:
    def __init__(self):
        self.now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

    def __call__(self):
        self.now += dt.timedelta(minutes=1)
        return self.now


def _blocks(ids, rows):
    return [BlockRecord(b, r, 10 * r, f"/warehouse/lineitem/block_id={b}", {}, 0, 0) for b, r in zip(ids, rows)]


def _fill(url: str) -> None:
    with Catalog(url, clock=Clock()) as catalog:
        catalog.register_table("lineitem", "/warehouse/lineitem", "dt", {"columns": {"l_orderkey": "bigint"}})
        # partition 1995: a first version, then this run's, which retires it
        first, ids = catalog.begin_version("lineitem", "1995", "fineblock", {}, "layout_nightly__scheduled__x", 2)
        catalog.set_blocks(first, _blocks(ids, [600, 400]))
        catalog.activate(first, input_fingerprint="1000:42")
        second, ids = catalog.begin_version("lineitem", "1995", "qdtree", {}, STAGED, 3)
        catalog.set_plan(second, {"expected_block_rows": [350.0, 330.0, 320.0]})
        catalog.set_blocks(second, _blocks(ids, [340, 333, 327]))
        catalog.activate(second, input_fingerprint="1000:42")
        # partition 1996: a failed version
        failed, _ = catalog.begin_version("lineitem", "1996", "qdtree", {}, "cli-run-7", 1)
        catalog.fail(failed, "verify failed: input has 5 rows")
        catalog.register_table(HOSTILE, "/warehouse/hostile")
        odd, ids = catalog.begin_version(HOSTILE, "", "<b>opt</b>", {}, "../../etc/passwd", 1)
        catalog.set_blocks(odd, _blocks(ids, [7]))
        catalog.activate(odd, input_fingerprint="7:1")


def _write_metrics(warehouse: Path) -> Path:
    paths = RunPaths(warehouse, "lineitem", "1995", STAGED)
    paths.staging.mkdir(parents=True)
    metrics = {
        "ingest": {"rows": 1000, "seconds": 3.5},
        "featurize": {"queries": 6, "parsed": 6, "failed": 0, "queries_on_table": 9, "optimizer": "qdtree",
                      "cuts": 4, "join_induced": 0, "seconds": 2.25},
        "reduce": {"rows": 1000, "sampled_rows": 1000, "distinct_vectors": 7, "seconds": 1.5},
        "optimize": {"optimizer": "qdtree", "blocks": 3, "rows": 1000, "sampled_rows": 1000, "seconds": 0.01},
        "write_blocks": {"version": 2, "blocks": 3, "bytes": 10000, "seconds": 4.0},
        "verify": {"rows": 1000, "seconds": 1.75},
        "update_catalog": {"version": 2, "blocks": 3, "rows": 1000, "expected_blocks": 3, "range_sets": 16,
                           "block_rows_error_max": 0.0286, "seconds": 2.0},
    }
    paths.file("metrics.json").write_text(json.dumps(metrics))
    return paths.staging


@pytest.fixture
def catalog_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    _fill(url)
    return url


@pytest.fixture
def warehouse(tmp_path) -> Path:
    folder = tmp_path / "warehouse"
    _write_metrics(folder)
    return folder


def _client(url: str, warehouse: Path, authenticated: bool = True) -> TestClient:
    app = create_app(url, warehouse)
    if authenticated:
        app.dependency_overrides[require_user] = lambda: "tester"
        app.dependency_overrides[require_run_reader] = lambda: "tester"
    return TestClient(app)


def _text(page: str) -> str:
    """The visible text of a page (no style sheet, no tags)."""
    page = re.sub(r"<style>.*?</style>", "", page, flags=re.S)
    return re.sub(r"<[^>]+>", " ", page)


def _run_url(run_id: str = AIRFLOW_RUN, path: str = "/run", **extra) -> str:
    from urllib.parse import urlencode

    return f"{path}?{urlencode({'dag_id': 'layout_nightly', 'run_id': run_id, **extra})}"


def test_the_tables_page_shows_active_layouts_and_versions_with_their_lineage(catalog_url, warehouse, tmp_path):
    client = _client(catalog_url, warehouse)
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = response.text
    text = _text(page)
    assert "lineitem" in text and "partitioned by" in text
    # the active version of 1995: version 2, qdtree, 3 blocks and 1,000 rows, its fingerprint
    active = re.search(r"<tr><td>1995</td><td class=\"n\">2</td><td>qdtree</td>.*?</tr>", page).group(0)
    assert "<td class=\"n\">3</td>" in active and "1,000" in active and "1000:42" in active
    assert "2026-01-01" in active  # when it was laid out
    # the versions: the retired first one, this run's (parent 1), the failed one with its reason
    assert re.search(r"<td class=\"n\">2</td><td>1995</td><td><span class=\"state-active\">active</span></td>"
                     r"<td>qdtree</td><td><a [^>]*>.*?</a></td><td class=\"n\">1</td>", page)
    assert "state-retired" in page and "state-failed" in page and "verify failed: input has 5 rows" in page
    # a DAG run's run id links to its run page; a CLI run id is only shown
    assert 'href="/run?dag_id=layout_nightly&amp;run_id=manual__2026-01-02T03%3A04%3A05.678%2B00%3A00"' in page
    assert "<code>cli-run-7</code>" in page
    # a plot per table, served by the app
    assert '<img class="plot"' in page and 'src="/plot/table.png?name=lineitem"' in page
    assert response.headers["content-security-policy"].startswith("default-src 'none'")
    # no connection string, no local path of the catalog
    assert "sqlite" not in page and str(tmp_path) not in page


def test_a_table_plot_is_a_png(catalog_url, warehouse):
    client = _client(catalog_url, warehouse)
    response = client.get("/plot/table.png", params={"name": "lineitem"})
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    assert response.content.startswith(PNG) and len(response.content) > 5000
    missing = client.get("/plot/table.png", params={"name": "nope"})
    assert missing.status_code == 404 and "No such table" in missing.text


def test_the_run_page_shows_each_steps_numbers_from_metrics_json(catalog_url, warehouse):
    client = _client(catalog_url, warehouse)
    response = client.get(_run_url())
    assert response.status_code == 200
    page, text = response.text, _text(response.text)
    for step in ("ingest", "featurize", "reduce", "optimize", "write_blocks", "verify", "update_catalog"):
        assert f"<td>{step}</td>" in page, step
    assert "Catalog version 2" in text and "replaced version 1" in text
    assert "in (ingest): 1,000" in text and "out (blocks in the catalog, update_catalog): 1,000" in text
    assert "passed" in text and "the 1,000 rows ingested" in text
    assert "<td class=\"n\">0.029</td>" in page or "0.0286" in page  # block_rows_error_max
    assert "expected rows 320–350, real rows 327–340 over 3 blocks" in text
    assert "distinct_vectors=7" in page and "<td class=\"n\">3.5</td>" in page
    for plot in ("/plot/run-seconds.png", "/plot/run-blocks.png"):
        src = _run_url(path=plot, section=0).replace("&", "&amp;")
        assert f'src="{src}"' in page, plot
        image = client.get(_run_url(path=plot, section=0))
        assert image.status_code == 200 and image.content.startswith(PNG) and len(image.content) > 5000
    assert client.get(_run_url(path="/plot/run-seconds.png", section=1)).status_code == 404


def test_the_run_page_shows_the_number_of_trees_pando_kept(catalog_url, warehouse):
    metrics_file = RunPaths(warehouse, "lineitem", "1995", STAGED).file("metrics.json")
    metrics = json.loads(metrics_file.read_text())
    metrics["optimize"]["choices"] = {"trees": 1, "trees_evaluated_on": "held-out queries, each half with its own cuts",
                                      "trees_evaluated": [[1, 0.339], [2, 0.374], [3, None], [4, "<b>"]]}
    metrics_file.write_text(json.dumps(metrics))
    page = _client(catalog_url, warehouse).get(_run_url()).text
    text = " ".join(_text(page).split())
    assert "Number of trees (pando, trees=auto)" in text and "Kept k = 1" in text
    assert "measured on held-out queries, each half with its own cuts" in text
    assert "2 0.374" in text and "3 skipped: over the k-tuple bound with leaves of one block" in text
    assert "<b>" not in page.split("Number of trees")[1]  # a hostile figure is text
    # a plan without trees=auto shows nothing of the kind
    del metrics["optimize"]["choices"]
    metrics_file.write_text(json.dumps(metrics))
    assert "Number of trees" not in _client(catalog_url, warehouse).get(_run_url()).text


def test_a_run_without_a_staging_folder_and_hostile_run_ids(catalog_url, warehouse, tmp_path):
    client = _client(catalog_url, warehouse)
    (tmp_path / "secret" / "x").mkdir(parents=True)
    (tmp_path / "secret" / "x" / "metrics.json").write_text('{"ingest": {"rows": 31337}}')
    for run_id in ("scheduled__2026-01-01", "../../../secret/x", "..", "../..", "*", "a/../../b",
                   '"><script>alert(1)</script>'):
        response = client.get(_run_url(run_id))
        assert response.status_code == 404, run_id
        assert "No layout staging folder for this run" in response.text
        assert "31337" not in response.text and "<script>" not in response.text
    assert "&lt;script&gt;" in client.get(_run_url('"><script>alert(1)</script>')).text
    # a star run: one section per table; the one without a catalog version says so
    other = RunPaths(warehouse, "orders", "", STAGED)
    other.staging.mkdir(parents=True)
    other.file("metrics.json").write_text(json.dumps({"ingest": {"rows": 5, "seconds": 1.0}}))
    page = client.get(_run_url()).text
    assert "partition <code>(unpartitioned)</code>" in page and "No catalog version for this run yet" in page
    assert "Steps without numbers yet: featurize, reduce" in page and "not verified" in page


def _read(table, blocks_read, blocks_total, rows_read, rows_total, ref=0):
    from pyroaring import BitMap64

    return RefRead(ref, table, blocks_read, blocks_total, rows_read, rows_total, (2,),
                   BitMap64(range(blocks_read)).serialize())


LINEITEM_TEMPLATE = "1111aaaa2222bbbb"
JOIN_TEMPLATE = "3333cccc4444dddd"
NEWEST_SQL = "SELECT * FROM lineitem WHERE l_quantity < 5 AND l_comment <> '<script>x</script>'"


def _record_history(url: str, now: dt.datetime) -> None:
    """Four queries of the last 7 days and one older: worked out by hand in the tests below."""
    def ago(**kw) -> dt.datetime:
        return now - dt.timedelta(**kw)

    queries = [
        # 10 days ago: outside a 7-day window
        QueryRecord(ago(days=10), "SELECT * FROM lineitem WHERE l_quantity < 40", LINEITEM_TEMPLATE, "route",
                    True, (_read("lineitem", 7, 8, 900, 1000),)),
        QueryRecord(ago(days=2), "SELECT * FROM lineitem WHERE l_quantity < 9", LINEITEM_TEMPLATE, "rewrite",
                    True, (_read("lineitem", 2, 4, 300, 1000),)),
        # a join: lineitem had no active layout (read in full), orders 1 of 5 blocks
        QueryRecord(ago(hours=3), "SELECT count(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey",
                    JOIN_TEMPLATE, "run", True,
                    (RefRead(0, "lineitem", 0, 0, 0, 0, (), None), _read("orders", 1, 5, 20, 500, ref=1))),
        QueryRecord(ago(hours=2), "SELECT 1", "5555eeee6666ffff", "import", True, ()),
        QueryRecord(ago(hours=1), NEWEST_SQL, LINEITEM_TEMPLATE, "route", True,
                    (_read("lineitem", 1, 4, 100, 1000),)),
    ]
    with Catalog(url) as catalog:
        catalog.record_queries(queries)


def test_the_skipping_page_without_history_says_no_queries_were_routed(catalog_url, warehouse, tmp_path):
    client = _client(catalog_url, warehouse)
    response = client.get("/skipping")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    text = " ".join(_text(response.text).split())
    assert "No queries were routed in the last 7 days" in text
    assert "layout route" in text and "layout rewrite" in text and "layout run-workload" in text
    assert "%" not in text and "blocks" not in text and "plot/skipping.png" not in response.text
    assert "No queries were routed in the last 30 days" in " ".join(_text(client.get("/skipping?days=30").text).split())
    assert client.get("/plot/skipping.png").status_code == 404
    # a catalog that does not exist yet: the same, and the page does not create it
    missing = tmp_path / "nothing" / "catalog.db"
    response = _client(f"sqlite:///{missing}", warehouse).get("/skipping")
    assert response.status_code == 200 and "No queries were routed in the last 7 days" in _text(response.text)
    assert not missing.exists()
    # queries older than the window only
    _record_history(catalog_url, dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=20))
    assert "No queries were routed in the last 7 days" in _text(client.get("/skipping").text)


def test_the_skipping_page_shows_the_query_history_per_table_and_template(catalog_url, warehouse):
    now = dt.datetime.now(dt.timezone.utc)
    _record_history(catalog_url, now)
    client = _client(catalog_url, warehouse)
    response = client.get("/skipping")
    assert response.status_code == 200
    page, text = response.text, " ".join(_text(response.text).split())
    assert "4 queries in the last 7 days" in text  # the import included, the 10-day-old query not
    # lineitem: 3 queries, 3 scans (one read in full), 1+2 of 4+4 blocks, 100+300 of 2,000 rows
    row = re.search(r"<tr><td><a href=\"#s-lineitem\"><code>lineitem</code></a></td>.*?</tr>", page).group(0)
    cells = re.findall(r"<td class=\"n\">(.*?)</td>", row)
    assert cells == ["3", "3", "3 of 8 blocks", "62.5%", "400 of 2,000 rows", "1"], cells
    # orders: 1 query, 1 scan, 1 of 5 blocks
    row = re.search(r"<tr><td><a href=\"#s-orders\"><code>orders</code></a></td>.*?</tr>", page).group(0)
    assert re.findall(r"<td class=\"n\">(.*?)</td>", row) == ["1", "1", "1 of 5 blocks", "80.0%", "20 of 500 rows", "0"]
    # the templates: lineitem's of two queries in the window, its example the newest, escaped
    lineitem = page.split('id="s-lineitem"', 1)[1].split('id="s-orders"', 1)[0]
    template = re.search(rf"<tr><td><code>{LINEITEM_TEMPLATE}</code></td>.*?</tr>", lineitem).group(0)
    assert re.findall(r"<td class=\"n\">(.*?)</td>", template) == ["2", "3 of 8 blocks", "62.5%"]
    assert "l_quantity &lt; 5 AND l_comment &lt;&gt; &#x27;&lt;script&gt;x&lt;/script&gt;&#x27;" in template
    assert "<script>" not in page and "l_quantity < 5" not in page
    assert JOIN_TEMPLATE not in lineitem  # its lineitem scan read in full: no blocks of a template
    orders = page.split('id="s-orders"', 1)[1]
    assert re.search(rf"<td><code>{JOIN_TEMPLATE}</code></td><td class=\"n\">1</td>"
                     r"<td class=\"n\">1 of 5 blocks</td><td class=\"n\">80.0%</td>", orders)
    # the query older than the window is nowhere
    assert "l_quantity &lt; 40" not in page and "7 of 8" not in text
    # lineitem per day, newest first: its routed scans (1 of 4 blocks an hour ago, 2 of 4 two days
    # ago; the join's scan read in full is not one) and the blocks an average one read
    days = re.search(r'<table class="days">(.*?)</table>', lineitem).group(1)
    assert re.findall(r"<tr><td>([\d-]+)</td><td class=\"n\">(.*?)</td><td class=\"n\">(.*?)</td>"
                      r"<td class=\"n\">(.*?)</td></tr>", days) == [
        ((now - dt.timedelta(hours=1)).date().isoformat(), "1", "1.0", "75.0%"),
        ((now - dt.timedelta(days=2)).date().isoformat(), "1", "2.0", "50.0%")]
    # the plot of the window, and one per table
    assert 'src="/plot/skipping.png?days=7"' in page
    assert 'href="/plot/skipping.png?days=7&amp;table=lineitem"' in page
    # the most recent queries, newest first: time, source, template, blocks per table, SQL
    recent = page.split("The most recent 4 queries", 1)[1]
    rows = re.findall(r"<tr><td>\d{4}-\d\d-\d\d [^<]*UTC</td><td>(\w+)</td><td><code>(\w+)</code></td><td>(.*?)</td>",
                      recent)
    assert [(source, fp) for source, fp, _ in rows] == [
        ("route", LINEITEM_TEMPLATE), ("import", "5555eeee6666ffff"), ("run", JOIN_TEMPLATE),
        ("rewrite", LINEITEM_TEMPLATE)]
    assert rows[0][2] == "<code>lineitem</code> 1/4" and "imported" in rows[1][2]
    assert rows[2][2] == "<code>lineitem</code> read in full<br><code>orders</code> 1/5"
    # a 30-day window includes the older query: lineitem 10 of 16 blocks
    text30 = " ".join(_text(client.get("/skipping", params={"days": 30}).text).split())
    assert "5 queries in the last 30 days" in text30
    assert "10 of 16 blocks 37.5%" in text30 and "1,300 of 3,000 rows" in text30


def test_the_skipping_plot_is_a_png(catalog_url, warehouse):
    _record_history(catalog_url, dt.datetime.now(dt.timezone.utc))
    client = _client(catalog_url, warehouse)
    for params in ({}, {"days": 7}, {"days": 30, "table": "orders"}, {"days": 1, "table": "lineitem"}):
        response = client.get("/plot/skipping.png", params=params)
        assert response.status_code == 200 and response.headers["content-type"] == "image/png", params
        assert response.content.startswith(PNG) and len(response.content) > 5000, params
    missing = client.get("/plot/skipping.png", params={"table": "nope"})
    assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")


def test_a_bad_days_parameter_is_a_400_page(catalog_url, warehouse):
    client = _client(catalog_url, warehouse)
    for days in ("abc", "-1", "0", "1.5", "1e3", "99999", " ", "<script>"):
        for path in ("/skipping", "/plot/skipping.png"):
            response = client.get(path, params={"days": days})
            assert response.status_code == 400, (path, days, response.status_code)
            assert response.headers["content-type"].startswith("text/html")
            assert "days must be a whole number of days from 1 to" in _text(response.text), days
            assert "<script>" not in response.text


def test_an_empty_catalog_says_so(tmp_path, warehouse):
    missing = tmp_path / "nothing" / "catalog.db"
    missing.parent.mkdir()
    for url, create in ((f"sqlite:///{missing}", False), (f"sqlite:///{tmp_path / 'empty.db'}", True)):
        if create:
            Catalog(url).close()
        client = _client(url, warehouse)
        response = client.get("/")
        assert response.status_code == 200 and "The layout catalog is empty" in response.text
        assert client.get("/plot/table.png", params={"name": "lineitem"}).status_code == 404
        run = client.get(_run_url())  # its staging folder is there, its catalog version is not
        assert run.status_code == 200 and "No catalog version for this run yet" in run.text
        assert "<td>update_catalog</td>" in run.text
    assert not missing.exists(), "a page never creates the catalog"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_catalog_that_is_down_gives_a_503_page_without_secrets(tmp_path, warehouse):
    url = f"postgresql+psycopg2://layout:s3cr3t-pw@127.0.0.1:{_closed_port()}/catalog"
    client = _client(url, warehouse)
    for path in ("/", _run_url(), "/plot/table.png?name=lineitem", "/skipping", "/skipping?days=30",
                 "/plot/skipping.png"):
        response = client.get(path)
        assert response.status_code == 503, path
        assert "The layout catalog database cannot be read right now" in response.text
        assert "s3cr3t" not in response.text and "layout:" not in response.text and "postgresql" not in response.text
    # a bad window is still the caller's error
    assert client.get("/skipping?days=abc").status_code == 400
    # catalog URLs that cannot work: 503, and still no secret
    for url in ("postgresql://layout:s3cr3t-pw@127.0.0.1:notaport/catalog", "not a URL s3cr3t-pw",
                "postgresql+nodriver://layout:s3cr3t-pw@127.0.0.1/catalog"):
        response = _client(url, warehouse).get("/")
        assert response.status_code == 503 and "s3cr3t" not in response.text, url
    # a file that is no database: 503 too, and the pages work again once it is a catalog
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not a database" * 100)
    url = f"sqlite:///{broken}"
    client = _client(url, warehouse)
    response = client.get("/")
    assert response.status_code == 503 and str(broken) not in response.text
    broken.unlink()
    _fill(url)
    assert client.get("/").status_code == 200


def test_hostile_table_names_are_escaped(catalog_url, warehouse):
    client = _client(catalog_url, warehouse)
    page = client.get("/").text
    assert "<script>" not in page and "<b>opt</b>" not in page
    assert "we&quot;ird&#x27;/../&lt;script&gt;alert(1)&lt;/script&gt;&amp;x" in page
    assert "&lt;b&gt;opt&lt;/b&gt;" in page
    assert "<code>../../etc/passwd</code>" in page  # a run id that is not a DAG run's: not linked
    src = re.search(r'src="(/plot/table\.png\?name=we[^"]*)"', page).group(1)
    assert "/" not in src.split("?", 1)[1] and '"' not in src
    import html

    image = client.get(html.unescape(src))
    assert image.status_code == 200 and image.content.startswith(PNG)


def test_hostile_metrics_are_escaped(catalog_url, warehouse):
    staging = RunPaths(warehouse, "lineitem", "1995", STAGED).staging
    evil = "<script>alert(1)</script>"
    (staging / "metrics.json").write_text(json.dumps({
        "ingest": {"rows": evil, "seconds": evil}, "verify": {"rows": evil}, evil: {evil: evil},
        "update_catalog": {"rows": [evil], "blocks": {"x": evil}, "block_rows_error_max": evil}}))
    client = _client(catalog_url, warehouse)
    response = client.get(_run_url())
    assert response.status_code == 200 and "<script>" not in response.text
    assert "&lt;script&gt;" in response.text
    # seconds that are no number are not plotted (and there is no plot without any)
    assert client.get(_run_url(path="/plot/run-seconds.png")).status_code == 404
    assert "plot/run-seconds.png" not in response.text


def test_every_endpoint_needs_an_authenticated_airflow_user(catalog_url, warehouse):
    client = _client(catalog_url, warehouse, authenticated=False)
    paths = ["/", "/skipping", "/skipping?days=abc", "/plot/skipping.png", _run_url(), "/plot/table.png?name=lineitem",
             _run_url(path="/plot/run-seconds.png"), _run_url(path="/plot/run-blocks.png")]
    for path in paths:
        response = client.get(path)
        assert response.status_code in (401, 403), (path, response.status_code)
        assert "lineitem" not in response.text and "1,000" not in response.text
    # a token Airflow cannot check (no auth manager in this process) is refused too
    for path in paths:
        assert client.get(path, headers={"Authorization": "Bearer not-a-jwt"}).status_code in (401, 403), path
        assert client.get(path, cookies={"_token": "not-a-jwt"}).status_code in (401, 403), path


def test_a_run_page_needs_read_access_to_the_dags_runs(catalog_url, warehouse, monkeypatch):
    import airflow.api_fastapi.app as airflow_app

    asked = []

    class AuthManager:
        allowed = False

        def is_authorized_dag(self, *, method, user, access_entity=None, details=None):
            asked.append((method, user, access_entity.name, details.id))
            return self.allowed

    manager = AuthManager()
    monkeypatch.setattr(airflow_app, "get_auth_manager", lambda: manager)
    app = create_app(catalog_url, warehouse)
    app.dependency_overrides[require_user] = lambda: "viewer"
    client = TestClient(app)
    assert client.get(_run_url()).status_code == 403
    assert client.get(_run_url(path="/plot/run-seconds.png")).status_code == 403
    assert asked[0] == ("GET", "viewer", "RUN", "layout_nightly")
    manager.allowed = True
    assert client.get(_run_url()).status_code == 200
    assert client.get("/").status_code == 200  # the catalog pages need an authenticated user only


def test_the_plugin_registers_the_app_a_nav_entry_and_a_dag_run_view():
    spec = importlib.util.spec_from_file_location("layouts_plugin", PROJECT / "plugins" / "layouts_plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from airflow.plugins_manager import is_valid_plugin

    from layout_core.airflow.pages import app as airflow_plugin

    plugin = module.LayoutsPlugin
    assert is_valid_plugin(plugin)
    (fastapi_app,) = plugin.fastapi_apps
    assert fastapi_app["url_prefix"] == "/layouts" and fastapi_app["app"] is airflow_plugin.app
    views = {view["destination"]: view for view in plugin.external_views}
    assert views["nav"]["name"] == "Layouts" and views["nav"]["href"] == "layouts/"
    assert views["dag_run"]["href"] == "layouts/run?dag_id={DAG_ID}&run_id={RUN_ID}"
    # the UI substitutes encodeURIComponent(run id): the page finds the run's staging folder from it
    routes = {route.path for route in airflow_plugin.app.routes}
    assert {"/", "/run", "/skipping", "/plot/table.png", "/plot/run-seconds.png", "/plot/run-blocks.png",
            "/plot/skipping.png"} <= routes


# --------------------------------------------------------------------------- partial reorganization, monitor

REORG_STAGED = f"layout_reoptimize__{AIRFLOW_RUN}"
MONITOR_STAGED = f"layout_workload_monitor__{AIRFLOW_RUN}"


def _reorganize(url: str, nodes=(1, 4)) -> int:
    """A partial reorganization of lineitem 1995 by hand: version 2's first block (340 rows) kept,
    its other two (660 rows) rewritten into two new blocks; activated in place of version 2."""
    with Catalog(url, clock=Clock()) as catalog:
        base = catalog.active_layout("lineitem", "1995")
        kept, *moved = sorted(base.blocks, key=lambda b: b.block_id)
        version, ids = catalog.begin_version("lineitem", "1995", "qdtree",
                                             {"reorganized_from": base.version.version_id,
                                              "reorganized_nodes": list(nodes)}, REORG_STAGED, 2)
        catalog.set_plan(version, {"reorganized_from": base.version.version_id, "expected_block_rows": [400.0, 250.0]})
        catalog.set_blocks(version, [kept] + _blocks(ids, [410, 250]), replaces=base.version.version_id)
        catalog.activate(version, input_fingerprint="1000:42", replaces=base.version.version_id)
    return version


REORG_METRICS = {
    "plan_reorg": {"base_version": 2, "subtrees": 2, "blocks_rewritten": 2, "blocks_total": 3, "new_blocks": 2,
                   "reward": 29.1, "subtrees_evaluated": 5, "subtrees_total": 7, "seconds": 6.5},
    "write_reorg": {"version": 5, "blocks_read": 2, "blocks_written": 2, "rows": 660, "seconds": 3.0},
    "verify_reorg": {"rows": 660, "seconds": 1.25},
    "activate_reorg": {"version": 5, "base_version": 2, "blocks": 3, "blocks_shared": 1, "blocks_rewritten": 2,
                       "blocks_new": 2, "cuts": 6, "seconds": 0.5},
}


def _reorg_url(run_id: str = AIRFLOW_RUN, path: str = "/run", **extra) -> str:
    from urllib.parse import urlencode

    return f"{path}?{urlencode({'dag_id': 'layout_reoptimize', 'run_id': run_id, **extra})}"


def test_a_reorganization_run_page_lists_its_four_steps_in_order_with_their_numbers(catalog_url, warehouse):
    version = _reorganize(catalog_url)
    assert version == REORG_METRICS["activate_reorg"]["version"]
    paths = RunPaths(warehouse, "lineitem", "1995", REORG_STAGED)
    paths.staging.mkdir(parents=True)
    # written out of order: the page shows them in the order of the steps
    paths.file("metrics.json").write_text(json.dumps(dict(reversed(REORG_METRICS.items()))))
    planned = RunPaths(warehouse, "lineitem", "", REORG_STAGED)
    planned.staging.mkdir(parents=True)
    planned.file("reorg_planned.json").write_text(json.dumps(
        {"table": "lineitem", "partitions": ["1995"], "reward": 29.1, "reason": "reward 29.1 > 0: 2 subtrees"}))
    client = _client(catalog_url, warehouse)
    response = client.get(_reorg_url())
    assert response.status_code == 200
    page, text = response.text, " ".join(_text(response.text).split())
    assert re.findall(r"<tr><td>(\w+)</td>", page) == ["plan_reorg", "write_reorg", "verify_reorg", "activate_reorg"]
    assert "blocks_rewritten=2" in page and "blocks_shared=1" in page and "subtrees_total=7" in page
    assert "<td class=\"n\">660</td>" in page and "<td class=\"n\">6.5</td>" in page
    assert "Reorganization: rewrote 2 of 3 blocks into 2 new ones; 1 shared with version 2; reward 29.1." in text
    assert "Subtrees rewritten: 2, 5 evaluated of 7." in text
    assert f"Catalog version {version}: active" in text and "replaced version 2" in text
    assert "reorganized subtrees 1, 4 of version 2" in text
    assert "passed : the new blocks hold 660 rows, the 660 rows of the blocks they replace" in text
    assert "Partitions with subtrees to rewrite: 1995; reward 29.1." in text and "2 subtrees" in text
    # only the new blocks against the plan: 400 and 250 expected, 410 and 250 written
    assert "Per new block (the version is active): expected rows 250–400, real rows 250–410 over 2 blocks" in text
    # nothing of the nightly's: no missing nightly steps, no ingest, no nightly verification
    assert "Steps without numbers yet" not in text and "ingest" not in text and "not verified" not in text
    assert "update_catalog" not in text and "Rows in and out" not in text
    for plot in ("/plot/run-seconds.png", "/plot/run-blocks.png"):
        src = _reorg_url(path=plot, section=0).replace("&", "&amp;")
        assert f'src="{src}"' in page, plot
        image = client.get(_reorg_url(path=plot, section=0))
        assert image.status_code == 200 and image.content.startswith(PNG) and len(image.content) > 5000, plot
    # the nightly run of the same table is unchanged
    nightly = " ".join(_text(client.get(_run_url()).text).split())
    assert "in (ingest): 1,000" in nightly and "Reorganization" not in nightly


def test_a_reorganization_run_that_only_planned_says_what_is_missing(catalog_url, warehouse):
    client = _client(catalog_url, warehouse)
    paths = RunPaths(warehouse, "lineitem", "1996", REORG_STAGED)
    paths.staging.mkdir(parents=True)
    paths.file("metrics.json").write_text(json.dumps({"plan_reorg": REORG_METRICS["plan_reorg"]}))
    response = client.get(_reorg_url())
    assert response.status_code == 200
    page, text = response.text, " ".join(_text(response.text).split())
    assert re.findall(r"<tr><td>(\w+)</td>", page) == ["plan_reorg"]
    assert "Steps without numbers yet: write_reorg, verify_reorg, activate_reorg." in text
    assert "Reorganization: plans to rewrite 2 of 3 blocks into 2 new ones; base version 2; reward 29.1." in text
    assert "Not activated yet" in text and "No catalog version for this run yet (write_reorg creates it)" in text
    assert "not verified" in text and "verify_reorg has not run" in text and "ingest" not in text
    assert 'src="' + _reorg_url(path="/plot/run-seconds.png", section=0).replace("&", "&amp;") + '"' in page
    assert client.get(_reorg_url(path="/plot/run-seconds.png", section=0)).status_code == 200
    # a run whose plan chose nothing: only the table-wide record, which says why
    other = RunPaths(warehouse, "orders", "", "layout_reoptimize__manual__2")
    other.staging.mkdir(parents=True)
    other.file("reorg_planned.json").write_text(json.dumps(
        {"table": "orders", "partitions": [], "reward": -3.5, "reason": "reward -3.5 <= 0: <b>no</b> reorganization"}))
    response = client.get(_reorg_url("manual__2"))
    assert response.status_code == 200
    text = " ".join(_text(response.text).split())
    assert "Partitions with subtrees to rewrite: none: nothing is rewritten; reward -3.5." in text
    assert "&lt;b&gt;no&lt;/b&gt; reorganization" in response.text and "<b>no</b>" not in response.text


def test_the_tables_page_shows_the_base_and_subtrees_of_a_reorganized_version(catalog_url, warehouse):
    version = _reorganize(catalog_url, nodes=(3, "<b>7</b>"))
    page = _client(catalog_url, warehouse).get("/").text
    row = re.search(rf"<tr><td class=\"n\">{version}</td><td>1995</td>.*?</tr>", page).group(0)
    assert "reorganized subtrees 3, &lt;b&gt;7&lt;/b&gt; of version 2" in row and "<b>7</b>" not in page
    assert re.search(r"<td class=\"n\">2</td><td>1995</td><td><span class=\"state-retired\">", page)
    assert "reorganized" not in page.replace(row, "")  # the other versions are no reorganizations


def _monitor_url(run_id: str = AIRFLOW_RUN) -> str:
    from urllib.parse import urlencode

    return f"/run?{urlencode({'dag_id': 'layout_workload_monitor', 'run_id': run_id})}"


def _write_monitor_report(warehouse: Path) -> Path:
    """A monitor run's report through reorg.monitor.write_report, the numbers set by hand."""
    from layout_core.flows.reorg.monitor import report_path, write_report
    from layout_core.flows.reorg.shift import ChosenSubtree, PartitionShift, ShiftReport, ShiftSettings

    start, end = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    chosen = (ChosenSubtree(4, (5, 6), 12, 3.5, 40.25, 28.25), ChosenSubtree(9, (11,), 1, 0.5, 1.85, 0.85))
    partition = PartitionShift("1995", 2, "qdtree", False, 30, 7.5, chosen, 29.1, 14, 31,
                               "2 subtrees of 13 blocks: reward 29.1", lower_bound=12.5, root_gain=2.25,
                               root_noise=0.5)
    quiet = PartitionShift("1996", 3, "qdtree", False, 8, 1.0, (), 0.0, 3, 3, "no subtree pays off")
    reports = [
        ShiftReport("lineitem", start, end, 200.0, 100.0, 40, 37, 2, 0, (partition, quiet),
                    "reward 29.1 > 0: reorganize 2 subtrees", notes=("2 queries of the window could not be parsed "
                                                                     "and were skipped",)),
        ShiftReport("orders", start, end, 200.0, 100.0, 40, 3, 0, 0, (),
                    "the window holds 3 references to orders, fewer than 10: too few to act on; <i>no</i> "
                    "reorganization"),
    ]
    path = report_path(warehouse, MONITOR_STAGED)
    write_report(path, reports, ShiftSettings(q=200.0, w=100.0, window_hours=24.0))
    return path


def test_a_monitor_run_page_shows_its_shift_report(tmp_path, warehouse):
    path = _write_monitor_report(warehouse)
    # the page reads no catalog: one that is down does not matter
    client = _client(f"postgresql+psycopg2://layout:pw@127.0.0.1:{_closed_port()}/catalog", warehouse)
    response = client.get(_monitor_url())
    assert response.status_code == 200
    page, text = response.text, " ".join(_text(response.text).split())
    assert "q = 200, w = 100, window (hours): 24" in text
    lineitem = page.split("Table <code>lineitem</code>", 1)[1].split("Table <code>orders</code>", 1)[0]
    assert re.findall(r"<td class=\"n\">(.*?)</td>", lineitem.split("</table>", 1)[0]) == ["37", "29.1"]
    assert "<strong>yes</strong>" in lineitem and "reward 29.1 &gt; 0: reorganize 2 subtrees" in lineitem
    assert "2 queries of the window could not be parsed and were skipped" in lineitem
    assert "The window: 2026-01-01T00:00:00+00:00 to 2026-01-02T00:00:00+00:00; 40 queries in it." in " ".join(
        _text(lineitem).split())
    # per partition: reward, blocks chosen, subtrees evaluated of total; the chosen subtrees' numbers
    assert re.search(r"<tr><td>1995</td><td class=\"n\">2</td><td class=\"n\">30</td><td class=\"n\">29.1</td>"
                     r"<td class=\"n\">13</td><td class=\"n\">14 of 31</td>", lineitem)
    assert re.search(r"<td>1996</td>.*?<td class=\"n\">3 of 3</td><td>no subtree pays off</td>", lineitem)
    # what a full re-layout would save per query over its noise floor, and the bootstrap's bound
    assert re.search(r"reward 29.1</td><td class=\"n\">2.25 \(0.5\)</td><td class=\"n\">12.5</td>", lineitem)
    assert "Subtrees chosen in partition 1995 (version 2): 2, 14 evaluated of 31" in " ".join(_text(lineitem).split())
    rows = re.findall(r"<tr>((?:<td class=\"n\">[^<]*</td>){5})</tr>", lineitem)
    assert [re.findall(r"<td class=\"n\">([^<]*)</td>", r) for r in rows] == [["4", "12", "2", "40.25", "28.25"],
                                                           ["9", "1", "1", "1.85", "0.85"]]
    assert "Subtrees chosen in partition 1996" not in page  # none chosen there
    orders = page.split("Table <code>orders</code>", 1)[1]
    assert re.findall(r"<td class=\"n\">(.*?)</td>", orders) == ["3", "0"] and "<td>no</td>" in orders
    assert "fewer than 10: too few to act on; &lt;i&gt;no&lt;/i&gt;" in orders and "<i>" not in page
    assert str(tmp_path) not in page and "pw@" not in page and str(path.name) not in page
    # the same report through the plugin's own path (it does not import reorg.monitor)
    from layout_core.airflow.pages.data import monitor_report_path
    from layout_core.flows.reorg.monitor import report_path

    for run_id in (MONITOR_STAGED, HOSTILE, "a/../../b", "x:y+z", "layout__.._..", "layout_workload_monitor__.."):
        assert monitor_report_path(warehouse, run_id) == report_path(warehouse, run_id), run_id
    assert monitor_report_path(warehouse, "..") is None  # no monitor run id is "..": no folder outside _monitor


def test_a_monitor_run_without_a_readable_report_is_a_note(catalog_url, warehouse, tmp_path):
    client = _client(catalog_url, warehouse)
    response = client.get(_monitor_url())
    assert response.status_code == 200
    assert "The monitor run has not written its report yet" in _text(response.text)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "shift.json").write_text('{"version": 1, "tables": [{"table": "secret31337"}]}')
    for run_id in ("../../../secret", "..", '"><script>alert(1)</script>'):
        response = client.get(_monitor_url(run_id))
        assert response.status_code == 200 and "has not written its report yet" in response.text, run_id
        assert "secret31337" not in response.text and "<script>" not in response.text
    path = _write_monitor_report(warehouse)
    good = json.loads(path.read_text())

    def broken(change) -> dict:
        report = json.loads(json.dumps(good))
        change(report)
        return report

    cases = {
        "not json {": "the report is not JSON",
        "[1, 2]": "the report is not a JSON object",
        "[" * 100000 + "]" * 100000: "the report is not JSON",
        json.dumps({**good, "version": 2}): "a report of version 2, this page reads version 1",
        json.dumps({**good, "tables": "<script>x</script>"}): "&#x27;tables&#x27; is not a list",
        json.dumps({**good, "tables": [7]}): "tables[0] is not an object",
        json.dumps(broken(lambda r: r["tables"][0].update(reward="high"))):
            "table &#x27;lineitem&#x27;: &#x27;reward&#x27; is not a number",
        json.dumps(broken(lambda r: r["tables"][0].update(reorganize=1))): "&#x27;reorganize&#x27; is not true or false",
        json.dumps(broken(lambda r: r["tables"][0].pop("reason"))): "&#x27;reason&#x27; is missing",
        json.dumps(broken(lambda r: r["tables"][0].update(notes=[{"x": 1}]))): "&#x27;notes&#x27; are not texts",
        json.dumps(broken(lambda r: r["tables"][0]["partitions"][0].update(subtrees_total=None))):
            "partition 1: &#x27;subtrees_total&#x27; is missing",
        json.dumps(broken(lambda r: r["tables"][0]["partitions"][0]["chosen"][1].update(benefit=[1]))):
            "partition 1, chosen subtree 2: &#x27;benefit&#x27; is not a number",
        json.dumps(broken(lambda r: r["tables"][1].update(table=None))): "table 2: &#x27;table&#x27; is missing",
    }
    for content, said in cases.items():
        path.write_text(content)
        response = client.get(_monitor_url())
        assert response.status_code == 200, content[:80]
        assert "The monitor run has not written a report this page can read" in response.text, content[:80]
        assert said in response.text, (content[:80], said)
        assert "<script>" not in response.text and str(tmp_path) not in response.text
    path.write_bytes(b"\xff\xfe not text")
    response = client.get(_monitor_url())
    assert response.status_code == 200 and "the report file cannot be read" in response.text
    # a run page of the monitor needs read access to its runs, as every run page
    assert _client(catalog_url, warehouse, authenticated=False).get(_monitor_url()).status_code in (401, 403)


# --------------------------------------------------------------------------- gc

GC_STAGED = f"layout_gc__{AIRFLOW_RUN}"


def _gc_url(run_id: str = AIRFLOW_RUN) -> str:
    from urllib.parse import urlencode

    return f"/run?{urlencode({'dag_id': 'layout_gc', 'run_id': run_id})}"


def _write_gc_report(warehouse: Path, dry_run: bool = False, kept: int = 2) -> Path:
    """A gc run's report through gc.write_report, the report set by hand."""
    from layout_core.flows.gc import DeletedFolder, GarbageReport, KeptItem, report_path, write_report

    items = [KeptItem("version 9 (orders/1996)", "failed, but newer than the active version <b>8</b>"),
             KeptItem(str(warehouse / "_runs" / "orders" / "1997" / "x"), "its run's version is building & may be "
                                                                          "retried")]
    items += [KeptItem(f"version {100 + i} (t/p)", f"retired at {i}, within the grace period") for i in range(kept - 2)]
    report = GarbageReport(
        dry_run, dt.datetime(2026, 1, 1, 3, 4, 5, tzinfo=dt.timezone.utc), (3, 4),
        (DeletedFolder("/wh/orders/dt=1995/block_id=1", 1000, 3), DeletedFolder("/wh/orders/dt=1995/block_id=2", 2048, 4)),
        (DeletedFolder("/wh/_runs/orders/1995/run-1", 3 * 1024 * 1024),), tuple(items), 17)
    path = report_path(warehouse, GC_STAGED)
    write_report(path, report)
    return path


def test_a_gc_run_page_shows_its_report(tmp_path, warehouse):
    _write_gc_report(warehouse)
    # the page reads no catalog: one that is down does not matter
    client = _client(f"postgresql+psycopg2://layout:pw@127.0.0.1:{_closed_port()}/catalog", warehouse)
    response = client.get(_gc_url())
    assert response.status_code == 200
    page, text = response.text, " ".join(_text(response.text).split())
    assert "dry run no" in text and "cutoff (out of service before it: due) 2026-01-01 03:04:05 UTC" in text
    assert "versions purged 2 (versions 3, 4)" in text
    assert "block folders deleted 2, 3.0 KiB (3,048 bytes)" in text
    assert "staging folders deleted 1, 3.0 MiB (3,145,728 bytes)" in text
    assert "bytes freed 3.0 MiB (3,148,776 bytes)" in text
    assert "queries pruned from the history 17" in text and "old gc reports deleted 0" in text
    assert "kept (candidates not deleted) 2" in text and "A dry run" not in text
    # kept items with their reasons, escaped
    assert "failed, but newer than the active version &lt;b&gt;8&lt;/b&gt;" in page and "<b>8" not in page
    assert "its run&#x27;s version is building &amp; may be retried" in page
    assert "/wh/orders/dt=1995/block_id=2" in page and "and 10 more" not in text
    # the plugin's own path (it does not import gc) is gc.report_path
    from layout_core.airflow.pages.data import gc_report_path
    from layout_core.flows.gc import report_path

    for run_id in (GC_STAGED, HOSTILE, "a/../../b", "x:y+z", "layout__.._..", "layout_gc__.."):
        assert gc_report_path(warehouse, run_id) == report_path(warehouse, run_id), run_id
    assert gc_report_path(warehouse, "..") is None


def test_a_gc_dry_run_page_says_so_and_lists_at_most_50_kept(catalog_url, warehouse):
    _write_gc_report(warehouse, dry_run=True, kept=62)
    response = _client(catalog_url, warehouse).get(_gc_url())
    assert response.status_code == 200
    text = " ".join(_text(response.text).split())
    assert "A dry run : nothing was deleted" in text and "dry run yes" in text
    assert "versions that would be purged 2" in text and "block folders would be deleted 2" in text
    assert "kept (candidates not deleted) 62" in text and "… and 12 more kept." in text
    assert "version 147 (t/p)" in text and "version 148 (t/p)" not in text


def test_a_gc_run_without_a_readable_report_is_a_note(catalog_url, warehouse, tmp_path):
    client = _client(catalog_url, warehouse)
    response = client.get(_gc_url())
    assert response.status_code == 200 and "The gc run has not written its report yet" in _text(response.text)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "report.json").write_text('{"kept_items": [{"what": "secret31337"}]}')
    for run_id in ("../../../secret", "..", '"><script>alert(1)</script>'):
        response = client.get(_gc_url(run_id))
        assert response.status_code == 200 and "has not written its report yet" in response.text, run_id
        assert "secret31337" not in response.text and "<script>" not in response.text
    path = _write_gc_report(warehouse)
    good = json.loads(path.read_text())
    cases = {
        "not json {": "the report is not JSON",
        "[1, 2]": "the report is not a JSON object",
        "[" * 100000 + "]" * 100000: "the report is not JSON",
        json.dumps({**good, "dry_run": "no"}): "&#x27;dry_run&#x27; is not true or false",
        json.dumps({**good, "cutoff": "<script>yesterday</script>"}): "is not a time",
        json.dumps({**good, "cutoff": "0001-01-01T00:00:00+05:00"}): "is not a time",
        json.dumps({**good, "bytes_freed": 10 ** 30}): "&#x27;bytes_freed&#x27; is not a count",
        json.dumps({**good, "kept": -1}): "&#x27;kept&#x27; is not a count",
        json.dumps({**good, "purged_version_ids": ["<i>"]}): "&#x27;purged_version_ids&#x27; are not version ids",
        json.dumps({**good, "folders": [{"path": "/x", "bytes": 1.5}]}): "folders[0]: &#x27;bytes&#x27; is not a count",
        json.dumps({**good, "staging": "<script>x</script>"}): "&#x27;staging&#x27; is not a list",
        json.dumps({**good, "kept_items": [{"what": "x"}]}): "kept_items[0]: &#x27;reason&#x27; is missing",
        json.dumps({**good, "kept_items": [{"what": "x", "reason": "\ud800"}]}): "&#x27;reason&#x27; is not a text",
    }
    for content, said in cases.items():
        path.write_text(content, errors="surrogatepass")
        response = client.get(_gc_url())
        assert response.status_code == 200, content[:80]
        assert "The gc run has not written a report this page can read" in response.text, content[:80]
        assert said in response.text, (content[:80], said)
        assert "<script>" not in response.text and str(tmp_path) not in response.text
    path.write_bytes(b"\xff\xfe not text")
    response = client.get(_gc_url())
    assert response.status_code == 200 and "the report file cannot be read" in response.text
    assert _client(catalog_url, warehouse, authenticated=False).get(_gc_url()).status_code in (401, 403)


def test_the_run_page_of_a_cleared_and_rerun_nightly_run_shows_its_latest_version(tmp_path):
    """layout_nightly builds a cleared run's re-run under `<dag>__<run>__rerun<n>`: the run page
    shows the latest such attempt, its version the active one."""
    from layout_core.airflow.pages.data import latest_staged_run_id, read_run

    url, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "warehouse"
    with Catalog(url, clock=Clock()) as catalog:
        catalog.register_table("lineitem", "/warehouse/lineitem", "dt", {"columns": {"l_orderkey": "bigint"}})
        for key, rows in ((STAGED, [500, 500]), (f"{STAGED}__rerun1", [450, 450]), (f"{STAGED}__rerun3", [300, 600])):
            version, ids = catalog.begin_version("lineitem", "2026-01-01", "sortkey", {}, key, 2)
            catalog.set_blocks(version, _blocks(ids, rows))
            catalog.activate(version)
            paths = RunPaths(warehouse, "lineitem", "2026-01-01", key)
            paths.staging.mkdir(parents=True)
            paths.file("metrics.json").write_text(json.dumps({"ingest": {"rows": sum(rows)}}))
        (paths.staging.parent / f"{paths.staging.name[:-1]}x").mkdir()  # not a rerun number: ignored
        assert latest_staged_run_id(warehouse, STAGED) == f"{STAGED}__rerun3"
        assert latest_staged_run_id(warehouse, "layout_nightly__other") == "layout_nightly__other"
        report = read_run(catalog, warehouse, "layout_nightly", AIRFLOW_RUN)
    assert report.staged_run_id == f"{STAGED}__rerun3"
    (section,) = report.sections
    assert section.version.run_id == f"{STAGED}__rerun3" and section.version.state == "active"
    assert section.metrics == {"ingest": {"rows": 900}}


def test_a_change_batch_run_lists_its_own_steps():
    from layout_core.airflow.pages.data import run_steps

    staged = {"stage_changes": {"inserted": 40}, "write_changes": {"version": 9}}
    assert run_steps(staged) == ("stage_changes", "write_changes", "verify_changes", "activate_changes")
    assert run_steps({}, "layout_changes")[0] == "stage_changes"
    assert run_steps({}, "layout_nightly")[0] == "ingest"


def test_a_reorganization_run_names_the_version_it_replaces_by_either_key(catalog_url, warehouse):
    """Newer runs record the version they replace as "replaces", older ones as "base_version"
    (REORG_METRICS); with both, "replaces" is the one shown."""
    from layout_core.airflow.pages.reports import replaced_version

    assert replaced_version({"replaces": 2, "base_version": 9}) == 2
    assert replaced_version({"replaces": None, "base_version": 9}) == 9 and replaced_version({}) is None
    renamed = {step: {("replaces" if key == "base_version" else key): value for key, value in numbers.items()}
               for step, numbers in REORG_METRICS.items()}
    paths = RunPaths(warehouse, "lineitem", "1995", REORG_STAGED)
    paths.staging.mkdir(parents=True)
    client = _client(catalog_url, warehouse)
    for metrics, said in (
            (renamed, "rewrote 2 of 3 blocks into 2 new ones; 1 shared with version 2; reward 29.1."),
            ({"plan_reorg": renamed["plan_reorg"]}, "plans to rewrite 2 of 3 blocks into 2 new ones; base version 2;"),
            ({"plan_reorg": {**REORG_METRICS["plan_reorg"], "replaces": 7}}, "; base version 7; reward 29.1.")):
        paths.file("metrics.json").write_text(json.dumps(metrics))
        response = client.get(_reorg_url())
        assert response.status_code == 200 and said in " ".join(_text(response.text).split()), said


def test_the_pages_read_the_catalog_of_the_airflow_connection_over_the_environments(
        catalog_url, warehouse, tmp_path, monkeypatch):
    from layout_core.airflow.pages.app import deployment_catalog_url

    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("LAYOUT_CATALOG_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    monkeypatch.setenv("LAYOUT_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("AIRFLOW_CONN_LAYOUT_CATALOG",
                       json.dumps({"conn_type": "generic", "extra": {"url": catalog_url}}))
    lookup = deployment_catalog_url(max_age_seconds=3600)
    app = create_app(connection_url=lookup)
    app.dependency_overrides[require_user] = lambda: "tester"
    assert "lineitem" in _text(TestClient(app).get("/").text)
    # looked up once an hour here: a changed connection shows once the hour is over
    monkeypatch.delenv("AIRFLOW_CONN_LAYOUT_CATALOG")
    assert lookup() == catalog_url
    assert deployment_catalog_url(max_age_seconds=0)() is None
    app = create_app(connection_url=deployment_catalog_url())
    app.dependency_overrides[require_user] = lambda: "tester"
    assert "The layout catalog is empty" in TestClient(app).get("/").text  # the environment's catalog
