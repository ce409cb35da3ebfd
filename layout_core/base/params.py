"""Checks of what users and DAG runs pass in (names, partitions, paths, sizes, URLs), made
before any work starts: before a SparkSession, before the catalog is opened.

Each check returns the value to use or raises `ParamError` with one line that says what
is wrong and what is allowed. User values are shown with repr() and cut short, so a
name holding a newline or a megabyte cannot forge or flood a log line.

Names reach SQL only after these checks, and then only as quoted identifiers or bound
parameters; partition values become folder names (`<column>=<value>`), so they are
limited to characters that are safe in a path, in a Hadoop path and in a glob.

Allowed roots (`LAYOUT_ALLOWED_ROOTS`, or `allowed_roots` in layout.yaml): when set,
every input path (source, query log, change batch, warehouse, raw tables) must resolve
(symbolic links followed) inside one of them; URLs (s3://...) must start with a root
that is a URL. When unset (the default) any path is accepted, as before; `..` components
are refused either way.
"""

from __future__ import annotations

import codecs
import datetime as dt
import os
import re
from pathlib import Path
from typing import Any, Iterable

from layout_core.base.errors import UserError
from layout_core.base.names import BLOCK_ID_COLUMN, MAX_BLOCK_ROWS

MAX_NAME_CHARS = 128  # identifiers, partition values (a folder name is at most 255 bytes)
MAX_RUN_ID_CHARS = 250
PATH_SHOWN = 500  # paths in errors are shown whole up to this length: a user must see which file

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PARTITION_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
# For DAG Params (JSON schema; Jinja such as {{ ds }} is rendered later, then checked again):
# no path separators, no "..", no control characters.
PARTITION_PARAM_PATTERN = r"^(?!.*\.\.)[^/\\\x00-\x1f\x7f]{0,256}$"
PATH_PARAM_PATTERN = r"^(?!(.*[/\\])?\.\.([/\\].*)?$)[^\x00-\x1f\x7f]*$"

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# Magic numbers of files a query log is sometimes confused with: Parquet, gzip, zip,
# bzip2, xz, zstd, PNG, ELF, SQLite.
_BINARY_MAGIC = (b"PAR1", b"\x1f\x8b", b"PK\x03\x04", b"BZh", b"\xfd7zXZ", b"\x28\xb5\x2f\xfd",
                 b"\x89PNG", b"\x7fELF", b"SQLite format 3\x00")
_HEAD_BYTES = 8192
# A stray NUL or bad byte inside one statement is that statement's problem (reported, never
# fatal); a file whose head is this much non-text is not a query log at all.
_BINARY_SHARE = 0.10


class ParamError(UserError, ValueError):
    """A parameter is refused before any work starts."""


def shown(value: Any, limit: int = 80) -> str:
    """repr() of a user value, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...'"


# --------------------------------------------------------------------------- names


def identifier(name: str, what: str) -> str:
    """A plain SQL identifier: letters, digits and _, not starting with a digit."""
    if not isinstance(name, str) or not IDENTIFIER.match(name) or len(name) > MAX_NAME_CHARS:
        raise ParamError(f"{what} must be a plain name (letters, digits and _, at most {MAX_NAME_CHARS} "
                         f"characters, not starting with a digit), not {shown(name)}")
    return name


def table_of(schema, name: str):
    """The schema's table called `name`; the error lists the tables there are."""
    from layout_core.base.schema import SchemaError  # base.schema needs yaml: the DAG files import this module

    try:
        return schema.table(name)
    except SchemaError:
        raise ParamError(f"unknown table {shown(name)}; the schema {schema.name!r} has: "
                         f"{', '.join(sorted(schema.tables))}") from None


def column_of(table, name: str, what: str) -> str:
    """A column of `table` (matched without regard to case, as Spark does); its schema name."""
    by_lower = {c.lower(): c for c in table.column_names}
    if not isinstance(name, str) or name.lower() not in by_lower:
        raise ParamError(f"{what} {shown(name)} is not a column of {table.name}; its columns: "
                         f"{', '.join(table.column_names)}")
    return by_lower[name.lower()]


def partition_column(table, name: str) -> str:
    """The name of the partition folders' key (`dt` in `dt=1995-01/`): Spark's partition
    discovery adds it as a column, so it must not be a column of the table already."""

    identifier(name, "--partition-column")
    taken = {c.lower() for c in table.column_names} | {BLOCK_ID_COLUMN}
    if name.lower() in taken:
        raise ParamError(f"--partition-column {name!r} is already a column of {table.name} (or the block "
                         f"column): partition folders would clash with it; pick another name, e.g. dt")
    return name


