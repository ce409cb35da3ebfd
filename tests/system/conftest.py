"""Fixtures of the system tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def metadata_url():
    """A fresh PostgreSQL database for Airflow's metadata, dropped afterwards."""
    from layout_core.airflow.deployment import PG_SERVER, pg_error, scratch_database

    if error := pg_error(PG_SERVER):
        pytest.skip(f"a real Airflow deployment needs PostgreSQL at {PG_SERVER}: {error}")
    with scratch_database(PG_SERVER) as url:
        yield url
