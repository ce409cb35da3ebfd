"""The layout catalog: tables, layout versions, their cuts, blocks and trees (SQLAlchemy Core)."""

from .records import (
    CUT_KINDS,
    STATES,
    UNPARTITIONED,
    ActiveLayout,
    BlockRecord,
    CatalogSnapshot,
    CutRecord,
    PurgeRecord,
    TableInfo,
    TreeNodeRecord,
    VersionInfo,
    leaf_of,
)
from .store import Catalog, CatalogError, check_trees

__all__ = [
    "CUT_KINDS",
    "STATES",
    "UNPARTITIONED",
    "ActiveLayout",
    "BlockRecord",
    "Catalog",
    "CatalogError",
    "CatalogSnapshot",
    "CutRecord",
    "PurgeRecord",
    "TableInfo",
    "TreeNodeRecord",
    "VersionInfo",
    "check_trees",
    "leaf_of",
]
