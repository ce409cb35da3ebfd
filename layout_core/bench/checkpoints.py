"""What a benchmark measured of one (layout, table), kept on disk so that a
run stopped halfway (killed, out of memory, the session's end) goes on where
it stopped instead of laying every table out again.

A checkpoint is valid only for the same code and the same inputs: its file
name carries a hash of every source file of `layout_core` and of what the
layout depends on (the data set, the block size, the training queries, the
layout's settings). Anything else changed, the hash changes and the layout
is computed again; stale files are never read as current.
"""

from __future__ import annotations

import copyreg
import hashlib
import io
import logging
import os
import pickle
from pathlib import Path
from types import MappingProxyType
from typing import Any

import layout_core

log = logging.getLogger("layout.bench.checkpoints")

_SOURCE_HASH: str | None = None


def source_hash() -> str:
    """A hash of every .py file of the installed `layout_core` (path and bytes)."""
    global _SOURCE_HASH
    if _SOURCE_HASH is None:
        root = Path(layout_core.__file__).parent
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
        _SOURCE_HASH = digest.hexdigest()
    return _SOURCE_HASH


def read_only(mapping: dict) -> MappingProxyType:
    """A read-only view of `mapping` (what a pickled MappingProxyType loads as)."""
    return MappingProxyType(mapping)


def _mapping_proxy(mapping):
    return read_only, (dict(mapping),)


class _Pickler(pickle.Pickler):
    # read-only mappings (block statistics, plans) pickle as what they wrap and come back read-only
    dispatch_table = copyreg.dispatch_table.copy()
    dispatch_table[MappingProxyType] = _mapping_proxy


class Checkpoints:
    """One file per (layout, table) under `folder`, named by the hash of `inputs`
    (anything repr-able that decides the layout) and of the code."""

    def __init__(self, folder: Path, inputs: Any) -> None:
        self.folder = Path(folder)
        self.run_key = hashlib.sha256((source_hash() + repr(inputs)).encode()).hexdigest()[:16]

    def _path(self, layout: str, table: str, extra: Any) -> Path:
        key = hashlib.sha256(f"{self.run_key}|{layout}|{table}|{extra!r}".encode()).hexdigest()[:16]
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in layout)
        return self.folder / f"{safe}.{table}.{key}.pickle"

    def load(self, layout: str, table: str, extra: Any = None):
        """The value saved for this (layout, table) by the same code and inputs, or None."""
        path = self._path(layout, table, extra)
        if not path.exists():
            return None
        try:
            value = pickle.loads(path.read_bytes())
        except Exception as error:  # a torn or foreign file: measure again
            log.warning("checkpoint %s unreadable (%s): laid out again", path.name, error)
            return None
        log.info("%s %s: measured by an earlier run of this code (%s), not laid out again", layout, table,
                 path.name)
        return value

    def save(self, layout: str, table: str, value: Any, extra: Any = None) -> None:
        """Written to a temporary file and renamed: a run killed while saving leaves no half file."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(layout, table, extra)
        buffer = io.BytesIO()
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(buffer.getvalue())
        os.replace(temporary, path)
