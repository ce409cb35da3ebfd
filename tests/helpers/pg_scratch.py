"""A throwaway PostgreSQL schema per test, so tests never see each other's rows."""

from __future__ import annotations

import contextlib
import uuid

import sqlalchemy as sa


@contextlib.contextmanager
def scratch_pg_schema(url: str):
    """Yield a URL whose connections use a fresh schema; drop it afterwards."""
    name = f"layout_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    except sa.exc.OperationalError as e:
        admin.dispose()
        import pytest

        pytest.skip(f"PostgreSQL at {url} is not reachable: {e.orig}")
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}options=-csearch_path%3D{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()
