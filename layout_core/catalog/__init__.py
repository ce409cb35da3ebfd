"""The layout catalog: tables, layout versions, their cuts and blocks (SQLAlchemy Core)."""

from .records import (
    CUT_KINDS,
    STATES,
    UNPARTITIONED,
    ActiveLayout,
    BlockRecord,
    CatalogSnapshot,
    CutRecord,
    TableInfo,
    VersionInfo,
)
from .store import Catalog, CatalogError

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
    "TableInfo",
    "VersionInfo",
]
