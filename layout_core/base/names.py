"""Names and limits every layer agrees on (stdlib only: the DAG files import this)."""

from __future__ import annotations

import re

# The Hive-style partition column of a laid-out table: its folders are block_id=N.
BLOCK_ID_COLUMN = "block_id"
# A row's 0-based block index while a layout is being written (before ids are given out).
BLOCK_INDEX_COLUMN = "_block"
# A row's bit string: character i is '1' when the row passes cut i.
VECTOR_COLUMN = "_vec"
# The most rows one block may hold, wherever a block size is given or checked.
MAX_BLOCK_ROWS = 10**9

# <warehouse>/_runs/<table>/<partition or _all>/<run>/: a run's artifacts and its metrics file.
RUNS_FOLDER = "_runs"
UNPARTITIONED = "_all"
METRICS_FILE = "metrics.json"


def staging_name(run_id: str) -> str:
    """The folder name of a run id (Airflow run ids hold ':' and '+')."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)
