"""The layout catalog: tables, layout versions, their cuts, blocks and trees (SQLAlchemy Core)."""

from layout_core.catalog.records import (
    CUT_KINDS, QUERY_SOURCES, STATES, UNPARTITIONED, ActiveLayout, BlockRecord, CalibrationRecord,
    CatalogSnapshot, CutRecord, CutUpdate, PurgeRecord, QueryRecord, RefRead, TableInfo,
    TreeNodeRecord, VersionInfo, leaf_of,
)
from layout_core.catalog.store import (
    Catalog, CatalogError, CatalogUnreachable, VersionSuperseded, check_trees,
)

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
    "CatalogUnreachable",
    "CatalogSnapshot",
    "CutRecord",
    "CutUpdate",
    "PurgeRecord",
    "QueryRecord",
    "RefRead",
    "TableInfo",
    "TreeNodeRecord",
    "VersionInfo",
    "VersionSuperseded",
    "check_trees",
    "leaf_of",
]
