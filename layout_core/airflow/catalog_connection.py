"""The catalog URL from the Airflow Connection `layout_catalog`, where Airflow users keep
database settings; LAYOUT_CATALOG_URL (then `layout.yaml`, then the default) when it is
not defined.

The connection's extra field may give any SQLAlchemy URL (`{"url": "postgresql+psycopg2://..."}`);
otherwise a `postgres` connection (host, port, login, password, schema = the database) or a
`sqlite` one (host = the database file) is turned into one. Tasks call
`use_catalog_connection()` first: it puts the URL in the task process's environment, which
the layout code and the spark-submits it starts read (a driver in client mode; one that
runs on the cluster, deploy mode `cluster`, needs LAYOUT_CATALOG_URL there).
"""

from __future__ import annotations

import logging
import os
from urllib.parse import quote

from layout_core.base.errors import UserError
from layout_core.base.urls import masked_url

log = logging.getLogger(__name__)

CATALOG_CONNECTION = "layout_catalog"


def catalog_url_of(conn) -> str:
    """The SQLAlchemy URL an Airflow Connection (conn_type, host, port, login, password,
    schema, extra_dejson) names."""
    url = (conn.extra_dejson or {}).get("url")
    if url:
        return str(url)
    kind = (conn.conn_type or "").lower()
    if kind in ("postgres", "postgresql"):
        if not conn.host:
            raise UserError(f"connection {CATALOG_CONNECTION}: a postgres connection needs a host")
        user = quote(conn.login or "", safe="")
        password = f":{quote(conn.password, safe='')}" if conn.password else ""
        at = f"{user}{password}@" if user or password else ""
        port = f":{conn.port}" if conn.port else ""
        return f"postgresql+psycopg2://{at}{conn.host}{port}/{conn.schema or ''}"
    if kind == "sqlite":
        if not conn.host:
            raise UserError(f"connection {CATALOG_CONNECTION}: a sqlite connection needs the file as its host")
        return f"sqlite:///{conn.host}"
    raise UserError(f"connection {CATALOG_CONNECTION}: conn_type {conn.conn_type!r} is not supported: "
                    'use postgres or sqlite, or give the SQLAlchemy URL in its extra: {"url": "..."}')


def airflow_connection(conn_id: str):
    """The Airflow Connection `conn_id`, None when it is not defined."""
    # Airflow is there only where a task runs: the CLI and the jobs import this module without it
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def connection_catalog_url() -> str | None:
    """The catalog URL of the Airflow Connection `layout_catalog`, None when it is not defined."""
    conn = airflow_connection(CATALOG_CONNECTION)
    return None if conn is None else catalog_url_of(conn)


def use_catalog_connection() -> None:
    """Make the connection's catalog URL this process's LAYOUT_CATALOG_URL (inherited by the
    spark-submits it starts); without the connection, leave the environment as it is and say so."""
    url = connection_catalog_url()
    if url is None:
        log.info("no Airflow connection %s: the catalog is LAYOUT_CATALOG_URL's (%s)", CATALOG_CONNECTION,
                 masked_url(os.environ["LAYOUT_CATALOG_URL"]) if os.environ.get("LAYOUT_CATALOG_URL")
                 else "unset: layout.yaml's or the default")
        return
    os.environ["LAYOUT_CATALOG_URL"] = url
    log.info("catalog from the Airflow connection %s: %s", CATALOG_CONNECTION, masked_url(url))
