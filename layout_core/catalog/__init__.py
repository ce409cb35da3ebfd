"""The layout catalog: tables, layout versions, their cuts, blocks and trees (SQLAlchemy Core)."""

from .records import (
    CUT_KINDS,
    QUERY_SOURCES,
    STATES,
    UNPARTITIONED,
    ActiveLayout,
    BlockRecord,
    CalibrationRecord,
    CatalogSnapshot,
    CutRecord,
    PurgeRecord,
    QueryRecord,
    RefRead,
    TableInfo,
    TreeNodeRecord,
    VersionInfo,
    leaf_of,
)
from .store import Catalog, CatalogError, check_trees

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
    "CatalogSnapshot",
    "CutRecord",
    "PurgeRecord",
    "QueryRecord",
    "RefRead",
    "TableInfo",
    "TreeNodeRecord",
    "VersionInfo",
    "check_trees",
    "leaf_of",
]
