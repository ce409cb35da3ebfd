"""Has the day's batch landed? What `layout_nightly`'s `wait_for_input` sensor asks.

The nightly DAG's `source` may name the day's landing folder through the run's
logical date (`/landing/lineitem/dt={{ ds }}`); the sensor renders it, then
asks `missing_input` until it answers None or the sensor's timeout passes.

A batch is there when the path (a file, a folder, or a glob such as
`/landing/dt=2026-03-01/*.parquet`) exists and holds at least one data file
(a name not starting with `_` or `.`); with `ready_file` (e.g. `_SUCCESS`,
which Spark and most loaders write last) the folder must also hold that file,
so a half-copied batch is never read. Paths with a scheme other than
`file://` (s3://, gs://, hdfs://, ...) are checked through fsspec, which needs
that file system's package in the Airflow worker.

Pure Python: no Spark, no Airflow.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

from layout_core.base.errors import UserError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_GLOB = re.compile(r"[*?\[]")


class LandingError(UserError):
    """The source cannot be checked at all (not: it is not there yet)."""


def _is_data(name: str) -> bool:
    return not name.startswith(("_", "."))


def missing_input(source: str, ready_file: str = "") -> str | None:
    """None when the batch at `source` is complete, else one line saying what is missing."""
    source = (source or "").strip()
    if not source:
        raise LandingError("no source: set the `source` param (or LAYOUT_NIGHTLY_SOURCE), "
                           "e.g. /landing/lineitem/dt={{ ds }}")
    if ready_file and ("/" in ready_file or ready_file in (".", "..")):
        raise LandingError(f"ready_file must be a file name inside the source folder, not {ready_file!r}")
    scheme = _SCHEME.match(source)
    if scheme and scheme.group(1).lower() != "file":
        return _missing_remote(source, ready_file)
    path = source[len(scheme.group(0)):] if scheme else source
    if _GLOB.search(path):
        if ready_file:
            raise LandingError("ready_file needs a folder as the source, not a glob")
        matches = [m for m in glob.glob(path) if _is_data(Path(m).name)]
        return None if matches else f"nothing matches {path}"
    p = Path(path)
    if not p.exists():
        return f"{path} does not exist"
    if p.is_dir():
        names = [c.name for c in p.iterdir()]
        if ready_file and ready_file not in names:
            return f"{path} has no {ready_file} yet"
        if not any(_is_data(n) for n in names):
            return f"{path} holds no data files"
    return None


def _missing_remote(source: str, ready_file: str) -> str | None:
    try:
        from fsspec.core import url_to_fs  # optional: only a URL source (s3://...) needs fsspec

        fs, path = url_to_fs(source)
    except (ImportError, ValueError) as e:
        raise LandingError(f"cannot check {source}: {e} (install that file system's fsspec package "
                           f"in the Airflow worker)") from None
    if _GLOB.search(path):
        if ready_file:
            raise LandingError("ready_file needs a folder as the source, not a glob")
        return None if any(_is_data(m.rstrip("/").rsplit("/", 1)[-1]) for m in fs.glob(path)) \
            else f"nothing matches {source}"
    if not fs.exists(path):
        return f"{source} does not exist"
    if fs.isdir(path):
        names = [n.rstrip("/").rsplit("/", 1)[-1] for n in fs.ls(path, detail=False)]
        if ready_file and ready_file not in names:
            return f"{source} has no {ready_file} yet"
        if not any(_is_data(n) for n in names):
            return f"{source} holds no data files"
    return None
