"""What block metadata proves about a query's rows in a block."""

from __future__ import annotations

from enum import Enum


class Verdict(Enum):
    """Skipping's answer for one block. Anything not proven is ROWS_MIGHT_MATCH:
    when in doubt, the block is read.

    Verdicts for all blocks at once are bool arrays named `might_match`,
    True meaning ROWS_MIGHT_MATCH (the member's value), False ROWS_CANNOT_MATCH.
    """

    ROWS_MIGHT_MATCH = True  # read the block
    ROWS_CANNOT_MATCH = False  # proven: no row of the block makes the predicate TRUE; skip it
