"""What the catalog raises: misuse, an unreachable database, a lost activation race,
and a database whose schema this code cannot use."""

from __future__ import annotations

from layout_core.base.errors import UserError
from layout_core.base.urls import masked_url, without_secrets


class CatalogError(Exception):
    """The catalog was misused: unknown table or version, or a wrong state change."""


class CatalogUnreachable(CatalogError):
    """The catalog database cannot be opened. The message names the URL with its password
    masked; `reason` is the driver's reason alone, without the URL."""

    def __init__(self, url: str, error: BaseException) -> None:
        lines = str(getattr(error, "orig", None) or error).strip().splitlines()
        self.reason = without_secrets(lines[0] if lines else type(error).__name__, url)[:300]
        super().__init__(f"cannot open the catalog {masked_url(url)}: {self.reason}")


class VersionSuperseded(CatalogError):
    """`activate` refused a version because another version replaced the one it replaces
    (the one it was built from): activating it would silently undo a newer layout. The
    version can never be activated; its run lost the race and should be marked failed."""


class CatalogSchemaError(CatalogError, UserError):
    """The database's schema is not one this code can use: a catalog written by newer
    code, or tables named like the catalog's that are not a layout catalog. The message
    is one line that says what to run."""
