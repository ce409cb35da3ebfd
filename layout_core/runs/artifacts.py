"""What one step hands the next: frozen dataclasses written as JSON in the run's folder.

Every artifact file carries a format version and the name of its class; a
reader validates both and every field's type, so a missing, older or
malformed file fails the step with a message naming the file, the field and
the step that should have written it. An artifact class names its file and the
step that writes it (`FILE`, `STEP`); `WrittenBlocks` and `VerifiedBlocks` are
shared by every flow, each flow subclassing them with its own file names. The
layout plan itself is `optimizers.plan.LayoutPlan` (plan.json), which validates
the same way.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar

from layout_core.base.errors import UserError
from layout_core.runs.paths import RunPaths, StepError, write_json

# 2 (2026-11-27): written blocks carry the rows and checksum they must hold (verify_blocks).
ARTIFACT_FORMAT = 2


class ArtifactError(UserError, RuntimeError):
    """An artifact is missing or cannot be read; the message says which step to run again."""


@dataclass(frozen=True)
class WrittenBlocks:
    """The block folders a step wrote for a new version, and the rows (count and
    order-independent checksum, `verify.rows_fingerprint`) they must hold together."""

    FILE: ClassVar[str] = "written.json"
    STEP: ClassVar[str] = "write_blocks"
    version: int
    first_block_id: int
    blocks: dict  # str(block id) -> {"path": str, "bytes": int, ...}: what the flow keeps of each
    expected_rows: int
    expected_checksum: str


@dataclass(frozen=True)
class VerifiedBlocks:
    """The rows found in the written blocks, equal to the expected ones."""

    FILE: ClassVar[str] = "verified.json"
    STEP: ClassVar[str] = "verify"
    version: int
    rows: int
    checksum: str


def write_artifact(folder: Path, artifact) -> Path:
    data = {"format": ARTIFACT_FORMAT, "artifact": type(artifact).__name__, **asdict(artifact)}
    return write_json(folder / artifact.FILE, data)


def read_artifact(folder: Path, cls, reader: str):
    """The artifact `cls` from `folder`, validated; `reader` is the step that needs it."""
    path = folder / cls.FILE
    where = f"{path} (written by {cls.STEP})"
    if not path.exists():
        raise ArtifactError(f"{where} is missing: run {cls.STEP} before {reader}")
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise ArtifactError(f"{where} is not JSON ({e}): run {cls.STEP} again") from None
    if not isinstance(data, dict) or data.get("format") != ARTIFACT_FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise ArtifactError(f"{where} is from an older version (format {found!r}, this version reads "
                            f"{ARTIFACT_FORMAT}): run {cls.STEP} again")
    if data.get("artifact") != cls.__name__:
        raise ArtifactError(f"{where} holds a {data.get('artifact')!r}, not a {cls.__name__}: run {cls.STEP} again")
    try:
        return _build(cls, data)
    except _FieldError as e:
        raise ArtifactError(f"{where}: field {e.field} {e.problem}: run {cls.STEP} again") from None


class _FieldError(Exception):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(field, problem)
        self.field, self.problem = field, problem


def _build(cls, data: dict, prefix: str = ""):
    hints = typing.get_type_hints(cls)
    values = {}
    for f in fields(cls):
        name = prefix + f.name
        if f.name not in data:
            if f.default is not MISSING:
                continue
            raise _FieldError(name, "is missing")
        values[f.name] = _value(hints[f.name], data[f.name], name)
    return cls(**values)


def _value(hint, value: Any, name: str):
    """`value` checked against (and converted to) the type `hint`."""
    origin = typing.get_origin(hint)
    if is_dataclass(hint):
        if not isinstance(value, dict):
            raise _FieldError(name, f"must be an object, not {type(value).__name__}")
        return _build(hint, value, name + ".")
    if origin is tuple:
        if not isinstance(value, list):
            raise _FieldError(name, f"must be a list, not {type(value).__name__}")
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_value(args[0], v, f"{name}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise _FieldError(name, f"must have {len(args)} items, not {len(value)}")
        return tuple(_value(a, v, f"{name}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            try:
                return _value(arg, value, name)
            except _FieldError:
                continue
        raise _FieldError(name, f"has the wrong type ({type(value).__name__})")
    expected = {int: int, float: (int, float), str: str, bool: bool, dict: dict, type(None): type(None)}[hint]
    if not isinstance(value, expected) or (hint is int and isinstance(value, bool)):
        raise _FieldError(name, f"must be {getattr(hint, '__name__', hint)}, not {type(value).__name__}")
    return value


def read_step_artifact(paths: RunPaths, cls, step: str):
    """`read_artifact` from the run's folder for a step: what is wrong is the step's error."""
    try:
        return read_artifact(paths.staging, cls, step)
    except ArtifactError as e:
        raise StepError(str(e)) from None
