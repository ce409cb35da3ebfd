"""The catalog URL from the Airflow connection `layout_catalog`, LAYOUT_CATALOG_URL without it."""

import json
import logging
import sys

import pytest
from airflow.sdk import Connection

from layout_core.airflow.catalog_connection import catalog_url_of, use_catalog_connection
from layout_core.base.errors import UserError
from tests.helpers.paths import PROJECT


def test_connections_become_sqlalchemy_urls():
    pg = Connection(conn_id="layout_catalog", conn_type="postgres", host="db.internal", port=5433,
                    login="layout", password="p@ss/word", schema="catalog")
    assert catalog_url_of(pg) == "postgresql+psycopg2://layout:p%40ss%2Fword@db.internal:5433/catalog"
    trust = Connection(conn_id="layout_catalog", conn_type="postgres", host="127.0.0.1", schema="test")
    assert catalog_url_of(trust) == "postgresql+psycopg2://127.0.0.1/test"
    lite = Connection(conn_id="layout_catalog", conn_type="sqlite", host="/srv/layout/catalog.db")
    assert catalog_url_of(lite) == "sqlite:////srv/layout/catalog.db"
    # the extra's URL wins whatever the type
    given = Connection(conn_id="layout_catalog", conn_type="generic",
                       extra=json.dumps({"url": "mysql+pymysql://u@h/db"}))
    assert catalog_url_of(given) == "mysql+pymysql://u@h/db"
    with pytest.raises(UserError, match="conn_type 'http' is not supported"):
        catalog_url_of(Connection(conn_id="layout_catalog", conn_type="http", host="h"))
    with pytest.raises(UserError, match="needs a host"):
        catalog_url_of(Connection(conn_id="layout_catalog", conn_type="postgres"))


@pytest.fixture
def no_connection(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.delenv("AIRFLOW_CONN_LAYOUT_CATALOG", raising=False)
    monkeypatch.setenv("LAYOUT_CATALOG_URL", "sqlite:////from/the/environment.db")


def test_the_connection_overrides_the_environment_and_its_absence_is_said_once(no_connection, monkeypatch, caplog):
    import os

    with caplog.at_level(logging.INFO, logger="layout_core.airflow.catalog_connection"):
        use_catalog_connection()
    assert os.environ["LAYOUT_CATALOG_URL"] == "sqlite:////from/the/environment.db"
    assert [r.getMessage() for r in caplog.records] == [
        "no Airflow connection layout_catalog: the catalog is LAYOUT_CATALOG_URL's (sqlite:////from/the/environment.db)"]

    monkeypatch.setenv("AIRFLOW_CONN_LAYOUT_CATALOG", json.dumps(
        {"conn_type": "postgres", "host": "127.0.0.1", "port": 5432, "login": "postgres", "password": "secret",
         "schema": "test"}))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="layout_core.airflow.catalog_connection"):
        use_catalog_connection()
    assert os.environ["LAYOUT_CATALOG_URL"] == "postgresql+psycopg2://postgres:secret@127.0.0.1:5432/test"
    assert "secret" not in caplog.text and "catalog from the Airflow connection layout_catalog" in caplog.text


@pytest.fixture
def submitted(no_connection, monkeypatch):
    """dags/spark_jobs.py's `spark_submit`, imported as the DAG processor does, with the
    submit itself replaced by a record of what it would submit: (spark_submit, records), a
    record {"catalog": the job's LAYOUT_CATALOG_URL, "conf": its Spark settings}."""
    import os

    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    monkeypatch.syspath_prepend(str(PROJECT / "dags"))
    sys.modules.pop("spark_jobs", None)
    from spark_jobs import spark_submit

    records = []
    monkeypatch.setattr(SparkSubmitOperator, "execute", lambda self, context: records.append(
        {"catalog": os.environ["LAYOUT_CATALOG_URL"], "conf": dict(self.conf)}))
    return spark_submit, records


def test_a_spark_step_submits_with_the_connections_catalog(submitted, monkeypatch, tmp_path):
    """The DAGs' spark-submit steps set the catalog before they submit (the job inherits it)."""
    spark_submit, records = submitted
    monkeypatch.setenv("AIRFLOW_CONN_LAYOUT_CATALOG",
                       json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "c.db")}))
    spark_submit("ingest", "ingest.py", []).execute({})
    assert [r["catalog"] for r in records] == [f"sqlite:///{tmp_path / 'c.db'}"]


def test_a_spark_step_takes_spark_settings_from_the_connection_and_the_environment_over_it(
        submitted, monkeypatch):
    spark_submit, records = submitted
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "local[2]",
         "extra": {"conf": {"spark.sql.shuffle.partitions": 64, "spark.executor.memory": "2g"}}}))
    monkeypatch.setenv("LAYOUT_SPARK_CONF", '{"spark.executor.memory": "3g"}')
    spark_submit("ingest", "ingest.py", []).execute({})
    (conf,) = [r["conf"] for r in records]
    assert conf["spark.sql.shuffle.partitions"] == "64" and conf["spark.executor.memory"] == "3g"
    assert conf["spark.sql.session.timeZone"] == "UTC"  # the jobs' own settings stay

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": "local[2]", "extra": {"conf": {"spark.driver.memory": "plenty"}}}))
    with pytest.raises(ValueError, match="spark_default connection's extra \"conf\": spark.driver.memory"):
        spark_submit("ingest", "ingest.py", []).execute({})