def partition_value(text: str, required: bool = False) -> str:
    """A partition value, which becomes a folder name `<column>=<value>` ('' = unpartitioned)."""
    if not isinstance(text, str):
        raise ParamError(f"the partition must be text, not {shown(text)}")
    if not text:
        if required:
            raise ParamError("the partition is empty: give a value such as 2024-01-01")
        return text
    problem = ("holds a path separator" if "/" in text or "\\" in text else
               "holds '..'" if ".." in text else
               "holds a control character" if _CONTROL.search(text) else
               f"is longer than {MAX_NAME_CHARS} characters" if len(text) > MAX_NAME_CHARS else
               None if PARTITION_VALUE.match(text) else
               "may only hold letters, digits and _ . + - (starting with a letter or digit)")
    if problem:
        raise ParamError(f"the partition {shown(text)} {problem}: it becomes a folder name in the warehouse")
    return text


def optional_float(text: str) -> float | None:
    """A job argument that may be empty (a DAG's template of an unset param): None then."""
    return float(text) if text.strip() else None


def run_id(text: str) -> str:
    """A run id (it names a staging folder after `_` replaces unsafe characters)."""
    if not text or not text.strip() or len(text) > MAX_RUN_ID_CHARS or _CONTROL.search(text) \
            or text.strip(".") == "":
        raise ParamError(f"--run-id must be 1 to {MAX_RUN_ID_CHARS} printable characters and not only dots, "
                         f"not {shown(text)}")
    return text


def iso_date(text: str | None, what: str) -> str | None:
    """A date such as 1995-01-01, or None; a date Spark cannot cast would silently drop every row."""
    if not text:
        return None
    try:
        dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        raise ParamError(f"{what} must be a date such as 1995-01-01, not {shown(text)}") from None
    return text


# --------------------------------------------------------------------------- numbers


def block_rows(value: Any, what: str = "block_rows") -> int:
    """Rows per block: an integer from 1 to MAX_BLOCK_ROWS."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,30}\s*", value):
        number = int(value)
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    if number is None or not 1 <= number <= MAX_BLOCK_ROWS:
        raise ParamError(f"{what} must be an integer from 1 to {MAX_BLOCK_ROWS:_}, not {shown(value)}")
    return number


# --------------------------------------------------------------------------- paths


def parse_roots(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """Allowed roots from a setting: a list, or text separated like PATH (os.pathsep; a ':'
    followed by '//' belongs to a URL such as s3://bucket/landing)."""
    if not value:
        return ()
    if isinstance(value, str):
        value = re.split(re.escape(os.pathsep) + r"(?!//)", value)
    return tuple(str(v).strip() for v in value if str(v).strip())


def _within(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


def input_path(text: str, what: str, roots: Iterable[str] = ()) -> str:
    """A path (or URL) the job reads from or writes under, returned unchanged: no '..'
    component, no control character, and inside one of `roots` when there are any."""
    if not isinstance(text, str) or not text.strip():
        raise ParamError(f"{what} is empty")
    if _CONTROL.search(text):
        raise ParamError(f"{what} {shown(text, PATH_SHOWN)} holds a control character")
    scheme = _SCHEME.match(text)
    local = not scheme or scheme.group(1).lower() == "file"
    path = text[len(scheme.group(0)):] if scheme and local else text
    if ".." in re.split(r"[/\\]", path):
        raise ParamError(f"{what} {shown(text, PATH_SHOWN)} has a '..' component: give the path without it")
    roots = tuple(roots)
    if not roots:
        return text
    if local:
        real = os.path.realpath(path)
        inside = any(_within(real, os.path.realpath(r[7:] if r.lower().startswith("file://") else r))
                     for r in roots if not _SCHEME.match(r) or r.lower().startswith("file://"))
    else:
        inside = any(_within(text, r) for r in roots if _SCHEME.match(r))
    if not inside:
        raise ParamError(f"{what} {shown(text, PATH_SHOWN)} is outside the allowed roots "
                         f"(LAYOUT_ALLOWED_ROOTS): {', '.join(roots)}")
    return text


def text_file(text: str, what: str, roots: Iterable[str] = ()) -> str:
    """A local text file (a query log, SQL): not missing, not a folder, not binary."""
    input_path(text, what, roots)
    path = Path(text[7:] if text.lower().startswith("file://") else text)
    if _SCHEME.match(str(path)):
        raise ParamError(f"{what} must be a local file, not {shown(text, PATH_SHOWN)}")
    if not path.exists():
        raise ParamError(f"{what} {shown(text, PATH_SHOWN)} does not exist")
    if not path.is_file():
        raise ParamError(f"{what} {shown(text, PATH_SHOWN)} is {'a folder' if path.is_dir() else 'not a regular file'}: "
                         f"give a file of SQL statements")
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError as e:
        raise ParamError(f"{what} {shown(text, PATH_SHOWN)} cannot be read: {e.strerror}") from None
    if looks_binary(head):
        raise ParamError(f"{what} {shown(text, PATH_SHOWN)} is a binary file, not SQL text (UTF-8)")
    return text


def looks_binary(head: bytes) -> bool:
    """The first bytes of a file that is not text: a known binary format, or a head this
    share of which is NUL, other control bytes or invalid UTF-8."""
    if head.startswith(_BINARY_MAGIC):
        return True
    if not head:
        return False
    decoded = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(head, final=False)
    bad = sum(1 for ch in decoded if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\f"))
    return bad > _BINARY_SHARE * len(decoded)
