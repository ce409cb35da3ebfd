"""`Catalog`: the layout catalog's one public class, composed of its parts.

Layout versions move building -> active -> retired -> purged (or building ->
failed -> purged). Every state change that readers must never see half-done
(activating one version while retiring the previous one, reserving block ids)
happens in one transaction. JSON is stored as Text and bit vectors as hex text,
so both backends store the same bytes and Python ints wider than 64 bits survive.
"""

from __future__ import annotations

from layout_core.catalog.calibrations import Calibrations
from layout_core.catalog.history import QueryHistory
from layout_core.catalog.layouts import LayoutReader
from layout_core.catalog.purges import PurgeLedger
from layout_core.catalog.table_registry import TableRegistry
from layout_core.catalog.versions import VersionBuilder


class Catalog(TableRegistry, VersionBuilder, LayoutReader, PurgeLedger, QueryHistory, Calibrations):
    """Tables, their layout versions, and each version's cuts, blocks, trees and plan.

    `Catalog(url)` opens the database and brings its schema up to date (see
    `migrations`): a new database gets the catalog's tables, an older catalog
    is upgraded, one written by newer code is refused (`CatalogSchemaError`).

    Concurrency. Several writers (nightly runs, partial reorganizations, change
    batches, on other machines) and many routers may use one catalog at once:

    - Readers: `snapshot()` (and every other read) is one transaction whose
      statements all see the same moment (REPEATABLE READ on PostgreSQL; one
      SQLite read transaction), so a router never mixes two versions.
    - Writers of a table are serialized by the lock on its `layout_tables` row,
      held only for each short catalog transaction, never across a Spark job.
    - A version may only retire the version it replaces. `begin_version`
      records the version serving the partition then (`VersionInfo.replaces`);
      `activate` retires it, or refuses with `VersionSuperseded` if another
      version went live meanwhile (`activate(replaces=...)` names it explicitly
      instead). So of two runs of one (table, partition) that overlap between
      begin_version and activate, the first to activate wins and the other fails
      cleanly; one run never undoes a layout built concurrently by another. Runs
      that do not overlap (a day run again later) simply take turns.
    - Retired versions keep their rows and files: gc deletes them only a grace
      period after `retired_at`, so a route taken just before an activation
      still names folders that exist.

    `clock` (returning aware datetimes) is there so tests can pin timestamps.
    """

    def __enter__(self) -> Catalog:
        return self
