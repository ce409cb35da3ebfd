"""The layout catalog: tables, layout versions, their cuts, blocks and trees (SQLAlchemy Core).

`Catalog` (catalog.py) is composed of: table_registry (tables), versions
(building and activating versions), layouts (reading versions, active layouts,
snapshots), purges (what gc reads and records), history (the query history),
calibrations; over connection (engine, transactions, row locks). db_tables
describes the database tables, rows converts rows to records (records.py),
migrations/ holds the Alembic revisions applied when a catalog is opened.
"""

from layout_core.catalog.catalog import Catalog
from layout_core.catalog.errors import CatalogError, CatalogSchemaError, CatalogUnreachable, VersionSuperseded
from layout_core.catalog.migrations import SchemaUpgrade, upgrade_catalog
from layout_core.catalog.records import (
    CUT_KINDS, QUERY_SOURCES, STATES, UNPARTITIONED, ActiveLayout, BlockRecord, CalibrationRecord,
    CatalogSnapshot, CutRecord, CutUpdate, PurgeRecord, QueryRecord, RefRead, TableInfo,
    TreeNodeRecord, VersionInfo, leaf_of,
)
from layout_core.catalog.trees import check_trees

__all__ = [
    "CUT_KINDS",
    "QUERY_SOURCES",
    "STATES",
    "UNPARTITIONED",
    "ActiveLayout",
    "BlockRecord",
    "CalibrationRecord",
    "Catalog",
    "CatalogError",
    "CatalogSchemaError",
    "CatalogUnreachable",
    "CatalogSnapshot",
    "CutRecord",
    "CutUpdate",
    "PurgeRecord",
    "QueryRecord",
    "RefRead",
    "SchemaUpgrade",
    "TableInfo",
    "TreeNodeRecord",
    "VersionInfo",
    "VersionSuperseded",
    "check_trees",
    "leaf_of",
    "upgrade_catalog",
]
