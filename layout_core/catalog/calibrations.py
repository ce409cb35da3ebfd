"""`layout calibrate` measurements of w (MTO §5.1.2): storing them and the latest one."""

from __future__ import annotations

import math

import sqlalchemy as sa

from layout_core.catalog.connection import CatalogConnection
from layout_core.catalog.db_tables import calibrations_t
from layout_core.catalog.errors import CatalogError
from layout_core.catalog.records import CalibrationRecord
from layout_core.catalog.rows import as_utc, calibration_record


class Calibrations(CatalogConnection):
    """`Catalog`'s calibration methods."""

    def record_calibration(self, calibration) -> int:
        """Store a `calibrate.Calibration` (or a `CalibrationRecord`); returns its id.

        w and both timings must be finite and > 0; a naive `measured_at` means
        UTC and a missing one means now.
        """
        c = calibration
        numbers = {"w": c.w, "write_seconds_per_block": c.write_seconds_per_block,
                   "read_seconds_per_block": c.read_seconds_per_block}
        for name, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise CatalogError(f"a calibration's {name} must be a finite number > 0, not {value!r}")
        if c.block_rows < 1 or c.blocks < 1 or (c.rounds is not None and c.rounds < 1):
            raise CatalogError(f"a calibration needs block_rows, blocks and rounds >= 1, not "
                               f"{c.block_rows}, {c.blocks}, {c.rounds}")
        with self._write() as conn:
            result = conn.execute(calibrations_t.insert().values(
                measured_at=as_utc(c.measured_at) or self._now(), w=float(c.w),
                write_seconds=float(c.write_seconds_per_block),
                read_seconds=float(c.read_seconds_per_block), block_rows=int(c.block_rows),
                blocks=int(c.blocks), rounds=None if c.rounds is None else int(c.rounds),
                location=str(c.location)))
            return int(result.inserted_primary_key[0])

    def latest_calibration(self) -> CalibrationRecord | None:
        """The most recently measured calibration (ties: the last recorded), or None."""
        with self._read() as conn:
            row = conn.execute(sa.select(calibrations_t).order_by(
                calibrations_t.c.measured_at.desc(), calibrations_t.c.id.desc()).limit(1)).one_or_none()
            return None if row is None else calibration_record(row)
